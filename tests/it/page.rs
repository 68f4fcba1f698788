//! The browser page at `/` in real headless Chromium: the daemon runs in-process on an
//! ephemeral port, and `tests/page/page.test.mjs` (Playwright driving Debian's
//! `/usr/bin/chromium`) checks the page against it. Its output is relayed; its exit status
//! decides; a second script checks a remote session's link state on the impd simulator, a
//! third types a prompt into a real Claude Code (`atc_testkit::claude_world`) and sees its reply,
//! a fourth shows what sessions use (memory against a limit, an end at the memory limit), a
//! fifth drives the page on a phone (390×844, touch: cards, the key bar, answers from a card)
//! and a sixth the installed app at 1280×800 (service worker, offline, notifications).
//! Screenshots go to the folder it prints. Needs Chromium and `npm ci` in
//! `tests/page`, so it is ignored by default; `.ci/run` installs both and runs it.
//! What the page's files and headers are (the manifest and the worker's too) is checked
//! without a browser here too.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use atc_testkit::{TestDaemon, WITHIN};

/// GET `path` without a token: status, the named headers, the body.
async fn fetch(d: &TestDaemon, path: &str, headers: &[&str]) -> (u16, Vec<Option<String>>, String) {
    let mut resp = awc::Client::builder()
        .timeout(WITHIN)
        .finish()
        .get(format!("{}{}", d.url, path))
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: {e}"));
    let values = headers
        .iter()
        .map(|h| {
            resp.headers()
                .get(*h)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        })
        .collect();
    let body = resp.body().limit(4 << 20).await.expect("body");
    (
        resp.status().as_u16(),
        values,
        String::from_utf8_lossy(&body).into_owned(),
    )
}

#[actix_rt::test]
async fn the_page_and_its_files_are_served_without_a_token_with_strict_headers() {
    let d = TestDaemon::start().await;
    let security = [
        "content-type",
        "content-security-policy",
        "x-frame-options",
        "x-content-type-options",
        "referrer-policy",
    ];
    for (path, content_type, needle) in [
        ("/", "text/html", "/assets/js/main.js"),
        ("/assets/js/main.js", "text/javascript", "import"),
        ("/assets/page.css", "text/css", "#fleet"),
        (
            "/assets/vendor/xterm/xterm.mjs",
            "text/javascript",
            "Terminal",
        ),
        ("/assets/vendor/xterm/xterm.css", "text/css", ".xterm"),
        ("/assets/vendor/xterm/LICENSE", "text/plain", "MIT"),
        ("/assets/vendor/addon-fit/LICENSE", "text/plain", "MIT"),
        (
            "/assets/vendor/addon-web-links/LICENSE",
            "text/plain",
            "MIT",
        ),
        (
            "/assets/vendor/addon-unicode11/addon-unicode11.mjs",
            "text/javascript",
            "Unicode11Addon",
        ),
    ] {
        let (status, headers, body) = fetch(&d, path, &security).await;
        assert_eq!(status, 200, "{path}: {body}");
        let header = |i: usize| headers[i].clone().unwrap_or_default();
        assert!(header(0).starts_with(content_type), "{path}: {}", header(0));
        let csp = header(1);
        for directive in [
            "default-src 'none'",
            "script-src 'self';",
            "connect-src 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {directive} not in {csp}");
        }
        assert_eq!(header(2), "DENY", "{path}");
        assert_eq!(header(3), "nosniff", "{path}");
        assert_eq!(header(4), "no-referrer", "{path}");
        assert!(body.contains(needle), "{path} lacks {needle}");
    }
    // What is not embedded is not there, and the API still wants its token.
    let (status, _, body) = fetch(&d, "/assets/%2e%2e/Cargo.toml", &[]).await;
    assert_eq!(status, 404, "{body}");
    let (status, _, body) = fetch(&d, "/assets/nothing.js", &[]).await;
    assert_eq!(status, 404, "{body}");
    assert!(body.contains("unknown_method"), "{body}");
    let (status, _, _) = fetch(&d, "/v1/sessions", &[]).await;
    assert_eq!(status, 401);
    d.stop().await;
}

