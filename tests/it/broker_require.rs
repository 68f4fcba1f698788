//! Issue 9 items 3–6 through the API, on a real imp target over the simulator: a broker-backed
//! spawn binds a new host (the imp, its grants), starts with `require: ["broker"]`, and every
//! re-attach carries it; impd's refusals answer with their codes and take back the attempt;
//! an impd that cannot check the requirement is sent no start; a revive verifies and never
//! grants again; and the agent holds placeholders only, with a config folder of its own.

use std::time::Duration;

use atc_testkit::broker::{
    self, assert_spawn_taken_back, auth, bindable_sim, boom, fast_reconnects, identity,
    impd_client, kill_and_wait, requires, rpc_calls, sh_agent, spawn,
};
use atc_testkit::impd_sim::{
    Flag, FlagState, HoldPoint, Identity, ImpdSim, OauthStatus, OpenKind, Scope, SecretKind,
};
use atc_testkit::{id_of, poll_every, TestDaemon, WITHIN};
use serde_json::{json, Value};

/// A simulator whose token may bind `codex-key` to atc's imps, and the key's value.
fn sim() -> (ImpdSim, String) {
    let (sim, mut values) = bindable_sim(&[("codex-key", "api.openai.com")]);
    (sim, values.remove(0))
}

async fn daemon(sim: &ImpdSim, dir: &std::path::Path) -> TestDaemon {
    let agent = sh_agent(
        "codex",
        "cd \"$CODEX_HOME/..\"; [ -e env.txt ] || env > env.txt; [ -e argv.txt ] || printf '%s\\n' \"$0\" \"$@\" > argv.txt; echo proxy=$HTTPS_PROXY key=$OPENAI_API_KEY home=$CODEX_HOME; test -d \"$CODEX_HOME\" && echo config-dir-made; exec sleep 60",
        Some(auth(&["codex-key"], &["OPENAI_API_KEY"])),
    );
    let config = fast_reconnects(broker::config(sim, &dir.join("guest"), agent));
    TestDaemon::start_on(dir, config).await
}

/// Tests holding a [`Captured`] now: the log layer records only while one does. The tests share
/// one binary, so an always-on debug layer would log every other module's daemons as well.
static CAPTURING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Every log line the daemons of this test binary write at debug level while it is held: what
/// a test greps for a secret. The layer is installed once per binary; later calls share its
/// buffer.
struct Captured(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl Captured {
    /// Everything logged so far, as text.
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).to_string()
    }
}

impl Drop for Captured {
    fn drop(&mut self) {
        CAPTURING.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn captured_logs() -> Captured {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    use tracing_subscriber::Layer as _;
    static LOGS: std::sync::OnceLock<std::sync::Arc<std::sync::Mutex<Vec<u8>>>> =
        std::sync::OnceLock::new();
    let buf = LOGS
        .get_or_init(|| {
            let buf = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let sink = buf.clone();
            let writer = move || LogSink(sink.clone());
            let capturing = tracing_subscriber::filter::dynamic_filter_fn(|meta, _| {
                *meta.level() <= tracing::Level::DEBUG
                    && CAPTURING.load(std::sync::atomic::Ordering::SeqCst) > 0
            });
            // Another subscriber already installed would mean nothing reaches the buffer, and
            // the test's grep would pass without looking: so it must be ours.
            tracing_subscriber::registry()
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(writer)
                        .with_filter(capturing),
                )
                .try_init()
                .expect("the test binary's only log subscriber");
            buf
        })
        .clone();
    CAPTURING.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Captured(buf)
}

struct LogSink(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogSink {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[actix_rt::test]
async fn a_start_impd_refuses_answers_broker_not_ready_and_takes_back_the_new_host() {
    let (sim, _) = sim();
    sim.faults()
        .fail_broker_ca("*", Some("the CA bundle step failed"));
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, err) = spawn(&d).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("broker_not_ready")),
        "{err}"
    );
    assert!(
        err["error"]["data"]["detail"]
            .as_str()
            .unwrap()
            .contains("CA bundle"),
        "{err}"
    );
    assert_eq!(
        requires(&sim, OpenKind::Start),
        [vec!["broker".to_string()]]
    );
    // The refused spawn leaves no session, and its attempt is taken back at impd.
    assert_spawn_taken_back(&d, &sim).await;
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn an_impd_that_cannot_check_require_is_sent_no_start() {
    let (sim, _) = sim();
    sim.faults().play_pre_030();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, err) = spawn(&d).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("auth_impd_too_old")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["execRequire"], false, "{err}");
    assert!(
        err["error"]["message"]
            .as_str()
            .unwrap()
            .contains("0.30.0 or later"),
        "{err}"
    );
    assert!(
        requires(&sim, OpenKind::Start).is_empty(),
        "a harness start was sent: {:?}",
        sim.exec_opens()
    );
    sim.wait_until("took back the imp", |s| s.imps().is_empty())
        .await;
    d.stop().await;
    sim.stop();
}

