//! The real Codex CLI (`@openai/codex`, pinned in tests/agents/package.json) under atc,
//! against the fake Responses API on loopback (atc_testkit::fake_openai), each test with a private
//! HOME and CODEX_HOME (atc_testkit::codex_home). Skipped, saying how to install it, when
//! `npm ci --prefix tests/agents` has not run.
//!
//! What these show about Codex 0.171.0 that the stand-ins did not: it starts at its prompt
//! given its own model provider and a trusted folder; atc's submit (a bracketed paste, then
//! Enter as a separate write) runs a turn; the hooks README tells users to install
//! (SessionStart, UserPromptSubmit, Stop) take the session `running` → `done` with the reply as
//! its result; without hooks, its `notify` program does, and the notify of the title turn
//! Codex runs after a thread's first prompt leaves the user's result alone; `-m` and
//! `resume -- <id>` are taken by the real binary; and, left to its default, Codex starts a
//! setsid `codex app-server` daemon, which left its session's process group but not its
//! cgroup, so it ends with the session's kill (issue 35).

use atc::agents::AgentKind;
use std::path::PathBuf;
use std::time::Duration;

use atc::agents::codex_notify;
use atc::config::attention::AttentionMode;
use atc::config::AgentConfig;
use atc_testkit::codex_home::{self, AppServer, CodexHome, Setup};
use atc_testkit::fake_model::{FakeModel, Reply, Served, AGENT_WITHIN};
use atc_testkit::{fake_openai, id_of, poll, poll_ok, real_agents, test_config, TestDaemon};
use serde_json::{json, Value};

/// The session's terminal: wide enough that a reply is one line on the screen.
const COLS: u16 = 120;
const ROWS: u16 = 40;

/// What Codex's footer shows once its prompt takes input.
const READY: &str = "? for shortcuts";

/// One test's world: the fake, the private home, atc with a `codex` agent running the real
/// binary. Field order is drop order: the home's guard ends Codex's strays before the
/// directory goes.
struct Rig {
    d: TestDaemon,
    fake: FakeModel,
    home: CodexHome,
    cwd: PathBuf,
    _served: Served,
    _tmp: tempfile::TempDir,
}

/// The rig, or `None` (the test skips) when the real Codex is not installed.
async fn rig(script: Vec<Reply>, app_server: AppServer) -> Option<Rig> {
    rig_with(script, app_server, true).await
}

/// [`rig`], with the hooks README tells users to install or without any (`hooks`).
async fn rig_with(script: Vec<Reply>, app_server: AppServer, hooks: bool) -> Option<Rig> {
    rig_attending(script, app_server, hooks, None).await
}

/// [`rig_with`], the agent's `attention` set (`None`: its default, `hooks`).
async fn rig_attending(
    script: Vec<Reply>,
    app_server: AppServer,
    hooks: bool,
    attention: Option<AttentionMode>,
) -> Option<Rig> {
    let bin = real_agents::real_bin("codex")?;
    // Under target/, not /tmp: Codex refuses to put its helper links under a temporary dir.
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir");
    let state = tmp.path().join("state");
    let cwd = tmp.path().join("work");
    std::fs::create_dir_all(&cwd).expect("work dir");
    let fake = FakeModel::new(script);
    let served = fake_openai::start(&fake);
    let atc = PathBuf::from(env!("CARGO_BIN_EXE_atc"));
    // CODEX_HOME is where the test daemon reads Codex's session names from.
    let home = CodexHome::prepare(
        &tmp.path().join("home"),
        &state.join("codex-home"),
        &Setup {
            fake_url: &served.url,
            trusted: &cwd,
            atc: hooks.then_some(atc.as_path()),
            app_server,
        },
    );
    let mut config = test_config();
    config.agents.insert(
        "codex".into(),
        AgentConfig {
            bin: bin.display().to_string(),
            kind: Some(AgentKind::Codex),
            env: home.env(),
            attention,
            ..Default::default()
        },
    );
    let d = TestDaemon::start_on(&state, config).await;
    Some(Rig {
        d,
        fake,
        home,
        cwd,
        _served: served,
        _tmp: tmp,
    })
}

