//! The atc inside an imp (spec §5.3 step 4, §9.3): a readying whose harness has hooks (a
//! Claude session) installs `<guestDir>/bin/atc`, by link to the image's atc when `guestATC`
//! is set and the image's is the daemon's version, else by copying the daemon's own binary;
//! a daemon with nothing to copy refuses with `no_guest_atc`; the hooks call that binary.
//!
//! Everything goes through atc's real HTTP API and the impd simulator, whose guest is this
//! machine: the guest dir is a real path here, and the simulator's image `PATH` is one the test
//! chooses, holding no atc, or an `atc` script the test wrote (which logs how it was called,
//! so a test can tell the image being probed from `bin/atc` being checked).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use atc_testkit::impd_sim::{BootEnd, ImpdSim, SimOptions};
use atc_testkit::{agent_shells_config, id_of, with_imp_target, TestDaemon};
use serde_json::{json, Value};

/// What the image holds on its `PATH`.
enum Image {
    /// No atc anywhere on it.
    NoAtc,
    /// An `atc` that runs the real one (the daemon's version), logging each call.
    SameVersion,
    /// An `atc` that claims another version, logging each call.
    OtherVersion,
}

/// A simulator whose image is `image`, a daemon on it (with `atc_program` as its own atc),
/// and the paths a test looks at.
struct Setup {
    sim: ImpdSim,
    d: TestDaemon,
    guest_dir: PathBuf,
    /// The image's `atc` (when it has one) and the log of its calls.
    image_atc: PathBuf,
    log: PathBuf,
    _tmp: tempfile::TempDir,
}