#[actix_rt::test]
async fn a_bound_session_reattaches_with_the_requirement_and_revives_without_granting_again() {
    let logs = captured_logs();
    let (sim, value) = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    assert!(!body.to_string().contains(&value), "{body}");
    let id = id_of(&body["session"]);
    let imp = sim.imps()[0].name.clone();
    assert_eq!(
        sim.grants()[&imp],
        ["codex-key"],
        "the spawn bound the new host"
    );
    // impd set the broker's proxy for the process; the agent holds a placeholder and a config
    // folder of its own, made by the readying; the secret's value is nowhere.
    let screen = d.wait_screen(&id, "config-dir-made").await;
    // The screen wraps at 80 columns; the lines are read as one.
    let text = screen["text"].as_str().unwrap().replace('\n', "");
    assert!(text.contains("proxy=http"), "{screen}");
    assert!(text.contains("key=imp-broker-placeholder"), "{screen}");
    let home = tmp.path().join(format!("guest/sessions/{id}/auth-r1"));
    assert!(
        text.contains(&format!("home={}", home.display())),
        "{screen}"
    );
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&home).unwrap().permissions().mode() & 0o777,
        0o700
    );
    assert!(!screen.to_string().contains(&value), "{screen}");
    let start = sim
        .exec_starts()
        .into_iter()
        .find(|o| o.session.is_some())
        .unwrap();
    // The daemon's own credentials never go with it: only the guest's, atc's and the plan's.
    for k in &start.env_keys {
        assert!(
            ["TERM", "LANG", "PATH", "OPENAI_API_KEY", "CODEX_HOME"].contains(&k.as_str())
                || k.starts_with("ATC_"),
            "{k} reached the guest"
        );
    }

    // A dropped connection: the re-attach carries the start's requirement.
    let session = start.session.clone().unwrap();
    assert!(sim.faults().detach_slow(&imp, &session));
    d.wait_session(&id, "reattached", |s| {
        s["lifecycle"]["attachment"] == "attached" && !requires(&sim, OpenKind::Attach).is_empty()
    })
    .await;
    for r in requires(&sim, OpenKind::Attach) {
        assert_eq!(r, ["broker"], "an attach without the requirement");
    }

    // Kill and revive: the binding is verified, nothing is granted again.
    let grants = rpc_calls(&sim, "grants.add");
    kill_and_wait(&d, &id).await;
    let (status, body) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        rpc_calls(&sim, "grants.add"),
        grants,
        "a revive granted again"
    );

    // A grant gone at impd: the next revive's verify refuses before impd sees a start.
    d.call("POST", &format!("/v1/sessions/{id}/kill"), None)
        .await;
    d.wait_session(&id, "exited again", |s| s["alive"] == false)
        .await;
    assert!(sim.faults().ungrant(&imp, "codex-key"));
    let starts = requires(&sim, OpenKind::Start).len();
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_grant_missing")),
        "{err}"
    );
    assert_eq!(
        requires(&sim, OpenKind::Start).len(),
        starts,
        "a start went out"
    );

    // Granted again but the broker not ready: impd's refusal, with its detail, on a revive.
    assert!(sim.faults().grant(&imp, "codex-key"));
    sim.faults()
        .fail_broker_ca(&imp, Some("the CA bundle step failed"));
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (412, Some("broker_not_ready")),
        "{err}"
    );
    assert_eq!(sim.imps().len(), 1, "a revive never takes the host back");

    // The binding as a client sees it, then revoked: a later revive is blocked.
    sim.faults().fail_broker_ca(&imp, None);
    let (status, auth) = d
        .call("GET", &format!("/v1/sessions/{id}/auth"), None)
        .await;
    assert_eq!(status, 200, "{auth}");
    assert_eq!(auth["auth"]["state"], "ready", "{auth}");
    assert_eq!(auth["auth"]["imp"]["name"], imp.as_str(), "{auth}");
    assert_eq!(auth["auth"]["grants"][0]["secret"], "codex-key", "{auth}");
    assert!(!auth.to_string().contains(&value), "{auth}");
    let (status, auth) = d
        .call("POST", &format!("/v1/sessions/{id}/auth/revoke"), None)
        .await;
    assert_eq!(
        (status, auth["auth"]["state"].as_str()),
        (200, Some("revoked")),
        "{auth}"
    );
    assert!(sim.grants()[&imp].is_empty(), "{:?}", sim.grants());
    let (status, err) = d
        .call("POST", &format!("/v1/sessions/{id}/revive"), None)
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_blocked")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["state"], "revoked", "{err}");

    // Forget: the two-step DELETE destroys the bound imp, never the secret.
    let (_, body) = d.call("DELETE", &format!("/v1/sessions/{id}"), None).await;
    let token = body["confirmToken"].as_str().unwrap().to_string();
    let (status, body) = d
        .call(
            "DELETE",
            &format!("/v1/sessions/{id}?confirm={token}"),
            None,
        )
        .await;
    assert_eq!((status, &body["destroyed"]), (200, &json!(true)), "{body}");
    assert!(sim.imp(&imp).is_none(), "the bound imp was destroyed");
    let client = impd_client(&sim);
    let secrets = client.secrets_list().await.unwrap();
    assert!(
        secrets.iter().any(|s| s.name == "codex-key"),
        "a forget deleted the secret"
    );
    let (_, listing) = d.call("GET", "/v1/sessions", None).await;
    assert!(!listing.to_string().contains(&value), "{listing}");
    d.stop().await;
    // The agent's own environment and argv, as its first start wrote them inside the imp
    // (later starts leave them: a kill could cut a rewrite short), hold the placeholder and
    // never the value.
    let guest = tmp.path().join(format!("guest/sessions/{id}"));
    let env = std::fs::read_to_string(guest.join("env.txt")).unwrap();
    assert!(
        env.contains("OPENAI_API_KEY=imp-broker-placeholder"),
        "{env}"
    );
    let argv = std::fs::read_to_string(guest.join("argv.txt")).unwrap();
    assert!(!argv.is_empty());
    // No log line holds it, though the log is not empty (the grep looked at something).
    let logged = logs.text();
    assert!(logged.lines().count() > 10, "nothing was logged");
    assert!(
        !logged.contains(&value),
        "a log line holds the secret's value"
    );
    // No file the daemon or the agent wrote (the store, its WAL, the record files,
    // daemon.json, the guest folders with env.txt and argv.txt) holds the secret's value.
    let mut files = vec![tmp.path().to_path_buf()];
    while let Some(path) = files.pop() {
        if path.is_dir() {
            files.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        } else if let Ok(bytes) = std::fs::read(&path) {
            assert!(
                !bytes.windows(value.len()).any(|w| w == value.as_bytes()),
                "{} holds the secret's value",
                path.display()
            );
        }
    }
    sim.stop();
}