#[actix_rt::test]
async fn the_manifest_worker_and_icons_are_served_without_a_token_under_the_same_policy() {
    let d = TestDaemon::start().await;
    let wanted = [
        "content-type",
        "content-security-policy",
        "x-content-type-options",
        "service-worker-allowed",
        "cache-control",
    ];
    let (_, page, _) = fetch(&d, "/", &wanted).await;
    let page_csp = page[1].clone().expect("the page's CSP");
    for directive in ["worker-src 'self'", "manifest-src 'self'"] {
        assert!(
            page_csp.contains(directive),
            "{directive} not in {page_csp}"
        );
    }
    let (_, _, html) = fetch(&d, "/", &[]).await;
    assert!(
        html.contains(r#"<link rel="manifest" href="/assets/manifest.webmanifest">"#),
        "{html}"
    );
    for (path, content_type, needle) in [
        (
            "/assets/manifest.webmanifest",
            "application/manifest+json",
            "\"start_url\": \"/\"",
        ),
        ("/assets/sw.js", "text/javascript", "const SHELL = ["),
        ("/assets/icons/icon.svg", "image/svg+xml", "<svg"),
        ("/assets/icons/icon-192.png", "image/png", "PNG"),
        ("/assets/icons/icon-512.png", "image/png", "PNG"),
    ] {
        let (status, headers, body) = fetch(&d, path, &wanted).await;
        assert_eq!(status, 200, "{path}: {body}");
        let header = |i: usize| headers[i].clone().unwrap_or_default();
        assert!(header(0).starts_with(content_type), "{path}: {}", header(0));
        assert_eq!(
            header(1),
            page_csp,
            "{path} is served under the page's policy"
        );
        assert_eq!(header(2), "nosniff", "{path}");
        assert_eq!(header(4), "no-cache", "{path}");
        assert!(body.contains(needle), "{path} lacks {needle}");
        // Only the worker may answer for the whole origin (it keeps the page at `/`).
        let allowed = if path == "/assets/sw.js" { "/" } else { "" };
        assert_eq!(header(3), allowed, "{path}: Service-Worker-Allowed");
    }
    // The manifest names its icons, and each is served.
    let (_, _, manifest) = fetch(&d, "/assets/manifest.webmanifest", &[]).await;
    let manifest: serde_json::Value =
        serde_json::from_str(&manifest).expect("the manifest is JSON");
    assert_eq!(manifest["display"], "standalone");
    let icons = manifest["icons"].as_array().expect("icons");
    assert!(icons.iter().any(|i| i["sizes"] == "512x512"), "{icons:?}");
    for icon in icons {
        let src = icon["src"].as_str().expect("an icon's src");
        let (status, headers, _) = fetch(&d, src, &["content-type"]).await;
        assert_eq!(status, 200, "{src}");
        assert_eq!(headers[0].as_deref(), icon["type"].as_str(), "{src}");
    }
    d.stop().await;
}

/// Runs `tests/page/<script>` in node against `d`, with the screenshot folder and `env`;
/// its output appears as it runs (the child inherits stdout and stderr). Panics unless it
/// passes.
async fn run_page_script(d: &TestDaemon, script: &str, env: &[(&str, &str)]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/page");
    assert!(
        Path::new("/usr/bin/chromium").exists(),
        "no /usr/bin/chromium: apt-get install -y chromium"
    );
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "no playwright-core: run npm ci in {}",
        dir.display()
    );
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("page-screenshots");
    println!("page screenshots: {}", shots.display());
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .current_dir(&dir)
        .env("ATC_URL", &d.url)
        .env("ATC_TOKEN", &d.token)
        .env("ATC_SHOTS", &shots)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node starts");
    let status = tokio::time::timeout(Duration::from_secs(180), child.wait())
        .await
        .expect("the page test finished within 3 minutes")
        .expect("node ran");
    assert!(
        status.success(),
        "{script} failed ({status}); its output is above"
    );
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_works_in_headless_chromium() {
    // `claude` is a plain shell here, so the test can report its hooks with `atc hook-report`.
    let (d, _tmp) = atc_testkit::agent_shells_daemon().await;
    // A repository for the workspace the page shows.
    let repo = atc_testkit::git_repo::TestRepo::with_files(2);
    let repo_path = repo.path().display().to_string();
    run_page_script(
        &d,
        "page.test.mjs",
        &[
            ("ATC_BIN", env!("CARGO_BIN_EXE_atc")),
            ("ATC_REPO", &repo_path),
        ],
    )
    .await;
    d.stop().await;
}

/// A daemon whose `claude` is a plain shell (for hook reports) and which also has `bash`, with
/// no rc files and no prompt, for the key bar's history and completion.
async fn phone_daemon() -> (TestDaemon, tempfile::TempDir) {
    let mut config = atc_testkit::agent_shells::agent_shells_config();
    let mut bash = atc::config::AgentConfig {
        bin: "/bin/bash".into(),
        args: vec!["--norc".into(), "--noprofile".into(), "-i".into()],
        ..Default::default()
    };
    bash.env.insert("PS1".into(), String::new());
    config.agents.insert("bash".into(), bash);
    let tmp = tempfile::tempdir().expect("temp dir");
    (TestDaemon::start_on(tmp.path(), config).await, tmp)
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_works_on_a_phone_in_chromium() {
    let (d, _tmp) = phone_daemon().await;
    run_page_script(
        &d,
        "phone.test.mjs",
        &[("ATC_BIN", env!("CARGO_BIN_EXE_atc"))],
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_installs_works_offline_and_notifies_through_its_worker_in_chromium() {
    let (d, _tmp) = atc_testkit::agent_shells_daemon().await;
    run_page_script(
        &d,
        "pwa.test.mjs",
        &[("ATC_BIN", env!("CARGO_BIN_EXE_atc"))],
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_works_in_headless_chromium_over_https() {
    // The same script as over HTTP, against a daemon serving HTTPS with a CA made for the run:
    // the page, its tickets and both sockets (wss://) through TLS.
    let cert = atc_testkit::TestCert::new();
    let tmp = tempfile::tempdir().expect("temp dir");
    let d = TestDaemon::start_tls(tmp.path(), atc_testkit::agent_shells_config(), &cert).await;
    assert!(d.url.starts_with("https://"), "{}", d.url);
    let repo = atc_testkit::git_repo::TestRepo::with_files(2);
    let repo_path = repo.path().display().to_string();
    let ca = cert.ca_path.display().to_string();
    // Beside the HTTP run's screenshots, not over them.
    let shots = Path::new(env!("CARGO_TARGET_TMPDIR")).join("page-screenshots-https");
    let shots = shots.display().to_string();
    run_page_script(
        &d,
        "page.test.mjs",
        &[
            ("ATC_BIN", env!("CARGO_BIN_EXE_atc")),
            ("ATC_REPO", &repo_path),
            ("NODE_EXTRA_CA_CERTS", &ca),
            ("ATC_SHOTS", &shots),
        ],
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_shows_memory_and_an_end_at_the_memory_limit_in_chromium() {
    let d = TestDaemon::start().await;
    let running = atc_testkit::id_of(&d.spawn("cat").await);
    let killed = atc_testkit::id_of(&d.spawn("cat").await);
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{killed}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.wait_session(&killed, "exited", |s| s["alive"] == false)
        .await;
    run_page_script(
        &d,
        "usage.test.mjs",
        &[("ATC_RUNNING", &running), ("ATC_KILLED", &killed)],
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_shows_a_sub_session_under_its_parent_in_chromium() {
    let d = TestDaemon::start().await;
    let parent = atc_testkit::id_of(&d.spawn("cat").await);
    let other = atc_testkit::id_of(&d.spawn("cat").await);
    let sub = atc_testkit::id_of(
        &d.spawn_with(serde_json::json!({"agent": "cat", "cwd": "/tmp", "parent": parent}))
            .await,
    );
    run_page_script(
        &d,
        "tree.test.mjs",
        &[
            ("ATC_PARENT", &parent),
            ("ATC_OTHER", &other),
            ("ATC_SUB", &sub),
        ],
    )
    .await;
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium and tests/page/node_modules; .ci/run installs both"]
async fn the_page_shows_a_remote_sessions_link_state_in_chromium() {
    use atc_testkit::impd_sim::{ImpdSim, SimOptions, When};
    let sim = ImpdSim::start(SimOptions::default());
    let tmp = tempfile::tempdir().expect("temp dir");
    let mut config = atc_testkit::with_imp_target(
        atc_testkit::test_config(),
        &sim.url(),
        sim.token_file(),
        serde_json::json!({}),
    );
    // The dropped link must still be reattaching when the page looks, however slow the machine:
    // one quick retry, then a wait longer than the test. The default delays run out in about
    // 15 s, after which the harness ends the session and the row no longer shows a link state.
    config.timings.imp_reconnect_delays = [50, 3_600_000]
        .into_iter()
        .map(std::time::Duration::from_millis)
        .collect();
    let d = TestDaemon::start_on(tmp.path(), config).await;

    // One session whose host sleeps (suspend answers busy until its output settles)...
    let asleep = atc_testkit::spawn_remote(&d, &sim).await;
    let (status, body) = atc_testkit::suspend_when_idle(&d, &asleep.id).await;
    assert_eq!(status, 200, "suspend: {status} {body}");
    d.wait_session(&asleep.id, "asleep", |s| s["lifecycle"]["vm"] == "asleep")
        .await;
    // ...and one whose link dropped and cannot come back (every reconnect is refused).
    let away = atc_testkit::spawn_remote(&d, &sim).await;
    sim.faults()
        .drop_next_connections(10_000, When::BeforeStarted, 1011);
    assert!(sim.faults().drop_output(&away.imp, &away.session));
    d.wait_session(&away.id, "reattaching", |s| {
        s["lifecycle"]["attachment"] == "reattaching"
    })
    .await;

    run_page_script(
        &d,
        "link.test.mjs",
        &[("ATC_ASLEEP", &asleep.id), ("ATC_AWAY", &away.id)],
    )
    .await;
    sim.faults().cancel_connection_drops();
    d.stop().await;
}

#[actix_rt::test]
#[ignore = "needs /usr/bin/chromium, tests/page/node_modules and tests/agents/node_modules; .ci/run installs them"]
async fn a_prompt_typed_in_the_page_reaches_a_real_claude_and_its_reply_shows() {
    use atc_testkit::fake_model::Reply;
    const PROMPT: &str = "typed in the page";
    const REPLY: &str = "Hello from the fake model, in the page.";
    let Some(w) = atc_testkit::claude_world::world(vec![Reply::Text(REPLY.into())]).await else {
        return;
    };
    let id = w.spawn(serde_json::json!({})).await;
    run_page_script(
        &w.d,
        "claude.test.mjs",
        &[
            ("ATC_CLAUDE", &id),
            ("ATC_PROMPT", PROMPT),
            ("ATC_REPLY", REPLY),
        ],
    )
    .await;
    // The browser's keys, not a submit, carried the prompt to the model.
    let turn = w.model.turns().pop().expect("the page's turn");
    assert_eq!(
        atc_testkit::fake_anthropic::user_texts(&turn)
            .last()
            .map(String::as_str),
        Some(PROMPT)
    );
    w.done_with(&id, REPLY).await;
    w.d.stop().await;
}
