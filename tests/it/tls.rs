//! HTTPS served by the daemon itself (`--tls-cert`/`--tls-key`), with a CA made at test time
//! that the test's clients trust: the API, the page, the attach and events sockets over
//! `wss://`, the metrics listener, and the refusals (a bad key, a client that does not trust
//! the certificate, a plain-HTTP client). The listen rule itself (non-loopback needs
//! `--allow-remote` and TLS or `--insecure-plaintext`) is in `auth_events` and `metrics`.

use std::net::TcpListener;
use std::time::Duration;

use atc::daemon::{Daemon, DaemonOptions, MetricsListen, StartError};
use atc_testkit::{id_of, test_config, TestCert, TestDaemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[actix_rt::test]
async fn https_serves_the_api_the_page_and_both_sockets_over_wss() {
    let cert = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_tls(tmp.path(), test_config(), &cert).await;
    assert!(d.url.starts_with("https://127.0.0.1:"), "{}", d.url);
    // Clients find it as https.
    let info: serde_json::Value =
        serde_json::from_slice(&std::fs::read(tmp.path().join("daemon.json")).unwrap()).unwrap();
    assert_eq!(info["url"], d.url.as_str(), "{info}");

    let (status, health) = d.call_with("GET", "/v1/health", None, None).await;
    assert_eq!(status, 200, "{health}");
    let (status, _) = d.call_with("GET", "/v1/sessions", None, None).await;
    assert_eq!(status, 401, "the token is still wanted over TLS");

    let mut events = d.ws("/v1/events").await;
    let id = id_of(&d.spawn("cat").await);
    assert_eq!(
        events.next_text("session.added").await["session"]["id"],
        id.as_str()
    );
    let (mut ws, attached, _) = d.attach(&id, "cols=80&rows=24").await;
    assert_eq!(attached["session"], id.as_str());
    ws.send_binary(b"over-tls\r").await;
    ws.read_until(b"over-tls\r\n").await;

    // The page, with the same headers as over HTTP, through a client trusting the CA.
    let page = atc_testkit::tls::client_trusting(&cert.client_config(), Duration::from_secs(5));
    let mut resp = page
        .get(format!("{}/", d.url))
        .send()
        .await
        .expect("GET / over https");
    assert_eq!(resp.status().as_u16(), 200);
    let csp = resp
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(csp.contains("connect-src 'self'"), "{csp}");
    let body = resp.body().await.expect("page body");
    assert!(String::from_utf8_lossy(&body).contains("/assets/js/main.js"));
    ws.close().await;
    d.stop().await;
}

#[actix_rt::test]
async fn a_client_that_does_not_trust_the_certificate_or_speaks_plain_http_gets_nothing() {
    let cert = TestCert::new();
    let stranger = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_tls(tmp.path(), test_config(), &cert).await;
    let distrustful =
        atc_testkit::tls::client_trusting(&stranger.client_config(), Duration::from_secs(5));
    let refused = distrustful.get(format!("{}/v1/health", d.url)).send().await;
    assert!(
        refused.is_err(),
        "a certificate from another CA was accepted"
    );

    // Plain HTTP on the TLS port: no HTTP answer comes back, and the connection ends within
    // the handshake deadline (the head deadline) rather than being held.
    let addr = d.url.trim_start_matches("https://").to_string();
    let mut plain = tokio::net::TcpStream::connect(&addr).await.unwrap();
    plain
        .write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut got = Vec::new();
    let read = tokio::time::timeout(atc_testkit::WITHIN, plain.read_to_end(&mut got))
        .await
        .expect("the daemon ended the plain connection");
    assert!(
        read.is_err() || !got.starts_with(b"HTTP/1.1 200"),
        "plain HTTP was answered on the TLS port: {:?}",
        String::from_utf8_lossy(&got)
    );
    // Still serving its real clients.
    let (status, _) = d.call_with("GET", "/v1/health", None, None).await;
    assert_eq!(status, 200);
    d.stop().await;
}

fn options(dir: &std::path::Path) -> DaemonOptions {
    atc_testkit::loopback_options(dir, test_config())
}

#[actix_rt::test]
async fn a_remote_listen_with_allow_remote_and_tls_starts_and_metrics_serve_https_too() {
    let cert = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    // Bound on every interface; connected to only through loopback.
    opts.listener = None;
    opts.listen = Some("0.0.0.0:0".parse().unwrap());
    opts.allow_remote = true;
    opts.tls = Some(cert.files());
    opts.metrics_listen = Some(MetricsListen::Bound(
        TcpListener::bind("127.0.0.1:0").expect("bind"),
    ));
    let handle = Daemon::start(opts)
        .await
        .expect("--allow-remote with TLS starts without --insecure-plaintext");
    assert!(handle.addr.ip().is_unspecified());
    let client = atc_testkit::tls::client_trusting(&cert.client_config(), Duration::from_secs(5));
    let health = client
        .get(format!(
            "https://127.0.0.1:{}/v1/health",
            handle.addr.port()
        ))
        .send()
        .await
        .expect("health over https");
    assert_eq!(health.status().as_u16(), 200);
    let metrics = handle.metrics_addr.expect("a metrics listener");
    let scrape = client
        .get(format!("https://{metrics}/metrics"))
        .send()
        .await
        .expect("metrics over https");
    assert_eq!(scrape.status().as_u16(), 200);
    handle.stop().await;
}

#[actix_rt::test]
async fn a_key_that_is_not_the_certificates_or_a_missing_file_stops_the_start() {
    let cert = TestCert::new();
    let other = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    opts.tls = Some(atc::daemon::tls::TlsFiles {
        cert: cert.cert_path.clone(),
        key: other.key_path.clone(),
    });
    match Daemon::start(opts).await {
        Err(e @ StartError::Tls(_)) => {
            let text = e.to_string();
            assert!(
                text.contains(&cert.cert_path.display().to_string()),
                "{text}"
            );
            let key = std::fs::read_to_string(&other.key_path).unwrap();
            let body = key.lines().nth(1).expect("a key body line");
            assert!(!text.contains(body), "the error quotes the key: {text}");
        }
        Err(e) => panic!("expected a TLS error, got {e}"),
        Ok(_) => panic!("a mismatched key started"),
    }
    let mut opts = options(tmp.path());
    opts.tls = Some(atc::daemon::tls::TlsFiles {
        cert: cert.dir().join("absent.pem"),
        key: cert.key_path.clone(),
    });
    match Daemon::start(opts).await {
        Err(e @ StartError::Tls(_)) => {
            assert!(e.to_string().contains("absent.pem"), "{e}")
        }
        Err(e) => panic!("expected a TLS error, got {e}"),
        Ok(_) => panic!("a missing certificate started"),
    }
    assert!(
        !tmp.path().join("daemon.json").exists(),
        "a refused start must not advertise itself"
    );
}

#[actix_rt::test]
async fn the_cli_pins_the_certificate_daemon_json_names() {
    let cert = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_tls(tmp.path(), test_config(), &cert).await;
    let info = std::fs::read_to_string(tmp.path().join("daemon.json")).unwrap();
    let info: serde_json::Value = serde_json::from_str(&info).unwrap();
    assert_eq!(
        info["tlsCert"],
        cert.cert_path.display().to_string(),
        "{info}"
    );
    let id = id_of(&d.spawn("sh").await);
    let out = super::cli::atc(tmp.path(), &["send", &id, "echo", "cli-$((20+1))"], &[]).await;
    assert!(out.status.success(), "{out:?}");
    d.wait_screen(&id, "cli-21").await;
    let out = super::cli::atc(tmp.path(), &["ls"], &[]).await;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(&id[..8]));
    // The events socket over wss, from the CLI.
    d.submit(&id, "exit 0").await;
    let out = super::cli::atc(
        tmp.path(),
        &["wait", &id, "--for", "exited", "--timeout", "10"],
        &[],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // A certificate other than the one served: the CLI refuses the daemon.
    let other = TestCert::new();
    let mut forged = info.clone();
    forged["tlsCert"] = other.cert_path.display().to_string().into();
    std::fs::write(tmp.path().join("daemon.json"), forged.to_string()).unwrap();
    let out = super::cli::atc(tmp.path(), &["ls"], &[]).await;
    assert!(
        !out.status.success(),
        "a daemon with another certificate was trusted"
    );
    std::fs::write(tmp.path().join("daemon.json"), info.to_string()).unwrap();
    d.stop().await;
}

#[actix_rt::test]
async fn config_tls_cert_and_key_serve_https_as_the_flags_do() {
    let cert = TestCert::new();
    let tmp = tempfile::tempdir().unwrap();
    let mut opts = options(tmp.path());
    opts.config.tls = Some(cert.files());
    let handle = Daemon::start(opts).await.expect("starts with config's TLS");
    let client = atc_testkit::tls::client_trusting(&cert.client_config(), Duration::from_secs(5));
    let health = client
        .get(format!("https://{}/v1/health", handle.addr))
        .send()
        .await
        .expect("health over https");
    assert_eq!(health.status().as_u16(), 200);
    handle.stop().await;
}

/// `atc daemon ARGS` on a fresh state dir with an empty config file: its exit status and log,
/// for starts that must fail (nothing here is left running: the deadline kills it).
async fn daemon_refusal(args: &[&str]) -> (Option<i32>, String) {
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("config.json");
    std::fs::write(&config, "{}").unwrap();
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_atc"))
        .arg("daemon")
        .arg("--state-dir")
        .arg(tmp.path().join("state"))
        .arg("--config")
        .arg(&config)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(atc_testkit::WITHIN, run)
        .await
        .unwrap_or_else(|_| panic!("atc daemon {args:?} kept running"))
        .expect("atc runs");
    assert!(!tmp.path().join("state/daemon.json").exists());
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[actix_rt::test]
async fn the_daemon_binary_refuses_clear_text_remote_listens_and_bad_tls_files_with_a_message() {
    // Bound on every interface if it ever started; it must not.
    let (code, log) = daemon_refusal(&["--listen", "0.0.0.0:0", "--allow-remote"]).await;
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("in plain HTTP"), "{log}");
    assert!(log.contains("--insecure-plaintext"), "{log}");
    let (code, log) = daemon_refusal(&["--listen", "0.0.0.0:0"]).await;
    assert_eq!(code, Some(1), "{log}");
    assert!(log.contains("--allow-remote"), "{log}");

    let (code, log) = daemon_refusal(&["--tls-cert", "/nonexistent/cert.pem"]).await;
    assert_eq!(code, Some(2), "clap: one without the other: {log}");
    assert!(log.contains("--tls-key"), "{log}");
    let (code, log) = daemon_refusal(&[
        "--listen",
        "127.0.0.1:0",
        "--tls-cert",
        "/nonexistent/cert.pem",
        "--tls-key",
        "/nonexistent/key.pem",
    ])
    .await;
    assert_eq!(code, Some(1), "{log}");
    assert!(
        log.contains("could not read the TLS certificate /nonexistent/cert.pem"),
        "{log}"
    );
}

#[actix_rt::test]
async fn insecure_plaintext_is_warned_about_at_every_start() {
    let tmp = tempfile::tempdir().unwrap();
    let state = tmp.path().join("state");
    for run in 0..2 {
        let log = tmp.path().join(format!("daemon-{run}.log"));
        let mut cmd = atc_testkit::ChildDaemon::command(&state, &serde_json::json!({}), &log);
        cmd.arg("--insecure-plaintext");
        let daemon = atc_testkit::ChildDaemon::spawn(cmd, &state, &log).await;
        let text = daemon.log();
        assert!(
            text.contains("WARN") && text.contains("--insecure-plaintext"),
            "start {run}: {text}"
        );
        daemon.stop().await;
    }
}
