//! HTTPS for tests: a certificate authority and a server certificate made at test time (so
//! nothing in the repo expires), written as PEM files for `--tls-cert`/`--tls-key`, and
//! clients that trust that authority and nothing else.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair, SanType};

/// A test CA and a server certificate it signed for `localhost` and `127.0.0.1`.
pub struct TestCert {
    /// The CA's certificate, PEM: what clients trust (Node's `NODE_EXTRA_CA_CERTS`).
    pub ca_path: PathBuf,
    /// The server's chain, PEM (`--tls-cert`).
    pub cert_path: PathBuf,
    /// The server's key, PEM (`--tls-key`).
    pub key_path: PathBuf,
    ca_der: rustls::pki_types::CertificateDer<'static>,
    _dir: tempfile::TempDir,
}

impl TestCert {
    /// Makes the CA and the server certificate, and writes them in a temp dir of their own.
    pub fn new() -> TestCert {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "atc test CA");
        let ca = ca_params.self_signed(&ca_key).expect("CA certificate");

        let key = KeyPair::generate().expect("server key");
        let mut params = CertificateParams::new(vec!["localhost".to_string()]).expect("params");
        params
            .subject_alt_names
            .push(SanType::IpAddress([127, 0, 0, 1].into()));
        let cert = params.signed_by(&key, &ca, &ca_key).expect("server cert");

        let dir = tempfile::tempdir().expect("temp dir");
        let write = |name: &str, text: String| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).expect("write PEM");
            path
        };
        TestCert {
            ca_path: write("ca.pem", ca.pem()),
            cert_path: write("cert.pem", cert.pem()),
            key_path: write("key.pem", key.serialize_pem()),
            ca_der: ca.der().clone(),
            _dir: dir,
        }
    }

    /// The files, as the daemon takes them.
    pub fn files(&self) -> atc::daemon::tls::TlsFiles {
        atc::daemon::tls::TlsFiles {
            cert: self.cert_path.clone(),
            key: self.key_path.clone(),
        }
    }

    /// The directory the files are in.
    pub fn dir(&self) -> &Path {
        self._dir.path()
    }

    /// A client configuration that trusts this CA only, speaking HTTP/1.1 (the WebSockets
    /// are HTTP/1.1 upgrades).
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).expect("CA into the roots");
        let mut config = rustls::ClientConfig::builder_with_provider(atc::daemon::tls::provider())
            .with_safe_default_protocol_versions()
            .expect("protocol versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

impl Default for TestCert {
    fn default() -> Self {
        TestCert::new()
    }
}

/// An awc client whose connector trusts `tls` (the pooled API client, or a socket's).
pub fn client_trusting(tls: &Arc<rustls::ClientConfig>, keep_alive: Duration) -> awc::Client {
    awc::Client::builder()
        .connector(
            awc::Connector::new()
                .conn_keep_alive(keep_alive)
                .rustls_0_23(tls.clone()),
        )
        .timeout(Duration::from_secs(30))
        // No `max_http_version`: awc rebuilds its own TLS configuration for it, dropping
        // ours. `client_config` offers HTTP/1.1 only already.
        .finish()
}