/// The time one admission adds to a reconnect: 100 `slow` detaches of a session with and
/// without the broker, each timed from the detach until impd holds the new attach. Prints
/// p50 and p99 of both; asserts nothing about time. Run with
/// `cargo test --release --test it broker_require::measure -- --ignored --nocapture`.
#[actix_rt::test]
#[ignore]
async fn measure_admission_on_reconnect() {
    let (sim, _) = sim();
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;
    let mut report = Vec::new();
    for agent in ["sh", "brokered"] {
        let (status, body) = d
            .call(
                "POST",
                "/v1/sessions",
                Some(json!({"agent": agent, "cwd": "/tmp"})),
            )
            .await;
        assert_eq!(status, 201, "{body}");
        let id = id_of(&body["session"]);
        let start = sim
            .exec_starts()
            .into_iter()
            .rev()
            .find_map(|o| o.session.map(|s| (o.imp, s)))
            .unwrap();
        let mut times = Vec::new();
        for _ in 0..100 {
            let attaches = |sim: &ImpdSim| {
                sim.exec_opens()
                    .iter()
                    .filter(|o| o.kind == OpenKind::Attach && o.session.as_ref() == Some(&start.1))
                    .count()
            };
            let before = attaches(&sim);
            let t = std::time::Instant::now();
            assert!(sim.faults().detach_slow(&start.0, &start.1));
            // A fine beat: the wait is what is measured.
            poll_every(Duration::from_micros(200), WITHIN, async || {
                (attaches(&sim) != before).then_some(())
            })
            .await
            .expect("the harness attaches again");
            times.push(t.elapsed());
            d.wait_session(&id, "attached", |s| {
                s["lifecycle"]["attachment"] == "attached"
            })
            .await;
        }
        times.sort();
        report.push((agent, times[49], times[98]));
    }
    for (agent, p50, p99) in report {
        println!("reconnect after a slow detach, {agent}: p50 {p50:?}, p99 {p99:?}");
    }
    d.stop().await;
    sim.stop();
}

