//! Where the daemon listens and how: `listen`, `metricsListen`, and the TLS files `tlsCert` and
//! `tlsKey`, each overridden by its `atc daemon` flag. A value that cannot be used is a config
//! problem, and that part runs on its default (no TLS for a bad pair: a non-loopback listen
//! then needs `--insecure-plaintext` or is refused, so nothing is served in clear by mistake).

use std::net::SocketAddr;
use std::path::PathBuf;

use super::{Config, ConfigProblem};

/// The certificate chain and private key the daemon serves HTTPS with (PEM files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// PEM certificate chain, the server's own certificate first.
    pub cert: PathBuf,
    /// PEM private key (PKCS#8, PKCS#1 or SEC1) of the first certificate.
    pub key: PathBuf,
}

/// The listener fields as written.
pub(super) struct RawListeners {
    pub listen: Option<String>,
    pub metrics_listen: Option<String>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
}

/// Checks the listener fields into `config`, adding a problem for each that cannot be used.
pub(super) fn apply(raw: RawListeners, config: &mut Config) {
    if let Some(listen) = raw.listen {
        if let Some(addr) = address(&listen, "listen", &mut config.problems) {
            config.listen = addr;
        }
    }
    if let Some(listen) = raw.metrics_listen {
        config.metrics_listen = address(&listen, "metricsListen", &mut config.problems);
    }
    config.tls = match (raw.tls_cert, raw.tls_key) {
        (None, None) => None,
        (Some(cert), Some(key)) => {
            let cert = absolute(cert, "tlsCert", &mut config.problems);
            let key = absolute(key, "tlsKey", &mut config.problems);
            cert.zip(key).map(|(cert, key)| TlsFiles { cert, key })
        }
        (cert, _) => {
            let (scope, missing) = if cert.is_some() {
                ("tlsCert", "tlsKey")
            } else {
                ("tlsKey", "tlsCert")
            };
            config.problems.push(problem(
                scope,
                format!("tlsCert and tlsKey go together: {missing} is missing, so no TLS"),
            ));
            None
        }
    };
}

fn address(text: &str, scope: &str, problems: &mut Vec<ConfigProblem>) -> Option<SocketAddr> {
    text.parse::<SocketAddr>().ok().or_else(|| {
        problems.push(problem(
            scope,
            format!("{scope} must be host:port with an IP address"),
        ));
        None
    })
}

/// A path that does not depend on where the daemon was started.
fn absolute(text: String, scope: &str, problems: &mut Vec<ConfigProblem>) -> Option<PathBuf> {
    let path = PathBuf::from(text);
    if path.is_absolute() {
        return Some(path);
    }
    problems.push(problem(scope, format!("{scope} must be an absolute path")));
    None
}

fn problem(scope: &str, detail: String) -> ConfigProblem {
    ConfigProblem {
        scope: scope.into(),
        problem: "config_malformed",
        detail,
        path: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checked(json: &str) -> Config {
        Config::from_json(json.as_bytes())
    }

    fn scopes(c: &Config) -> Vec<&str> {
        c.problems.iter().map(|p| p.scope.as_str()).collect()
    }

    #[test]
    fn a_tls_pair_of_absolute_paths_is_taken() {
        let c = checked(r#"{"tlsCert": "/etc/atc/cert.pem", "tlsKey": "/etc/atc/key.pem"}"#);
        assert!(c.problems.is_empty(), "{:?}", c.problems);
        assert_eq!(
            c.tls,
            Some(TlsFiles {
                cert: "/etc/atc/cert.pem".into(),
                key: "/etc/atc/key.pem".into(),
            })
        );
        assert_eq!(checked("{}").tls, None);
    }

    #[test]
    fn half_a_pair_or_a_relative_path_is_a_problem_and_no_tls() {
        let c = checked(r#"{"tlsCert": "/etc/atc/cert.pem"}"#);
        assert_eq!(scopes(&c), ["tlsCert"]);
        assert!(c.problems[0].detail.contains("tlsKey is missing"));
        assert_eq!(c.tls, None);
        let c = checked(r#"{"tlsKey": "/etc/atc/key.pem"}"#);
        assert_eq!(scopes(&c), ["tlsKey"]);
        let c = checked(r#"{"tlsCert": "cert.pem", "tlsKey": "/k.pem"}"#);
        assert_eq!(scopes(&c), ["tlsCert"]);
        assert_eq!(c.tls, None);
    }

    #[test]
    fn bad_addresses_keep_their_defaults() {
        let c = checked(r#"{"listen": "localhost:1", "metricsListen": "nope"}"#);
        assert_eq!(scopes(&c), ["listen", "metricsListen"]);
        assert_eq!(c.listen, Config::default().listen);
        assert_eq!(c.metrics_listen, None);
    }
}
