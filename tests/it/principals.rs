//! Principals' tokens: each configured principal gets its own token file under
//! `<state dir>/principals/`, its token is accepted beside the owner's, a file it cannot use
//! fails only that principal, and `GET /v1/principals` and `atc principals` list them (never
//! a token). Rotation by SIGHUP is in `token_rotation.rs`, on a child daemon.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use atc::config::Config;
use atc_protocol::responses::PrincipalList;
use atc_testkit::{test_config, TestDaemon, WITHIN};

/// The test config with the principals `ci` (granted `local`) and `bot` (granted a target
/// that is not configured), plus what `extra` adds.
fn config_with_principals(extra: &str) -> Config {
    let text = format!(
        r#"{{"principals": {{"ci": {{"targets": ["local"]}}, "bot": {{"targets": ["nowhere"]}}{extra}}}}}"#
    );
    let parsed = Config::from_json(text.as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    Config {
        principals: parsed.principals,
        ..test_config()
    }
}

fn principal_file(state_dir: &Path, id: &str) -> PathBuf {
    state_dir.join("principals").join(id)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn token_of(state_dir: &Path, id: &str) -> String {
    std::fs::read_to_string(principal_file(state_dir, id))
        .expect("principal's token file")
        .trim()
        .to_string()
}

/// `atc --state-dir DIR args...`; its stdout once it exits 0.
async fn atc(dir: &Path, args: &[&str]) -> String {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_atc"));
    cmd.arg("--state-dir")
        .arg(dir)
        .args(args)
        .stdin(Stdio::null());
    let out = tokio::time::timeout(WITHIN, cmd.output())
        .await
        .unwrap_or_else(|_| panic!("atc {args:?} did not finish within {WITHIN:?}"))
        .expect("run the atc binary");
    assert!(out.status.success(), "atc {args:?}: {out:?}");
    String::from_utf8(out.stdout).expect("utf-8 output")
}

#[actix_rt::test]
async fn each_principal_gets_a_private_token_file_and_its_token_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config_with_principals("")).await;
    assert_eq!(mode(&d.state_dir.join("principals")), 0o700);
    let mut tokens = Vec::new();
    for id in ["ci", "bot"] {
        assert_eq!(mode(&principal_file(&d.state_dir, id)), 0o600, "{id}");
        let token = token_of(&d.state_dir, id);
        assert_eq!(token.len(), 64, "{id}");
        assert_ne!(token, d.token, "{id} holds the owner's token");
        let (status, body) = TestDaemon::connect(&d.url, &token, &d.state_dir)
            .call("GET", "/v1/daemon", None)
            .await;
        assert_eq!(status, 200, "{id}: {body}");
        tokens.push(token);
    }
    assert_ne!(tokens[0], tokens[1]);
    let wrong = "wrong-token-0123456789abcdef0123456789abcdef";
    let (status, _) = TestDaemon::connect(&d.url, wrong, &d.state_dir)
        .call("GET", "/v1/daemon", None)
        .await;
    assert_eq!(status, 401);
    assert_eq!(d.call("GET", "/v1/daemon", None).await.0, 200);
    // A socket opens on a principal's token too.
    let ci = TestDaemon::connect(&d.url, &tokens[0], &d.state_dir);
    ci.ws("/v1/events").await;
    d.stop().await;

    // The files are kept across starts.
    let tmp_path = tmp.path().to_path_buf();
    let d = TestDaemon::start_on(&tmp_path, config_with_principals("")).await;
    assert_eq!(token_of(&d.state_dir, "ci"), tokens[0]);
    d.stop().await;
}

#[actix_rt::test]
async fn a_principal_file_it_cannot_use_fails_only_that_principal() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("principals");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    // Readable by others: refused, and left as it is for its owner to fix.
    let open = "open-token-0123456789abcdef0123456789abcdef";
    std::fs::write(dir.join("bot"), format!("{open}\n")).unwrap();
    std::fs::set_permissions(dir.join("bot"), std::fs::Permissions::from_mode(0o644)).unwrap();
    let d = TestDaemon::start_on(tmp.path(), config_with_principals("")).await;
    let (status, body) = TestDaemon::connect(&d.url, open, &d.state_dir)
        .call("GET", "/v1/daemon", None)
        .await;
    assert_eq!(status, 401, "{body}");
    assert_eq!(mode(&dir.join("bot")), 0o644);
    let ci = token_of(&d.state_dir, "ci");
    let (status, _) = TestDaemon::connect(&d.url, &ci, &d.state_dir)
        .call("GET", "/v1/daemon", None)
        .await;
    assert_eq!(status, 200);
    assert_eq!(d.call("GET", "/v1/daemon", None).await.0, 200);
    d.stop().await;
}