/// Each gate code through the spawn API: the gate runs before anything is created, so a
/// refused spawn leaves no imp and no session.
#[actix_rt::test]
async fn each_gate_refusal_answers_its_code_through_a_spawn_and_creates_nothing() {
    type Setup = Box<dyn Fn(&ImpdSim)>;
    let cases: Vec<(&str, u16, Setup)> = vec![
        (
            "auth_token_too_broad",
            403,
            Box::new(|sim: &ImpdSim| {
                assert!(sim.faults().set_identity(sim.token(), Identity::default()));
            }),
        ),
        (
            "auth_token_scope",
            403,
            Box::new(|sim: &ImpdSim| {
                assert!(sim.faults().set_identity(
                    sim.token(),
                    Identity {
                        scope: Scope::Exec,
                        ..identity(&["codex-key"])
                    }
                ));
            }),
        ),
        (
            "auth_imp_out_of_scope",
            403,
            Box::new(|sim: &ImpdSim| {
                assert!(sim.faults().set_identity(
                    sim.token(),
                    Identity {
                        imps: Some(vec!["other-*".into()]),
                        ..identity(&["codex-key"])
                    }
                ));
            }),
        ),
        (
            "auth_secret_not_grantable",
            403,
            Box::new(|sim: &ImpdSim| {
                assert!(sim.faults().set_identity(sim.token(), identity(&[])));
            }),
        ),
        (
            "auth_secret_mismatch",
            409,
            Box::new(|sim: &ImpdSim| {
                assert!(sim.faults().remove_secret("codex-key"));
            }),
        ),
        (
            "auth_impd_too_old",
            412,
            Box::new(|sim: &ImpdSim| {
                sim.faults()
                    .set_feature(Flag::SecretRebind, FlagState::Absent);
            }),
        ),
    ];
    for (want, status_wanted, setup) in cases {
        let (sim, _) = sim();
        setup(&sim);
        let tmp = tempfile::tempdir().unwrap();
        let d = daemon(&sim, tmp.path()).await;
        let (status, err) = spawn(&d).await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (status_wanted, Some(want)),
            "{err}"
        );
        assert!(sim.imps().is_empty(), "{want}: an imp was created");
        assert!(
            requires(&sim, OpenKind::Start).is_empty(),
            "{want}: a start was sent"
        );
        let (_, sessions) = d.call("GET", "/v1/sessions", None).await;
        assert_eq!(sessions["sessions"], json!([]), "{want}: {sessions}");
        d.stop().await;
        sim.stop();
    }
}

