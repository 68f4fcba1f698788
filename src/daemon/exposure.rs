//! Who can reach the daemon's listeners, decided once at start: a loopback address is always
//! served; any other needs `--allow-remote` (the daemon types into shells) and either TLS or
//! `--insecure-plaintext` (without TLS, the bearer token crosses the network in clear text).
//! The same rule holds for `--listen`, a socket systemd hands over, and `--metrics-listen`.

use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;

use super::{MetricsListen, StartError};

/// What the operator allowed, and the TLS configuration when there is one.
#[derive(Clone)]
pub struct Exposure {
    /// `--allow-remote`.
    pub allow_remote: bool,
    /// `--insecure-plaintext`.
    pub insecure_plaintext: bool,
    /// Set by `--tls-cert`/`--tls-key`: every listener serves HTTPS.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

/// Whether a listener at some address may serve, by the rule of this module.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Loopback, or remote over TLS with `--allow-remote`.
    Serve,
    /// Remote, allowed, in plain text: served with a warning.
    ServeInClear,
    /// Remote without `--allow-remote`.
    RefuseRemote,
    /// Remote with `--allow-remote`, but neither TLS nor `--insecure-plaintext`.
    RefusePlaintext,
}

impl Exposure {
    /// The rule, on its own (unit-tested below).
    pub fn judge(&self, addr: SocketAddr) -> Verdict {
        match (
            addr.ip().is_loopback(),
            self.allow_remote,
            self.tls.is_some(),
            self.insecure_plaintext,
        ) {
            (true, ..) => Verdict::Serve,
            (false, false, ..) => Verdict::RefuseRemote,
            (false, true, true, _) => Verdict::Serve,
            (false, true, false, true) => Verdict::ServeInClear,
            (false, true, false, false) => Verdict::RefusePlaintext,
        }
    }

    /// Refuses `addr` when the rule says so.
    pub fn check(&self, addr: SocketAddr) -> Result<Verdict, StartError> {
        match self.judge(addr) {
            Verdict::RefuseRemote => Err(StartError::RemoteRefused(addr)),
            Verdict::RefusePlaintext => Err(StartError::PlaintextRefused(addr)),
            v => Ok(v),
        }
    }

    /// `http` or `https`, for the daemon's URL.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// Logs what this start serves: `--insecure-plaintext` warns at every start, whatever the
    /// address (a flag left in a unit file should keep being seen).
    pub fn log_start(&self) {
        if self.insecure_plaintext && self.tls.is_some() {
            tracing::warn!("--insecure-plaintext given with TLS on: it changes nothing, every listener serves HTTPS");
        } else if self.insecure_plaintext {
            tracing::warn!("--insecure-plaintext: a non-loopback listener serves plain HTTP, so the bearer token and every keystroke cross the network in clear text; serve TLS (--tls-cert/--tls-key) or reach the daemon through an SSH tunnel or a TLS reverse proxy instead");
        }
        if self.tls.is_some() {
            tracing::info!("serving HTTPS (TLS 1.2/1.3, HTTP/1.1)");
        }
    }
}

/// Binds the main listener (unless one was handed over) and holds it to the rule.
pub fn bind_main(
    exposure: &Exposure,
    listener: Option<TcpListener>,
    addr: SocketAddr,
) -> Result<(TcpListener, SocketAddr), StartError> {
    let listener = match listener {
        Some(l) => l,
        None => {
            exposure.check(addr)?;
            TcpListener::bind(addr).map_err(|source| StartError::Bind { addr, source })?
        }
    };
    let bound = listener
        .local_addr()
        .map_err(|source| StartError::Bind { addr, source })?;
    // A listener handed over by systemd (or a test) is held to the rule of `--listen`.
    match exposure.check(bound)? {
        Verdict::Serve if !bound.ip().is_loopback() => {
            tracing::warn!(addr = %bound, "listening on a non-loopback address: anyone who can reach it and holds the token can type into your sessions");
        }
        Verdict::ServeInClear => {
            tracing::warn!(addr = %bound, "listening on a non-loopback address in plain HTTP (--insecure-plaintext): anyone on the path can read the token");
        }
        _ => {}
    }
    Ok((listener, bound))
}

/// Binds the metrics-only listener, if one is asked for, by the rule of the main one (it
/// carries no token, but what it shows still crosses the network).
pub fn bind_metrics(
    exposure: &Exposure,
    asked: Option<MetricsListen>,
) -> Result<Option<(TcpListener, SocketAddr)>, StartError> {
    let listener = match asked {
        None => return Ok(None),
        Some(MetricsListen::Bound(l)) => l,
        Some(MetricsListen::Addr(addr)) => {
            exposure.check(addr)?;
            TcpListener::bind(addr).map_err(|source| StartError::Bind { addr, source })?
        }
    };
    let addr = listener.local_addr().map_err(|source| StartError::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    exposure.check(addr)?;
    if !addr.ip().is_loopback() {
        tracing::warn!(%addr, "metrics listening on a non-loopback address without a token: anyone who can reach it sees session counts and traffic figures");
    }
    Ok(Some((listener, addr)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exposure(allow_remote: bool, tls: bool, insecure_plaintext: bool) -> Exposure {
        let tls = tls.then(|| {
            let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).expect("cert");
            let key = rustls::pki_types::PrivateKeyDer::Pkcs8(cert.key_pair.serialize_der().into());
            Arc::new(
                rustls::ServerConfig::builder_with_provider(super::super::tls::provider())
                    .with_safe_default_protocol_versions()
                    .expect("versions")
                    .with_no_client_auth()
                    .with_single_cert(vec![cert.cert.der().clone()], key)
                    .expect("config"),
            )
        });
        Exposure {
            allow_remote,
            insecure_plaintext,
            tls,
        }
    }

    #[test]
    fn the_rule_for_every_combination() {
        let lo: SocketAddr = "127.0.0.1:1".parse().expect("addr");
        let lo6: SocketAddr = "[::1]:1".parse().expect("addr");
        let any: SocketAddr = "0.0.0.0:1".parse().expect("addr");
        for allow in [false, true] {
            for tls in [false, true] {
                for clear in [false, true] {
                    let e = exposure(allow, tls, clear);
                    assert_eq!(e.judge(lo), Verdict::Serve);
                    assert_eq!(e.judge(lo6), Verdict::Serve);
                    let want = match (allow, tls, clear) {
                        (false, ..) => Verdict::RefuseRemote,
                        (true, true, _) => Verdict::Serve,
                        (true, false, true) => Verdict::ServeInClear,
                        (true, false, false) => Verdict::RefusePlaintext,
                    };
                    assert_eq!(e.judge(any), want, "allow {allow} tls {tls} clear {clear}");
                }
            }
        }
    }

    #[test]
    fn refusals_say_what_to_pass() {
        let any: SocketAddr = "0.0.0.0:7767".parse().expect("addr");
        let err = exposure(true, false, false)
            .check(any)
            .expect_err("refused");
        let text = err.to_string();
        assert!(
            text.contains("--tls-cert") && text.contains("--insecure-plaintext"),
            "{text}"
        );
        let err = exposure(false, true, false)
            .check(any)
            .expect_err("refused");
        assert!(err.to_string().contains("--allow-remote"), "{err}");
    }
}