impl Rig {
    /// Spawns Codex (with `extra` in the body) and waits for its prompt.
    async fn spawn(&self, extra: Value) -> String {
        let mut body = json!({"agent": "codex", "cwd": self.cwd, "cols": COLS, "rows": ROWS});
        if let (Some(b), Value::Object(more)) = (body.as_object_mut(), extra) {
            b.extend(more);
        }
        let id = id_of(&self.d.spawn_with(body).await);
        self.ready(&id).await;
        id
    }

    /// Waits until Codex's prompt takes input.
    async fn ready(&self, id: &str) {
        self.d.wait_screen_within(id, READY, AGENT_WITHIN).await;
        self.d.wait_paste_mode(id, AGENT_WITHIN).await;
    }

    /// The screen's text now.
    async fn screen(&self, id: &str) -> String {
        let (_, s) = self
            .d
            .call("GET", &format!("/v1/sessions/{id}/screen"), None)
            .await;
        s["text"].as_str().unwrap_or_default().to_string()
    }

    /// Waits until a revived Codex's prompt takes input. The screen model still shows the
    /// killed process's last screen, footer and all, until the new one paints; a resumed
    /// Codex paints its own (its footer no longer names the thread), and reports nothing
    /// (its SessionStart comes with the first prompt), so the screen is what tells: a new
    /// screen with the prompt and `shows` (its first frames have the prompt before the
    /// resumed history).
    async fn ready_after(&self, id: &str, old: &str, shows: &str) {
        let painted = poll_ok(AGENT_WITHIN, async || {
            let now = self.screen(id).await;
            if now != old && now.contains(READY) && now.contains(shows) {
                Ok(())
            } else {
                Err(now)
            }
        })
        .await;
        if let Err(now) = painted {
            panic!("the revived Codex never painted its prompt and {shows:?}; screen:\n{now}");
        }
    }

    /// Submits `prompt` and waits until the fake has seen it as a turn; answers that turn.
    /// Fails with what the fake saw and the session's screen.
    async fn turn(&self, id: &str, prompt: &str) -> atc_testkit::fake_model::Asked {
        self.turn_pressing_again(id, prompt, None).await
    }

    /// [`Self::turn`], pressing Enter once more if the turn has not come `after` the submit
    /// while the prompt still sits in Codex's input box. A resumed Codex 0.171 can drop the
    /// Enter of a submit that lands while its thread is still loading (CI saw it once in
    /// about ten runs; the text stays in the box): what a person would do is press it again.
    async fn turn_pressing_again(
        &self,
        id: &str,
        prompt: &str,
        again_after: Option<Duration>,
    ) -> atc_testkit::fake_model::Asked {
        self.d.submit(id, prompt).await;
        let seen = |a: &atc_testkit::fake_model::Asked| {
            a.turn && fake_openai::last_user_text(&a.body).as_deref() == Some(prompt)
        };
        let mut again_at = again_after.map(|after| tokio::time::Instant::now() + after);
        let found = poll(AGENT_WITHIN, async || {
            if let Some(asked) = self.fake.asked().into_iter().find(seen) {
                return Some(asked);
            }
            if again_at.is_some_and(|at| tokio::time::Instant::now() > at)
                && self.screen(id).await.contains(&format!("› {prompt}"))
            {
                again_at = None;
                eprintln!("the resumed Codex kept {prompt:?} in its box; pressing Enter again");
                let path = format!("/v1/sessions/{id}/input");
                let (status, body) = self
                    .d
                    .call("POST", &path, Some(json!({"data": "\r"})))
                    .await;
                assert_eq!(status, 200, "{body}");
            }
            None
        })
        .await;
        if let Some(asked) = found {
            return asked;
        }
        let asked: Vec<(bool, Option<String>)> = self
            .fake
            .asked()
            .iter()
            .map(|a| (a.turn, fake_openai::last_user_text(&a.body)))
            .collect();
        panic!(
            "the fake never saw a turn with {prompt:?}; it saw {asked:?}; screen:\n{}",
            self.screen(id).await
        );
    }

    /// Waits until the session is `done` with `result` (Codex's Stop hook).
    async fn done(&self, id: &str, result: &str) -> Value {
        self.d.wait_done_with(id, result, AGENT_WITHIN).await.1
    }