/// A keyed spawn whose failed create cannot be taken back (the grant's revoke is not
/// confirmed) answers `outcome_unknown`, and a retry under the same key never runs again.
#[actix_rt::test]
async fn a_keyed_spawn_whose_take_back_cannot_be_confirmed_is_outcome_unknown() {
    use atc_testkit::impd_sim::GrantStep;
    let (sim, _) = sim();
    sim.faults()
        .fail_next_grant(GrantStep::Add, Some("codex-key"), boom());
    sim.faults()
        .fail_next_grant(GrantStep::Delete, Some("codex-key"), boom());
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;
    let keyed = || async {
        let mut resp = awc::Client::builder()
            .timeout(Duration::from_secs(30))
            .finish()
            .post(format!("{}/v1/sessions", d.url))
            .bearer_auth(&d.token)
            .insert_header(("Idempotency-Key", "broker-once"))
            .send_json(&json!({"agent": "brokered", "cwd": "/tmp"}))
            .await
            .expect("request");
        let body: Value = serde_json::from_slice(&resp.body().await.unwrap()).unwrap();
        (resp.status().as_u16(), body)
    };
    let (status, err) = keyed().await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("outcome_unknown")),
        "{err}"
    );
    assert!(err["error"]["data"]["effectRef"].is_string(), "{err}");
    let creates = rpc_calls(&sim, "imps.create");
    let (status, again) = keyed().await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("outcome_unknown")),
        "{again}"
    );
    assert_eq!(
        rpc_calls(&sim, "imps.create"),
        creates,
        "the retry ran again"
    );
    d.stop().await;
    sim.stop();
}

/// A daemon whose only agent is a Claude with `auth` over `secrets` and `placeholders`.
async fn claude_daemon(
    sim: &ImpdSim,
    dir: &std::path::Path,
    secrets: &[&str],
    placeholders: &[&str],
) -> TestDaemon {
    let agent = sh_agent("claude", "exec sleep 60", Some(auth(secrets, placeholders)));
    TestDaemon::start_on(dir, broker::config(sim, &dir.join("guest"), agent)).await
}

/// The gate's refusals about the agent's own secrets, through the spawn API: an oauth secret
/// whose sign-in is not `ready` (or an impd without oauth secrets) is `auth_signin_needed`,
/// and a configured placeholder impd sets itself for a granted kind is `auth_binding_invalid`
/// with `problem: placeholder_set_by_impd`. Neither creates an imp or sends a start; the same
/// secret once signed in spawns.
#[actix_rt::test]
async fn an_unsigned_oauth_secret_and_a_placeholder_impd_sets_are_refused_at_the_gate() {
    let (sim, _) = sim();
    sim.faults()
        .add_secret("claude-login", SecretKind::Oauth, &["api.anthropic.com"]);
    sim.faults()
        .add_secret("gh", SecretKind::Github, &["api.github.com"]);
    broker::grantable_only(&sim, &["claude-login", "gh"]);
    let check = |status: u16, err: &Value, want_status: u16, code: &str| {
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (want_status, Some(code)),
            "{err}"
        );
        assert!(sim.imps().is_empty(), "{code}: an imp was created");
        assert!(
            requires(&sim, OpenKind::Start).is_empty(),
            "{code}: a start was sent"
        );
    };

    let tmp = tempfile::tempdir().unwrap();
    let d = claude_daemon(
        &sim,
        tmp.path(),
        &["claude-login"],
        &["CLAUDE_CODE_OAUTH_TOKEN"],
    )
    .await;
    // An impd that does not say it has oauth secrets cannot be trusted with one.
    sim.faults()
        .set_feature(Flag::OauthSecrets, FlagState::Absent);
    let (status, err) = spawn(&d).await;
    check(status, &err, 409, "auth_signin_needed");
    sim.faults()
        .set_feature(Flag::OauthSecrets, FlagState::True);
    sim.faults()
        .set_oauth_status("claude-login", OauthStatus::NeedsLogin);
    let (status, err) = spawn(&d).await;
    check(status, &err, 409, "auth_signin_needed");
    assert_eq!(err["error"]["data"]["status"], "needs_login", "{err}");
    sim.faults()
        .set_oauth_status("claude-login", OauthStatus::Ready);
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    d.stop().await;

    let tmp = tempfile::tempdir().unwrap();
    let imps_before = sim.imps().len();
    let d = claude_daemon(&sim, tmp.path(), &["gh"], &["GH_TOKEN"]).await;
    let (status, err) = spawn(&d).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (422, Some("auth_binding_invalid")),
        "{err}"
    );
    assert_eq!(
        err["error"]["data"]["problem"], "placeholder_set_by_impd",
        "{err}"
    );
    assert_eq!(sim.imps().len(), imps_before, "an imp was created: {err}");
    d.stop().await;
    sim.stop();
}