#[actix_rt::test]
async fn two_principals_sharing_a_token_both_get_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("principals");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let shared = "shared-token-0123456789abcdef0123456789abcdef";
    for id in ["ci", "bot"] {
        std::fs::write(dir.join(id), format!("{shared}\n")).unwrap();
        std::fs::set_permissions(dir.join(id), std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let d = TestDaemon::start_on(tmp.path(), config_with_principals("")).await;
    let (status, _) = TestDaemon::connect(&d.url, shared, &d.state_dir)
        .call("GET", "/v1/daemon", None)
        .await;
    assert_eq!(
        status, 401,
        "a token two principals hold speaks for neither"
    );
    assert_eq!(d.call("GET", "/v1/daemon", None).await.0, 200);
    d.stop().await;
}

#[actix_rt::test]
async fn a_principal_no_longer_configured_keeps_its_file_but_not_its_access() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(
        tmp.path(),
        config_with_principals(r#", "old": {"targets": []}"#),
    )
    .await;
    let old = token_of(&d.state_dir, "old");
    d.stop().await;
    let d = TestDaemon::start_on(tmp.path(), config_with_principals("")).await;
    assert_eq!(
        token_of(&d.state_dir, "old"),
        old,
        "the file is left on disk"
    );
    let (status, _) = TestDaemon::connect(&d.url, &old, &d.state_dir)
        .call("GET", "/v1/daemon", None)
        .await;
    assert_eq!(status, 401);
    d.stop().await;
}

#[actix_rt::test]
async fn principals_are_listed_by_the_api_and_the_cli_without_their_tokens() {
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config_with_principals("")).await;
    let (status, body) = d.call("GET", "/v1/principals", None).await;
    assert_eq!(status, 200, "{body}");
    let list: PrincipalList = serde_json::from_value(body.clone()).expect("a principal list");
    let listed: Vec<(&str, Vec<&str>, &str)> = list
        .principals
        .iter()
        .map(|p| {
            let targets = p.targets.iter().map(String::as_str).collect();
            (p.id.as_str(), targets, p.token_file.as_str())
        })
        .collect();
    let file = |id: &str| principal_file(&d.state_dir, id).display().to_string();
    let (bot_file, ci_file) = (file("bot"), file("ci"));
    assert_eq!(
        listed,
        [
            ("bot", vec!["nowhere"], bot_file.as_str()),
            ("ci", vec!["local"], ci_file.as_str()),
        ]
    );
    let secrets = [token_of(&d.state_dir, "ci"), token_of(&d.state_dir, "bot")];
    let text = body.to_string();
    assert!(secrets.iter().all(|t| !text.contains(t.as_str())), "{text}");

    let printed = atc(&d.state_dir, &["principals"]).await;
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 2, "{printed}");
    assert!(
        lines[0].starts_with("bot")
            && lines[0].contains("nowhere")
            && lines[0].ends_with(&bot_file),
        "{printed}"
    );
    assert!(
        lines[1].starts_with("ci") && lines[1].contains("local") && lines[1].ends_with(&ci_file),
        "{printed}"
    );
    let json = atc(&d.state_dir, &["principals", "--json"]).await;
    let parsed: serde_json::Value = serde_json::from_str(&json).expect("JSON");
    assert_eq!(parsed, body);
    assert!(secrets
        .iter()
        .all(|t| !printed.contains(t.as_str()) && !json.contains(t.as_str())));
    d.stop().await;
}

#[actix_rt::test]
async fn without_principals_the_listing_is_empty_and_no_dir_is_made() {
    let d = TestDaemon::start().await;
    let (status, body) = d.call("GET", "/v1/principals", None).await;
    assert_eq!((status, body), (200, serde_json::json!({"principals": []})));
    assert!(!d.state_dir.join("principals").exists());
    d.stop().await;
}
