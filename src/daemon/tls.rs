//! The daemon's own HTTPS (`--tls-cert`, `--tls-key`): the PEM files read into one rustls
//! server configuration, shared by the main listener and the metrics-only one.
//!
//! Errors name the file and what is wrong with it in words of their own, never a PEM parser's
//! message about the key file, which may quote a line of it: key material reaches no log.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Largest certificate or key file read. A chain of a few certificates is a few KiB; the bound
/// keeps a path such as `/dev/zero` from filling memory.
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// Where the certificate chain and its private key are (config's shape; flags make one too).
pub use crate::config::listeners::TlsFiles;

/// Why the TLS files cannot be served with.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// The certificate file could not be read.
    #[error("could not read the TLS certificate {path}: {source}")]
    CertUnreadable {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The certificate file is no PEM certificate chain.
    #[error("the TLS certificate {path} is not a PEM certificate chain: {reason}")]
    CertInvalid {
        /// The file.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The key file could not be read.
    #[error("could not read the TLS key {path}: {source}")]
    KeyUnreadable {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The key file holds no PEM private key. (No detail: it could quote the file.)
    #[error("the TLS key {path} holds no PEM private key (PKCS#8 \"PRIVATE KEY\", PKCS#1 \"RSA PRIVATE KEY\" or SEC1 \"EC PRIVATE KEY\")")]
    KeyInvalid {
        /// The file.
        path: String,
    },
    /// rustls refused the pair (an unsupported key type, or a key that is not the
    /// certificate's).
    #[error("the TLS certificate {cert} and key {key} cannot be served: {reason}")]
    Rejected {
        /// The certificate file.
        cert: String,
        /// The key file.
        key: String,
        /// rustls's reason (it names kinds of problem, never key bytes).
        reason: String,
    },
}

/// Reads `files` into a server configuration that speaks HTTP/1.1 only: the WebSockets ride
/// HTTP/1.1 upgrades, which HTTP/2 does not have.
pub fn load(files: &TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let cert_path = files.cert.display().to_string();
    let key_path = files.key.display().to_string();
    let cert_pem = read_bounded(&files.cert).map_err(|source| TlsError::CertUnreadable {
        path: cert_path.clone(),
        source,
    })?;
    let chain = certificates(&cert_pem).map_err(|reason| TlsError::CertInvalid {
        path: cert_path.clone(),
        reason,
    })?;
    let key_pem = read_bounded(&files.key).map_err(|source| TlsError::KeyUnreadable {
        path: key_path.clone(),
        source,
    })?;
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|_| TlsError::KeyInvalid {
        path: key_path.clone(),
    })?;
    let rejected = |e: rustls::Error| TlsError::Rejected {
        cert: cert_path.clone(),
        key: key_path.clone(),
        reason: e.to_string(),
    };
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(rejected)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(rejected)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The crypto provider: *ring*. rustls 0.23.48 deprecates it for lacking post-quantum key
/// exchange and points to aws-lc-rs, whose C build (aws-lc-sys) is many times ring's on the
/// 2-core machines this is built on; the classical suites ring has are those every browser
/// still offers. Revisit when the post-quantum groups matter to the threat model.
#[allow(deprecated)]
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The certificates of a PEM chain, at least one.
fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let chain = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())?;
    if chain.is_empty() {
        return Err("no \"BEGIN CERTIFICATE\" section in it".into());
    }
    Ok(chain)
}

/// The file's bytes, refusing one over [`MAX_PEM_BYTES`].
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(std::io::Error::other(format!(
            "larger than {MAX_PEM_BYTES} bytes"
        )));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
        (cert.cert.pem(), cert.key_pair.serialize_pem())
    }

    fn files(dir: &Path, cert: &str, key: &str) -> TlsFiles {
        let files = TlsFiles {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        };
        std::fs::write(&files.cert, cert).expect("write cert");
        std::fs::write(&files.key, key).expect("write key");
        files
    }

    #[test]
    fn a_matching_pair_loads_for_http1_only() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key) = pair();
        let config = load(&files(dir.path(), &cert, &key)).expect("loads");
        assert_eq!(config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn each_bad_file_is_named_and_no_key_text_is_quoted() {
        let dir = tempfile::tempdir().expect("dir");
        let (cert, key) = pair();
        let (_, other_key) = pair();

        let missing = TlsFiles {
            cert: dir.path().join("nope.pem"),
            key: dir.path().join("key.pem"),
        };
        assert!(matches!(
            load(&missing),
            Err(TlsError::CertUnreadable { .. })
        ));

        let err = load(&files(dir.path(), "not pem", &key)).expect_err("no cert");
        assert!(matches!(err, TlsError::CertInvalid { .. }), "{err}");

        // A key file with a broken body: the error must not quote it.
        let broken = key.replace('\n', "\n!secret-ish!\n");
        let err = load(&files(dir.path(), &cert, &broken)).expect_err("bad key");
        assert!(matches!(err, TlsError::KeyInvalid { .. }), "{err}");
        assert!(!err.to_string().contains("secret-ish"), "{err}");

        let err = load(&files(dir.path(), &cert, &cert)).expect_err("cert as key");
        assert!(matches!(err, TlsError::KeyInvalid { .. }), "{err}");

        let err = load(&files(dir.path(), &cert, &other_key)).expect_err("mismatch");
        assert!(matches!(err, TlsError::Rejected { .. }), "{err}");
        let missing_key = TlsFiles {
            cert: dir.path().join("cert.pem"),
            key: dir.path().join("gone.pem"),
        };
        assert!(matches!(
            load(&missing_key),
            Err(TlsError::KeyUnreadable { .. })
        ));
    }
}