/// The binding refusals a client meets through the API, each with impd's state checked:
/// an imp already under the name a spawn would create (`auth_runtime_exists`, the imp left
/// alone), an imp replaced under a bound host (`auth_runtime_mismatch`) and a grant nobody
/// bound (`auth_grants_mismatch`, with `data.extra`) on revive. None sends a start.
#[actix_rt::test]
async fn each_binding_refusal_answers_its_code_through_the_api() {
    let (sim, _) = sim();
    let client = impd_client(&sim);
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(&sim, tmp.path()).await;

    // A spawn whose imp name is taken between the daemon choosing it and creating it.
    let held = sim
        .faults()
        .hold_call("tokens.whoami", 0, HoldPoint::BeforeEffect);
    let spawning = spawn(&d);
    let squat = async {
        held.wait_held(atc_testkit::WITHIN).await;
        let (_, listing) = d.call("GET", "/v1/sessions", None).await;
        let id = id_of(&listing["sessions"][0]);
        let imp = atc::providers::imp::naming::imp_name("atc-", &id);
        let theirs = client
            .imps_create(impd_client::CreateImp {
                name: imp.clone(),
                image: None,
                memory_mib: None,
            })
            .await
            .unwrap()
            .id;
        held.release();
        (imp, theirs)
    };
    let ((status, err), (imp, theirs)) = tokio::join!(spawning, squat);
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_runtime_exists")),
        "{err}"
    );
    let now: Vec<(String, String)> = sim.imps().into_iter().map(|i| (i.name, i.id)).collect();
    assert_eq!(
        now,
        [(imp.clone(), theirs)],
        "the imp already there was touched"
    );
    assert!(sim.grants()[&imp].is_empty(), "{:?}", sim.grants());
    client.imps_destroy(&imp).await.unwrap();

    // A bound session, killed; a grant nobody bound appears on its imp.
    let (status, body) = spawn(&d).await;
    assert_eq!(status, 201, "{body}");
    let id = id_of(&body["session"]);
    let imp = atc::providers::imp::naming::imp_name("atc-", &id);
    assert_eq!(sim.grants()[&imp], ["codex-key"]);
    kill_and_wait(&d, &id).await;
    sim.faults()
        .add_secret("stray", SecretKind::Custom, &["stray.example"]);
    assert!(sim.faults().grant(&imp, "stray"));
    let starts = requires(&sim, OpenKind::Start).len();
    let revive = format!("/v1/sessions/{id}/revive");
    let (status, err) = d.call("POST", &revive, None).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_grants_mismatch")),
        "{err}"
    );
    assert_eq!(err["error"]["data"]["extra"], json!(["stray"]), "{err}");
    assert!(sim.faults().ungrant(&imp, "stray"));

    // The imp destroyed and made again under the name: not the one the binding created.
    client.imps_destroy(&imp).await.unwrap();
    client
        .imps_create(impd_client::CreateImp {
            name: imp.clone(),
            image: None,
            memory_mib: None,
        })
        .await
        .unwrap();
    assert!(sim.faults().grant(&imp, "codex-key"));
    let (status, err) = d.call("POST", &revive, None).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("auth_runtime_mismatch")),
        "{err}"
    );
    assert_eq!(
        requires(&sim, OpenKind::Start).len(),
        starts,
        "a refused revive sent a start"
    );
    d.stop().await;
    sim.stop();
}
