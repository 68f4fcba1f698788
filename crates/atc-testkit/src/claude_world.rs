//! One real Claude Code under atc, in a world of its own: the in-process daemon, the fake
//! Messages API with its script, Claude's private home and the folder it works in. The tests
//! of `real_claude.rs` and the page's real-Claude test share it.

use std::path::PathBuf;

use serde_json::{json, Value};

use crate::config::test_config;
use crate::fake_anthropic::{self, user_texts};
use crate::fake_model::{FakeModel, Reply, Served, AGENT_WITHIN};
use crate::real_agents::real_bin;
use crate::test_daemon::{id_of, TestDaemon};

/// One test's world: the daemon, the fake API and its script, Claude's private home and the
/// folder it works in.
pub struct World {
    pub d: TestDaemon,
    pub model: FakeModel,
    _fake: Served,
    pub config: atc::config::Config,
    pub work: PathBuf,
    pub state: PathBuf,
    _root: tempfile::TempDir,
}

/// A world whose model answers the conversation's turns with `script`; `None` (the test
/// skips) when the real Claude is not installed.
pub async fn world(script: Vec<Reply>) -> Option<World> {
    let bin = real_bin("claude")?;
    let root = tempfile::tempdir().expect("temp dir");
    let work = root.path().join("work");
    let state = root.path().join("state");
    std::fs::create_dir_all(&work).expect("work dir");
    std::fs::create_dir_all(&state).expect("state dir");
    let model = FakeModel::new(script);
    let fake = fake_anthropic::start(&model);
    let home = fake_anthropic::prepare_home(root.path(), &work);
    let mut config = test_config();
    config.agents.insert(
        "claude".into(),
        fake_anthropic::agent(&bin, &home, &fake.url),
    );
    let d = TestDaemon::start_on(&state, config.clone()).await;
    Some(World {
        d,
        model,
        _fake: fake,
        config,
        work,
        state,
        _root: root,
    })
}

impl World {
    /// Spawns Claude in the work folder with `extra` fields in the body, and waits until it
    /// takes input.
    pub async fn spawn(&self, extra: Value) -> String {
        let mut body = json!({"agent": "claude", "cwd": self.work, "cols": 120, "rows": 40});
        if let (Some(b), Some(e)) = (body.as_object_mut(), extra.as_object()) {
            b.extend(e.clone());
        }
        let id = id_of(&self.d.spawn_with(body).await);
        self.ready(&id).await;
        id
    }

    /// Waits until Claude's session has started (its `SessionStart` hook named its own
    /// session) and its prompt box is on the screen.
    pub async fn ready(&self, id: &str) {
        self.d
            .wait_session_within(id, "started", AGENT_WITHIN, |s| {
                s["agentSessionID"].is_string()
            })
            .await;
        self.d.wait_screen_within(id, "❯", AGENT_WITHIN).await;
        self.d.wait_paste_mode(id, AGENT_WITHIN).await;
    }

    /// Submits `text` and waits until the fake got the turn that carries it.
    pub async fn submit_turn(&self, id: &str, text: &str) -> Vec<String> {
        let turns_before = self.model.turns().len();
        self.d.submit(id, text).await;
        let asked = self
            .model
            .wait_asked(&format!("a turn with {text:?}"), |asked| {
                asked.iter().filter(|a| a.turn).count() > turns_before
                    && asked
                        .iter()
                        .rev()
                        .find(|a| a.turn)
                        .is_some_and(|a| user_texts(a).last().map(String::as_str) == Some(text))
            })
            .await;
        asked
            .iter()
            .rev()
            .find(|a| a.turn)
            .map(user_texts)
            .unwrap_or_default()
    }

    /// Waits until the session is `done` with `result` as its turn's result.
    pub async fn done_with(&self, id: &str, result: &str) -> Value {
        self.d.wait_done_with(id, result, AGENT_WITHIN).await.0
    }
}