    async fn kill(&self, id: &str) {
        let (status, body) = self
            .d
            .call("POST", &format!("/v1/sessions/{id}/kill"), None)
            .await;
        assert_eq!(status, 200, "kill: {body}");
    }
}

#[actix_rt::test]
async fn a_submitted_prompt_runs_a_codex_turn_and_its_stop_hook_makes_the_session_done() {
    let reply = "The fake model says PINEAPPLE-42";
    let Some(r) = rig(vec![Reply::Text(reply.into())], AppServer::InProcess).await else {
        return;
    };
    let id = r.spawn(json!({})).await;
    let prompt = "Say the magic word";
    let asked = r.turn(&id, prompt).await;
    assert_eq!(asked.model, codex_home::MODEL);
    assert_eq!(asked.path, "/v1/responses");
    assert!(
        asked.body["tools"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["name"] == fake_openai::SHELL_TOOL)),
        "Codex offers its shell as {}: {}",
        fake_openai::SHELL_TOOL,
        asked.body["tools"]
    );
    r.d.wait_screen_within(&id, reply, AGENT_WITHIN).await;
    let row = r.done(&id, reply).await;
    // SessionStart named Codex's own session (a UUID), kept for a revive's resume.
    let agent_session = row["agentSessionId"].as_str().unwrap_or_default();
    assert_eq!(agent_session.len(), 36, "Codex's session id: {row}");
    let rows =
        r.d.wait_trail(&id, "started, prompt-submitted, turn-done", |rows| {
            rows.iter().any(|r| r["event"] == "Stop")
        })
        .await;
    // Codex's notify reports the turn's end too (see the test without hooks).
    let hooks: Vec<&str> = rows
        .iter()
        .filter(|r| r["event"] != codex_notify::TURN_COMPLETE)
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert_eq!(
        hooks,
        ["started", "prompt-submitted", "turn-done"],
        "the hooks of one turn"
    );
    let s = r.d.session(&id).await;
    assert_eq!(s["lastMsg"], "turn done", "{s}");

    // A second prompt in the same session is a second turn.
    r.fake.push(Reply::Text("Second answer BANANA-7".into()));
    r.turn(&id, "And again").await;
    r.d.wait_screen_within(&id, "BANANA-7", AGENT_WITHIN).await;
    r.done(&id, "Second answer BANANA-7").await;
    r.d.stop().await;
}

