//! What every fake model API shares, whatever protocol it speaks: the script of what each
//! turn of the conversation answers, the record of what the agent asked, and the HTTP server on
//! loopback the protocol's routes run in. `fake_anthropic` (Claude's Messages API) and
//! `fake_openai` (Codex's Responses API) put their wire format on top.
//!
//! A turn is one request that carries the agent's tools: that is the conversation's own
//! request. Agents also send side requests (titles, quota probes, summaries) without tools;
//! those get a short text and leave the script alone, so a test's script lines up with the
//! turns it submits.

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use actix_web::{web, App, HttpServer};
use serde_json::Value;

use crate::wait::poll;

/// How long a real agent may take to get a request to the fake; it only bounds failure (a
/// real CLI starts in a second or two, and a cold CI machine is slower).
pub const AGENT_WITHIN: Duration = Duration::from_secs(60);

/// What the model answers on one turn.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Text, and the turn ends.
    Text(String),
    /// A call of the agent's shell tool with this command; the agent asks permission first
    /// (unless told not to), runs it, and sends the output back as the next turn.
    Bash(String),
}

/// One request the fake got.
#[derive(Debug, Clone)]
pub struct Asked {
    /// The request path, such as `/v1/messages`.
    pub path: String,
    /// The model the agent asked for.
    pub model: String,
    /// The reasoning effort, where the protocol carries one.
    pub effort: Option<String>,
    /// Whether it was a turn of the conversation (it carried the agent's tools).
    pub turn: bool,
    /// The whole request body.
    pub body: Value,
}

#[derive(Debug, Default)]
struct State {
    script: VecDeque<Reply>,
    asked: Vec<Asked>,
}

/// The script and the record, shared between a test and its fake server.
#[derive(Debug, Clone, Default)]
pub struct FakeModel {
    state: Arc<Mutex<State>>,
}

impl FakeModel {
    /// A model that answers the conversation's turns with `script`, in order.
    pub fn new(script: impl IntoIterator<Item = Reply>) -> FakeModel {
        let model = FakeModel::default();
        for reply in script {
            model.push(reply);
        }
        model
    }

    /// Adds a turn's answer at the end of the script.
    pub fn push(&self, reply: Reply) {
        self.lock().script.push_back(reply);
    }

    /// Records a request and answers it: the next scripted reply for a turn, a fixed short
    /// text for a side request or once the script is used up.
    pub fn answer(&self, asked: Asked) -> Reply {
        let mut state = self.lock();
        let reply = match asked.turn {
            true => state.script.pop_front(),
            false => None,
        };
        state.asked.push(asked);
        reply.unwrap_or_else(|| Reply::Text("ok".into()))
    }

    /// Every request so far, oldest first.
    pub fn asked(&self) -> Vec<Asked> {
        self.lock().asked.clone()
    }

    /// Waits until `pred` holds for the requests so far and answers them; panics with what
    /// was asked after [`AGENT_WITHIN`].
    pub async fn wait_asked(&self, what: &str, pred: impl Fn(&[Asked]) -> bool) -> Vec<Asked> {
        let found = poll(AGENT_WITHIN, async || {
            let asked = self.asked();
            pred(&asked).then_some(asked)
        })
        .await;
        found.unwrap_or_else(|| {
            let summary: Vec<String> = self
                .asked()
                .iter()
                .map(|a| format!("{} {} turn={}", a.path, a.model, a.turn))
                .collect();
            panic!("the fake model never saw {what}; it saw {summary:?}")
        })
    }

    /// The conversation's turns so far (requests that carried tools).
    pub fn turns(&self) -> Vec<Asked> {
        self.asked().into_iter().filter(|a| a.turn).collect()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A test that panicked while holding the lock has failed already; its state is
        // still the best account of what was asked.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A fake API serving on `127.0.0.1:<ephemeral>` until dropped.
pub struct Served {
    /// `http://127.0.0.1:<port>`, the base URL the agent is pointed at.
    pub url: String,
    handle: actix_web::dev::ServerHandle,
}

impl Drop for Served {
    fn drop(&mut self) {
        let stop = self.handle.stop(false);
        // The server's own task ends with it; nothing waits for the stop to finish.
        actix_rt::spawn(stop);
    }
}

/// Serves `routes` on loopback with `model` as their app data. Runs inside the test's actix
/// system, beside the daemon.
pub fn serve(model: &FakeModel, routes: fn(&mut web::ServiceConfig)) -> Served {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model's port");
    let url = format!("http://{}", listener.local_addr().expect("its address"));
    let model = web::Data::new(model.clone());
    let server = HttpServer::new(move || App::new().app_data(model.clone()).configure(routes))
        .workers(1)
        .disable_signals()
        .listen(listener)
        .expect("listen")
        .run();
    let handle = server.handle();
    actix_rt::spawn(server);
    Served { url, handle }
}