async fn setup(image: Image, options: Value, atc_program: Option<PathBuf>) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let image_bin = tmp.path().join("image-bin");
    std::fs::create_dir_all(&image_bin).unwrap();
    let image_atc = image_bin.join("atc");
    let log = tmp.path().join("image-atc.log");
    let body = match image {
        Image::NoAtc => None,
        Image::SameVersion => Some(format!("exec '{}' \"$@\"", env!("CARGO_BIN_EXE_atc"))),
        Image::OtherVersion => Some("echo 'atc 9.9.9'".to_string()),
    };
    if let Some(body) = body {
        let script = format!(
            "#!/bin/sh\nprintf '%s %s\\n' \"$0\" \"$*\" >> '{}'\n{body}\n",
            log.display()
        );
        std::fs::write(&image_atc, script).unwrap();
        std::fs::set_permissions(&image_atc, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    for dir in ["/usr/bin", "/bin"] {
        assert!(
            !Path::new(dir).join("atc").exists(),
            "this machine has an atc in {dir}; the no-atc image would have one"
        );
    }
    let sim = ImpdSim::start(SimOptions {
        image_path: Some(format!("{}:/usr/bin:/bin", image_bin.display())),
        ..SimOptions::default()
    });
    let guest_dir = tmp.path().join("guest");
    let mut more = json!({"guestDir": guest_dir.display().to_string()});
    if let (Some(m), Value::Object(o)) = (more.as_object_mut(), options) {
        m.extend(o);
    }
    let mut config = with_imp_target(agent_shells_config(), &sim.url(), sim.token_file(), more);
    config.timings.imp_reconnect_delays = [20, 50, 100, 200, 400]
        .into_iter()
        .map(Duration::from_millis)
        .collect();
    let state = tmp.path().join("state");
    let d = match atc_program {
        Some(p) => TestDaemon::start_with_atc_program(&state, config, p).await,
        None => TestDaemon::start_on(&state, config).await,
    };
    Setup {
        sim,
        d,
        guest_dir,
        image_atc,
        log,
        _tmp: tmp,
    }
}

impl Setup {
    fn bin_atc(&self) -> PathBuf {
        self.guest_dir.join("bin/atc")
    }

    /// Spawns agent `agent` and waits until it is attached; returns its id.
    async fn spawn_attached(&self, agent: &str) -> String {
        let id = id_of(&self.d.spawn(agent).await);
        self.wait_attached(&id).await;
        id
    }

    async fn wait_attached(&self, id: &str) {
        self.d
            .wait_session(id, "attached", |s| {
                s["lifecycle"]["attachment"] == "attached"
            })
            .await;
    }

    /// Puts the session's host to sleep (forced: the shell's prompt may still count as
    /// output), then revives it, which readies the host again.
    async fn sleep_and_revive(&self, id: &str, between: impl FnOnce()) {
        let (status, body) = self
            .d
            .call(
                "POST",
                &format!("/v1/sessions/{id}/suspend"),
                Some(json!({"force": true})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        between();
        let (status, body) = self
            .d
            .call("POST", &format!("/v1/sessions/{id}/revive"), None)
            .await;
        assert_eq!(status, 200, "{body}");
        self.wait_attached(id).await;
    }

    /// The imp session `id` runs in.
    fn imp_of(&self, id: &str) -> String {
        let session = impd_client::exec_session_name(id);
        self.sim
            .imps()
            .into_iter()
            .find(|i| i.sessions.iter().any(|s| s.name == session))
            .map(|i| i.name)
            .unwrap_or_else(|| panic!("no imp runs {session}"))
    }

    /// How often the image's atc was asked its version by path (a probe), and through
    /// `bin/atc` (a check of the link).
    fn probes_and_checks(&self) -> (usize, usize) {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let image = format!("{} --version", self.image_atc.display());
        let bin = format!("{} --version", self.bin_atc().display());
        (
            log.lines().filter(|l| *l == image).count(),
            log.lines().filter(|l| *l == bin).count(),
        )
    }

    /// Asserts `bin/atc` is a copy of the daemon's binary, mode 755.
    fn assert_copied(&self) {
        let meta = std::fs::symlink_metadata(self.bin_atc()).expect("bin/atc exists");
        assert!(meta.file_type().is_file(), "a copy, not a link: {meta:?}");
        assert_eq!(meta.permissions().mode() & 0o777, 0o755);
        let ours = std::fs::metadata(env!("CARGO_BIN_EXE_atc")).unwrap();
        assert_eq!(meta.len(), ours.len(), "the daemon's own binary");
        assert_eq!(
            std::fs::read(self.bin_atc()).unwrap(),
            std::fs::read(env!("CARGO_BIN_EXE_atc")).unwrap()
        );
    }

    async fn stop(self) {
        self.d.stop().await;
        self.sim.stop();
    }
}

#[actix_rt::test]
async fn a_guest_without_atc_gets_the_daemons_binary_copied_in() {
    let s = setup(Image::NoAtc, json!({"guestATC": true}), None).await;
    s.spawn_attached("claude").await;
    s.assert_copied();
    s.stop().await;
}

#[actix_rt::test]
async fn an_image_atc_of_another_version_is_not_used_and_the_binary_is_copied() {
    let s = setup(Image::OtherVersion, json!({"guestATC": true}), None).await;
    s.spawn_attached("claude").await;
    s.assert_copied();
    assert_eq!(s.probes_and_checks().0, 1, "the image was asked once");
    s.stop().await;
}

#[actix_rt::test]
async fn an_image_atc_of_the_daemons_version_is_linked_and_a_cold_boot_asks_again() {
    let s = setup(Image::SameVersion, json!({"guestATC": true}), None).await;
    let id = s.spawn_attached("claude").await;
    assert_eq!(
        std::fs::read_link(s.bin_atc()).expect("bin/atc is a link"),
        s.image_atc
    );
    assert_eq!(s.probes_and_checks(), (1, 1), "probed, then checked");
    // A later readying only re-links and checks: the image is not asked again.
    s.sleep_and_revive(&id, || {}).await;
    assert_eq!(s.probes_and_checks(), (1, 2));
    assert_eq!(std::fs::read_link(s.bin_atc()).unwrap(), s.image_atc);
    // A cold boot loses what the image was: the next readying asks it again.
    let imp = s.imp_of(&id);
    s.sleep_and_revive(&id, || {
        assert!(s.sim.faults().cold_boot(&imp, "watchdog", BootEnd::Stopped));
    })
    .await;
    assert_eq!(s.probes_and_checks(), (2, 3));
    s.stop().await;
}

#[actix_rt::test]
async fn without_guest_atc_the_binary_is_copied_only_when_bin_atc_is_not_executable() {
    let s = setup(Image::SameVersion, json!({}), None).await;
    let id = s.spawn_attached("claude").await;
    s.assert_copied();
    assert_eq!(s.probes_and_checks(), (0, 0), "the image is never asked");
    // An executable bin/atc of any kind is kept.
    std::fs::remove_file(s.bin_atc()).unwrap();
    std::fs::write(s.bin_atc(), "#!/bin/sh\necho 'atc 0.0.0'\n").unwrap();
    std::fs::set_permissions(s.bin_atc(), std::fs::Permissions::from_mode(0o755)).unwrap();
    s.sleep_and_revive(&id, || {}).await;
    assert_eq!(
        std::fs::read_to_string(s.bin_atc()).unwrap(),
        "#!/bin/sh\necho 'atc 0.0.0'\n"
    );
    // One that is not executable is replaced by the copy.
    std::fs::set_permissions(s.bin_atc(), std::fs::Permissions::from_mode(0o644)).unwrap();
    s.sleep_and_revive(&id, || {}).await;
    s.assert_copied();
    s.stop().await;
}

#[actix_rt::test]
async fn a_daemon_with_no_binary_to_copy_refuses_with_no_guest_atc() {
    let s = setup(
        Image::OtherVersion,
        json!({"guestATC": true}),
        Some(PathBuf::from("/nonexistent/atc")),
    )
    .await;
    let (status, body) =
        s.d.call(
            "POST",
            "/v1/sessions",
            Some(json!({"agent": "claude", "cwd": "/"})),
        )
        .await;
    assert_eq!(body["error"]["code"], "unsupported_operation", "{body}");
    assert_eq!(status, 422, "{body}");
    assert_eq!(body["error"]["data"]["problem"], "no_guest_atc", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("atc 9.9.9"),
        "the image's version: {message}"
    );
    assert!(
        message.contains(&format!("atc {}", env!("CARGO_PKG_VERSION"))),
        "the version needed: {message}"
    );
    assert!(message.contains("bin/atc is none"), "the copy's: {message}");
    // The readying took back what it did: the imp it created is gone.
    assert!(s.sim.imps().is_empty(), "{:#?}", s.sim.imps());
    // An agent without hooks needs no atc inside the imp.
    s.spawn_attached("sh").await;
    assert!(!s.bin_atc().exists());
    s.stop().await;
}

#[actix_rt::test]
async fn hooks_inside_an_imp_without_atc_report_through_the_installed_binary() {
    let s = setup(Image::NoAtc, json!({}), None).await;
    let id = s.spawn_attached("claude").await;
    // The session's PATH inside the imp holds no atc.
    s.d.submit(&id, "command -v atc || echo no-atc-$((2+3))")
        .await;
    s.d.wait_screen(&id, "no-atc-5").await;
    // The guest plan's hooks call <guestDir>/bin/atc.
    let settings_file =
        atc::agents::claude_settings::path(&s.d.state_dir, &id.parse().expect("a uuid"));
    let settings: Value = serde_json::from_slice(&std::fs::read(&settings_file).unwrap()).unwrap();
    let command = settings["hooks"]["Notification"][0]["hooks"][0]["command"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(
        command,
        // The temp path needs no quoting.
        format!("{} hook-report", s.bin_atc().display()),
        "{settings}"
    );
    // Run that hook inside the session, as Claude would.
    let payload = json!({"hook_event_name": "Notification", "message": "Allow Bash?"});
    s.d.submit(&id, &format!("printf '%s' '{payload}' | {command}"))
        .await;
    let session =
        s.d.wait_session(&id, "needs_you", |d| {
            d["state"] == "needs_you" && d["lastMsg"] == "Allow Bash?"
        })
        .await;
    assert_eq!(session["unread"], true, "{session}");
    s.stop().await;
}

/// Spawn-to-attached of `agent`, in ms, and the session id.
async fn time_spawn(s: &Setup, agent: &str) -> (f64, String) {
    let t = Instant::now();
    let id = s.spawn_attached(agent).await;
    (t.elapsed().as_secs_f64() * 1000.0, id)
}

/// Revive-to-attached after a forced sleep, in ms.
async fn time_revive(s: &Setup, id: &str) -> f64 {
    let (status, body) =
        s.d.call(
            "POST",
            &format!("/v1/sessions/{id}/suspend"),
            Some(json!({"force": true})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let t = Instant::now();
    let (status, body) =
        s.d.call("POST", &format!("/v1/sessions/{id}/revive"), None)
            .await;
    assert_eq!(status, 200, "{body}");
    s.wait_attached(id).await;
    t.elapsed().as_secs_f64() * 1000.0
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// What installing guest atc adds to a first readying (spawn on a new imp) and to a later one
/// (revive), against a session without hooks (`sh`) on the same daemon. Prints figures;
/// asserts nothing about time. Run with
/// `cargo test --test it guest_atc::measure -- --ignored --nocapture`.
#[actix_rt::test]
#[ignore]
async fn measure_guest_atc_install_time() {
    const N: usize = 5;
    for (label, image, options) in [
        (
            "copy (guestATC, no atc on the image)",
            Image::NoAtc,
            json!({"guestATC": true}),
        ),
        (
            "link (guestATC, image atc matches)",
            Image::SameVersion,
            json!({"guestATC": true}),
        ),
        ("copy (no guestATC)", Image::NoAtc, json!({})),
    ] {
        let s = setup(image, options, None).await;
        let (mut plain_first, mut atc_first, mut plain_later, mut atc_later) =
            (vec![], vec![], vec![], vec![]);
        for _ in 0..N {
            let (ms, plain) = time_spawn(&s, "sh").await;
            plain_first.push(ms);
            // Each spawn is a new imp, but the simulator's guest dir is shared: no bin/atc yet.
            // (Failing to remove it only makes the next figure a later readying's.)
            let _ = std::fs::remove_file(s.bin_atc());
            let (ms, with_atc) = time_spawn(&s, "claude").await;
            atc_first.push(ms);
            plain_later.push(time_revive(&s, &plain).await);
            atc_later.push(time_revive(&s, &with_atc).await);
        }
        println!(
            "{label}: first readying sh {:.1} ms, claude {:.1} ms (+{:.1}); later readying sh {:.1} ms, claude {:.1} ms (+{:.1}); medians of {N}",
            median(plain_first.clone()),
            median(atc_first.clone()),
            median(atc_first) - median(plain_first),
            median(plain_later.clone()),
            median(atc_later.clone()),
            median(atc_later) - median(plain_later),
        );
        s.stop().await;
    }
}