#[actix_rt::test]
async fn without_hooks_codex_is_done_at_its_notify_running_at_its_next_prompt_and_its_title_turn_does_not_count(
) {
    let reply = "Notified reply MANGO-3";
    let prompt = "Say the fruit";
    // Codex left to start its app-server daemon: given a `-c` override, it keeps its app
    // server inside the session instead, so the notify program runs with the session's own
    // environment (a shared daemon would run it with the first session's).
    let next_reply = "Notified reply KIWI-4";
    let replies = vec![Reply::Text(reply.into()), Reply::Text(next_reply.into())];
    let Some(r) = rig_with(replies, AppServer::Daemon, false).await else {
        return;
    };
    let id = r.spawn(json!({})).await;
    let argv: Vec<String> = r.home.processes().into_iter().map(|(_, c)| c).collect();
    assert!(
        argv.iter().any(|c| c.contains("-c notify=[")),
        "atc sets Codex's notify program: {argv:?}"
    );
    r.turn(&id, prompt).await;
    r.d.wait_screen_within(&id, reply, AGENT_WITHIN).await;
    r.done(&id, reply).await;

    // Codex titles the thread with a turn of its own, on an ephemeral read-only thread whose
    // prompt quotes the user's. It starts about 0.4 s after the user's turn (measured), so
    // it is waited for: a look right after `done` misses it.
    let asked = r
        .fake
        .wait_asked("Codex's title request", |asked| {
            asked.iter().any(|a| fake_openai::is_title_request(&a.body))
        })
        .await;
    let title_asked = asked
        .iter()
        .find(|a| fake_openai::is_title_request(&a.body))
        .map(|a| fake_openai::last_user_text(&a.body).unwrap_or_default());
    assert!(
        title_asked
            .as_deref()
            .is_some_and(|t| t.ends_with(&format!("User prompt:\n{prompt}"))),
        "the title request quotes the user's prompt: {title_asked:?}"
    );
    // Codex took the fake's title: it names its thread with it.
    let named = poll(AGENT_WITHIN, async || {
        let names = r.home.thread_names();
        names
            .iter()
            .any(|n| n == fake_openai::TITLE)
            .then_some(names)
    })
    .await;
    assert!(
        named.is_some(),
        "Codex never named its thread {:?}: {:?}",
        fake_openai::TITLE,
        r.home.thread_names()
    );

    // Codex runs its notify program for the title turn too (two notifies, one per turn);
    // atc reads the title turn's as not the user's (a heartbeat), and only the user's turn
    // is `turn-done`, with the reply, not the title, as its result. Which of the two comes
    // first is Codex's timing, so they are compared sorted.
    let rows =
        r.d.wait_trail(&id, "a notify for each of the two turns", |rows| {
            rows.iter()
                .filter(|r| r["event"] == codex_notify::TURN_COMPLETE)
                .count()
                >= 2
        })
        .await;
    let mut notified: Vec<(&str, &str, &Value)> = rows
        .iter()
        .map(|r| {
            (
                r["event"].as_str().unwrap_or_default(),
                r["kind"].as_str().unwrap_or_default(),
                &r["detail"],
            )
        })
        .collect();
    notified.sort_by_key(|(_, kind, _)| *kind);
    assert_eq!(
        notified,
        [
            (codex_notify::TURN_COMPLETE, "heartbeat", &Value::Null),
            (codex_notify::TURN_COMPLETE, "turn-done", &json!(reply)),
        ],
        "no hooks, only notify: the user's turn done, the title turn's counting for nothing"
    );
    // The title turn's notify left the session as the user's turn did.
    let s = r.d.session(&id).await;
    assert_eq!(
        (
            s["state"].clone(),
            s["lastMsg"].clone(),
            s["stateSource"].clone()
        ),
        (json!("done"), json!("turn done"), json!("hooks")),
        "{s}"
    );
    let row = r.d.fleet_row(&id).await;
    assert_eq!(row["result"], reply, "the title is not the result: {row}");

    // Codex's attention follows its activity by default: nothing but notify reports, and
    // notify says only that a turn ended. The user's next prompt starts the next turn: the
    // session is `running` from its Enter (seen on the events socket, since the fake answers
    // at once), then `done` again with the new reply.
    let mut events = r.d.ws("/v1/events").await;
    r.turn(&id, "Say another fruit").await;
    let deadline = tokio::time::Instant::now() + AGENT_WITHIN;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let Some(frame) = events.next_within(left).await else {
            panic!("no running state from the second prompt's Enter within {AGENT_WITHIN:?}");
        };
        let atc_testkit::ws::Frame::Text(event) = frame else {
            continue;
        };
        let session = &event["session"];
        if event["type"] == "session.state"
            && session["id"] == id.as_str()
            && session["state"] == "running"
        {
            assert_eq!(session["lastMsg"], "active: input", "{session}");
            break;
        }
    }
    r.d.wait_screen_within(&id, next_reply, AGENT_WITHIN).await;
    r.done(&id, next_reply).await;

    let daemon: Vec<(i32, String)> = r
        .home
        .processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.contains("app-server --listen"))
        .collect();
    assert!(daemon.is_empty(), "no app-server daemon: {daemon:?}");
    r.d.stop().await;
}

#[actix_rt::test]
async fn a_model_override_reaches_the_model_api() {
    let Some(r) = rig(vec![Reply::Text("ok".into())], AppServer::InProcess).await else {
        return;
    };
    let id = r.spawn(json!({"model": "atc-override-model"})).await;
    let argv: Vec<String> = r.home.processes().into_iter().map(|(_, c)| c).collect();
    assert!(
        argv.iter()
            .any(|c| c.contains("codex -m atc-override-model -c notify=")),
        "atc appends `-m <model>`, then its notify program: {argv:?}"
    );
    let asked = r.turn(&id, "Which model?").await;
    assert_eq!(asked.model, "atc-override-model");
    r.d.stop().await;
}

