//! Security regressions the `security` proof suite found (issue 12 item 6): what a fresh state
//! dir holds is private to its user, a client that trickles a request body is cut off, and
//! a credential given to the daemon by environment stays out of its local sessions.

use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

use atc_testkit::{wait_for, wait_until, TestDaemon, WITHIN};

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o7777
}

async fn wait_exists(p: &Path) {
    wait_until(WITHIN, format!("{} appears", p.display()), async || {
        p.exists()
    })
    .await;
}

#[actix_rt::test]
async fn a_fresh_state_dir_keeps_the_token_database_and_sockets_private() {
    // Fresh: the daemon makes the dir (an existing one keeps its mode, see below).
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(&tmp.path().join("state"), atc_testkit::test_config()).await;
    // A spawn writes the database, so its WAL files exist.
    let id = atc_testkit::id_of(&d.spawn("cat").await);
    let dir = d.state_dir.clone();
    let socket = dir.join("atc.sock");
    wait_exists(&socket).await;
    wait_exists(&dir.join("atc.db-wal")).await;
    assert_eq!(mode(&dir), 0o700, "the state dir");
    for name in [
        "token",
        "atc.db",
        "atc.db-wal",
        "atc.db-shm",
        "daemon.json",
        "daemon.lock",
    ] {
        assert_eq!(mode(&dir.join(name)), 0o600, "{name}");
    }
    assert!(std::fs::symlink_metadata(&socket)
        .unwrap()
        .file_type()
        .is_socket());
    assert_eq!(mode(&socket), 0o600, "the reporter socket");
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_database_left_world_readable_by_an_older_daemon_is_narrowed_at_start() {
    let tmp = tempfile::tempdir().unwrap();
    let first = TestDaemon::start_on(tmp.path(), atc_testkit::test_config()).await;
    first.stop().await;
    for name in ["atc.db", "atc.db-wal", "atc.db-shm"] {
        let p = tmp.path().join(name);
        if p.exists() {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
    }
    let second = TestDaemon::start_on(tmp.path(), atc_testkit::test_config()).await;
    for name in ["atc.db", "atc.db-wal", "atc.db-shm"] {
        let p = tmp.path().join(name);
        if p.exists() {
            assert_eq!(mode(&p), 0o600, "{name}");
        }
    }
    second.stop().await;
}

#[actix_rt::test]
async fn a_body_trickled_slower_than_the_bound_is_refused_and_the_connection_closed() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut config = atc_testkit::test_config();
    config.timings.body_read = Duration::from_millis(800);
    let tmp = tempfile::tempdir().unwrap();
    let d = TestDaemon::start_on(tmp.path(), config).await;
    let addr = d.url.trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let head = format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: 100\r\n\r\n",
        d.token
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let mut tick = tokio::time::interval(Duration::from_millis(200));
    // A byte every 200 ms would take 20 s; the bound is 0.8 s, and 5 s only bounds failure.
    let closed = loop {
        tokio::select! {
            read = conn.read(&mut buf) => match read {
                Ok(0) | Err(_) => break true,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            },
            _ = tick.tick() => {
                assert!(
                    started.elapsed() < Duration::from_secs(5),
                    "still open after 5 s; got {:?}",
                    String::from_utf8_lossy(&got)
                );
                if conn.write_all(b" ").await.is_err() {
                    break false;
                }
            }
        }
    };
    let text = String::from_utf8_lossy(&got).to_string();
    assert!(
        text.starts_with("HTTP/1.1 408"),
        "closed={closed}: {text:?}"
    );
    assert!(text.contains("\"field\":\"body\""), "{text}");
    // The daemon is unharmed: a polite request is answered.
    let (status, body) = d.call("GET", "/v1/sessions", None).await;
    assert_eq!(status, 200, "{body}");
    d.stop().await;
}

#[actix_rt::test]
async fn a_local_session_does_not_inherit_an_impd_token_given_by_environment() {
    // Set for this test binary only, under a name no other test reads.
    const VAR: &str = "ATC_TEST_SECURITY_IMPD_TOKEN";
    let value = "impd-token-that-must-stay-in-the-daemon-0123456789";
    std::env::set_var(VAR, value);
    let tmp = tempfile::tempdir().unwrap();
    let dump = tmp.path().join("env.txt");
    let text = serde_json::json!({
        "agents": {"dumper": {"bin": "/bin/sh",
                              "args": ["-c", format!("env > '{}'; exec cat", dump.display())]}},
        "targets": {"local": {"provider": "local-pty"},
                    "box": {"provider": "imp", "url": "http://127.0.0.1:9", "tokenEnv": VAR}},
        "defaultTarget": "local",
    });
    let parsed = atc::config::Config::from_json(text.to_string().as_bytes());
    assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
    let mut config = atc_testkit::test_config();
    config.agents.extend(parsed.agents);
    config.targets = parsed.targets;
    let d = TestDaemon::start_on(&tmp.path().join("state"), config).await;
    let body = d
        .spawn_with(serde_json::json!({"agent": "dumper", "cwd": tmp.path()}))
        .await;
    let id = atc_testkit::id_of(&body);
    let env = wait_for(WITHIN, "the session dumps its env", async || {
        std::fs::read_to_string(&dump)
            .ok()
            .filter(|t| t.contains("ATC_SESSION_ID="))
    })
    .await;
    assert!(
        !env.contains(value),
        "the impd token reached the session:\n{env}"
    );
    assert!(!env.contains(&format!("{VAR}=")), "{env}");
    // What the session should inherit still comes.
    assert!(env.contains("PATH="), "{env}");
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    d.stop().await;
}

/// The probe of issue 31: `--state-dir` on an existing directory changed its mode to 0700, so
/// a shared 1777 dir became `drwx------` (as root, `--state-dir /tmp` would break `/tmp`). A
/// dir others can write to is now refused, with the reason, and left exactly as it was.
#[actix_rt::test]
async fn a_state_dir_others_can_write_to_is_refused_and_left_as_it_was() {
    let tmp = tempfile::tempdir().unwrap();
    let shared = tmp.path().join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
    match TestDaemon::try_start_on(&shared, atc_testkit::test_config()).await {
        Err(e) => {
            let said = e.to_string();
            assert!(said.contains("1777") && said.contains("others"), "{said}");
        }
        Ok(d) => {
            d.stop().await;
            panic!("a daemon started on a 1777 state dir");
        }
    }
    assert_eq!(mode(&shared), 0o1777, "the shared dir's mode changed");
    assert_eq!(
        std::fs::read_dir(&shared).unwrap().count(),
        0,
        "the daemon left files in a dir it refused"
    );
    // The binary says so and exits 1.
    let out = tokio::task::spawn_blocking({
        let dir = shared.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_atc"))
                .arg("daemon")
                .arg("--state-dir")
                .arg(&dir)
                .args(["--listen", "127.0.0.1:0"])
                .env("ATC_CONFIG", "/nonexistent/atc-config.json")
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run the atc binary")
        }
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "stderr: {stderr}");
    assert!(stderr.contains("lets others write into it"), "{stderr}");
    assert_eq!(mode(&shared), 0o1777);
    // A private dir the user made keeps its own mode too.
    let mine = tmp.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::set_permissions(&mine, std::fs::Permissions::from_mode(0o750)).unwrap();
    let d = TestDaemon::start_on(&mine, atc_testkit::test_config()).await;
    assert_eq!(mode(&mine), 0o750);
    assert_eq!(mode(&mine.join("token")), 0o600);
    d.stop().await;
}

/// What a start refuses at the token file's path, each with its reason, before it serves: a
/// file others can read (its mode named, as ssh names a key's), a symlink out of the state
/// dir, a FIFO (which once held the start until a writer came) and a file too large to be
/// one. The file is left for the operator to fix.
#[actix_rt::test]
async fn a_start_refuses_a_token_file_that_is_not_private_regular_and_inside() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("state");
    let first = TestDaemon::start_on(&dir, atc_testkit::test_config()).await;
    first.stop().await;
    let token = dir.join("token");
    let refused = |what: &'static str| {
        let dir = dir.clone();
        async move {
            let began = Instant::now();
            match TestDaemon::try_start_on(&dir, atc_testkit::test_config()).await {
                Err(e) => {
                    assert!(
                        began.elapsed() < WITHIN,
                        "{what}: the start took {:?}",
                        began.elapsed()
                    );
                    e.to_string()
                }
                Ok(d) => {
                    d.stop().await;
                    panic!("{what}: the daemon started");
                }
            }
        }
    };

    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o640)).unwrap();
    let said = refused("group-readable").await;
    assert!(
        said.contains("mode 0640") && said.contains("chmod 600"),
        "{said}"
    );
    assert_eq!(mode(&token), 0o640, "the file was changed");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();

    let outside = tmp.path().join("elsewhere");
    std::fs::rename(&token, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &token).unwrap();
    let said = refused("a symlink out").await;
    assert!(said.contains("leading out of the state dir"), "{said}");
    std::fs::remove_file(&token).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &token).unwrap();
    let said = refused("a symlink to /dev/zero").await;
    assert!(said.contains("leading out of the state dir"), "{said}");
    std::fs::remove_file(&token).unwrap();

    rustix::fs::mknodat(
        rustix::fs::CWD,
        &token,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let said = refused("a FIFO").await;
    assert!(said.contains("a FIFO"), "{said}");
    std::fs::remove_file(&token).unwrap();

    std::fs::rename(&outside, &token).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&token)
        .unwrap()
        .set_len(1 << 30)
        .unwrap();
    let said = refused("a gigabyte").await;
    assert!(said.contains("1073741824 bytes"), "{said}");
}