#[actix_rt::test]
async fn kill_and_revive_resume_the_same_codex_conversation() {
    let script = vec![
        Reply::Text("First reply KIWI-1".into()),
        Reply::Text("Second reply KIWI-2".into()),
    ];
    let Some(r) = rig(script, AppServer::InProcess).await else {
        return;
    };
    let id = r.spawn(json!({})).await;
    r.turn(&id, "Remember KIWI").await;
    let row = r.done(&id, "First reply KIWI-1").await;
    let agent_session = row["agentSessionId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let before = r.screen(&id).await;
    let since = r.d.stream_end(&id).await;
    r.kill(&id).await;
    let (status, body) =
        r.d.call("POST", &format!("/v1/sessions/{id}/revive"), None)
            .await;
    assert_eq!(status, 200, "revive: {body}");
    // The revive ran `codex resume -- <id>`: the earlier turn is on the new screen again.
    r.ready_after(&id, &before, "First reply KIWI-1").await;
    // The screen model still has the killed Codex's modes; a submit before the new one turns
    // bracketed paste on types the text bare, and Codex takes the `\r` right behind it for
    // part of a paste.
    r.d.wait_output_since(&id, &since, b"\x1b[?2004h").await;
    let argv = r.home.processes().into_iter().map(|(_, cmd)| cmd);
    let resumed = format!(" resume -- {agent_session}");
    assert!(
        argv.clone().any(|cmd| cmd.ends_with(&resumed)),
        "the revive runs {resumed:?}: {:?}",
        argv.collect::<Vec<_>>()
    );
    let s = r.d.session(&id).await;
    assert_eq!(
        s["lastMsg"], "adopting…",
        "no report until the first prompt: {s}"
    );
    let asked = r
        .turn_pressing_again(
            &id,
            "What did I ask you to remember?",
            Some(Duration::from_secs(5)),
        )
        .await;
    let texts = fake_openai::user_texts(&asked.body);
    assert!(
        texts.iter().any(|t| t == "Remember KIWI"),
        "the resumed turn carries the earlier prompt: {texts:?}"
    );
    assert_eq!(
        asked.body["prompt_cache_key"], agent_session,
        "the same Codex session"
    );
    r.done(&id, "Second reply KIWI-2").await;
    r.d.stop().await;
}

#[actix_rt::test]
async fn codex_app_server_daemon_ends_with_the_sessions_kill() {
    // Codex 0.171 runs its app server embedded when given a `-c` override, as atc's notify
    // program is; attention `none` goes without it, as a user's Codex outside atc would.
    let script = vec![Reply::Text("daemon here".into())];
    let Some(r) = rig_attending(script, AppServer::Daemon, true, Some(AttentionMode::None)).await
    else {
        return;
    };
    let id = r.spawn(json!({})).await;
    r.turn(&id, "Hello daemon").await;
    // Its Stop hook still reports the turn; attention `none` keeps the state where it is.
    r.d.wait_trail(&id, "the Stop hook", |rows| {
        rows.iter().any(|r| r["event"] == "Stop")
    })
    .await;
    let daemons = || -> Vec<(i32, String)> {
        r.home
            .processes()
            .into_iter()
            .filter(|(_, cmd)| cmd.contains(" app-server"))
            .collect()
    };
    // The daemon and its pid-update loop each lead a session of their own (setsid). Only
    // those are counted: a child the daemon forked for a hook shows the daemon's command line
    // until it execs, in the daemon's session.
    let found: Vec<(i32, String)> = daemons()
        .into_iter()
        .filter(|(pid, _)| codex_home::session_of(*pid) == Some(*pid))
        .collect();
    assert!(
        found.iter().any(|(_, c)| c.contains("app-server --listen")),
        "Codex's app-server daemon, leading its own session: {:?}",
        r.home.processes()
    );
    r.kill(&id).await;
    r.d.wait_session_within(&id, "exited", AGENT_WITHIN, |s| s["alive"] == false)
        .await;
    // Its cgroup took it down with the session, with atc still running.
    let Rig { d, home, .. } = r;
    let gone = poll(atc_testkit::WITHIN, async || {
        let left = daemons_of(&home);
        found
            .iter()
            .all(|(pid, _)| !left.contains(pid))
            .then_some(())
    })
    .await;
    assert!(
        gone.is_some(),
        "the app-server outlived the session's kill: found {found:?}, left {:?}",
        daemons_of(&home)
    );
    d.stop().await;
    // Nothing of it is left: gone without the test ending anything.
    wait_gone(&home).await;
}

/// The app-server processes of `home` still running.
fn daemons_of(home: &CodexHome) -> Vec<i32> {
    home.processes()
        .into_iter()
        .filter(|(_, cmd)| cmd.contains(" app-server"))
        .map(|(pid, _)| pid)
        .collect()
}

/// Waits until nothing names `home` (killed processes are reaped by init).
async fn wait_gone(home: &CodexHome) {
    let gone = poll(atc_testkit::WITHIN, async || {
        home.processes().is_empty().then_some(())
    })
    .await;
    assert!(gone.is_some(), "still running: {:?}", home.processes());
}

#[test]
fn the_hook_trust_hash_is_the_one_codex_records() {
    // What Codex 0.171.0 wrote to config.toml after "Trust all and continue" for this command.
    let command = "cat >> /tmp/wtcodex/hooks.log; echo >> /tmp/wtcodex/hooks.log";
    assert_eq!(
        codex_home::trust_hash("session_start", command),
        "ec03dfe3f79334a52ed67e9c2a9caf72c38d544b5a5906167a05e9367c685c6a"
    );
    assert_eq!(
        codex_home::trust_hash("stop", command),
        "9bdbf3be75103abe81efada048bc2994f1fddb8ed659b341d46e81ff2991c8fb"
    );
}

/// Where the recording of one real Codex session lives (the screen work's corpus and the load
/// tool's payloads read it).
fn recording_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/agents/recordings/codex-0.171.0.bin")
}

/// Re-records `tests/agents/recordings/codex-0.171.0.bin`: every byte Codex wrote in a spawn,
/// one submitted prompt, its reply and the idle prompt after it, read back from offset 0 of
/// the session's stream. Run with `cargo test --test it real_codex:: -- --ignored`.
#[actix_rt::test]
#[ignore = "re-records tests/agents/recordings/codex-0.171.0.bin"]
async fn record_a_codex_session() {
    let reply = "Recorded reply: the quick brown fox jumps over the lazy dog.";
    let Some(r) = rig(vec![Reply::Text(reply.into())], AppServer::InProcess).await else {
        return;
    };
    let id = r.spawn(json!({})).await;
    r.turn(&id, "Say a pangram").await;
    r.d.wait_screen_within(&id, reply, AGENT_WITHIN).await;
    r.done(&id, reply).await;
    let size = format!("cols={COLS}&rows={ROWS}&mode=watch");
    let (ws, attached, _) = r.d.attach(&id, &size).await;
    ws.close().await;
    let stream = attached["stream"].as_str().expect("a stream id");
    let end = attached["offset"].as_u64().expect("an offset");
    // A resume from offset 0 replays the stream, as long as the ring holds it all.
    let mut ws =
        r.d.ws(&format!(
            "/v1/sessions/{id}/attach?{size}&stream={stream}&from=0"
        ))
        .await;
    let again = ws.next_text("attached").await;
    assert_eq!(again["replay"], "resume", "{again}");
    let mut bytes = ws.read_at_least(end as usize).await;
    ws.close().await;
    bytes.truncate(end as usize);
    // Codex paints changed cells only: words arrive apart, joined by cursor moves.
    assert!(String::from_utf8_lossy(&bytes).contains("Recorded"));
    let path = recording_path();
    std::fs::create_dir_all(path.parent().expect("a parent")).expect("recordings dir");
    std::fs::write(&path, &bytes).expect("write the recording");
    eprintln!("recorded {} bytes to {}", bytes.len(), path.display());
    r.d.stop().await;
}

#[actix_rt::test]
async fn a_shell_call_that_asks_permission_makes_the_session_need_you() {
    let script = vec![Reply::Bash("echo approved-$((6*7))".into())];
    let Some(r) = rig(script, AppServer::InProcess).await else {
        return;
    };
    let id = r.spawn(json!({})).await;
    r.turn(&id, "Run the command").await;
    // Codex's PermissionRequest hook names its shell `Bash`, as Claude's does.
    let s =
        r.d.wait_session_within(&id, "needs_you", AGENT_WITHIN, |s| {
            s["state"] == "needs_you"
        })
        .await;
    assert_eq!(s["lastMsg"], "waiting for approval: Bash", "{s}");
    r.d.stop().await;
}
