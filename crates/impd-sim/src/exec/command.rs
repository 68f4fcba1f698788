//! The environment a start runs in and impd's checks for `require:["broker"]` (protocol §11):
//! the broker's variables when the imp holds a grant, the placeholders a start may not
//! override, and the refusal when the broker is not ready.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::message::Start;
use crate::envelope::ImpdError;
use crate::process::Command;
use crate::state::{Imp, SimState};

/// Variables impd's broker sets in a guest whose imp holds a grant (protocol §11).
const BROKER_VARS: &[&str] = &[
    "HTTPS_PROXY",
    "https_proxy",
    "NO_PROXY",
    "no_proxy",
    "NODE_USE_ENV_PROXY",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
    "GIT_SSL_CAINFO",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
];

/// Placeholder variables per granted secret kind, which a `require` start may not override.
fn placeholder_vars(kind: &str) -> &'static [&'static str] {
    match kind {
        "github" => &["GH_TOKEN", "GITHUB_TOKEN"],
        "anthropic" => &["ANTHROPIC_API_KEY"],
        "npm" => &["NPM_TOKEN"],
        _ => &[],
    }
}

/// `PRECONDITION_FAILED {reason:"broker_not_ready", detail}`.
pub(super) fn broker_refusal(detail: &str) -> ImpdError {
    ImpdError::new(
        "PRECONDITION_FAILED",
        format!("the broker is not ready: {detail}"),
    )
    .with_data(json!({"reason": "broker_not_ready", "detail": detail}))
}

/// impd's checks for `require:["broker"]` on a start that creates a process (§11).
pub(super) fn broker_check(imp: &Imp, env: &BTreeMap<String, String>) -> Result<(), ImpdError> {
    if imp.grants.is_empty() {
        return Err(broker_refusal("the imp holds no grant"));
    }
    if !imp.broker_ready {
        return Err(broker_refusal("the CA bundle step failed this boot"));
    }
    if let Some(var) = env.keys().find(|k| BROKER_VARS.contains(&k.as_str())) {
        return Err(broker_refusal(&format!("the start's env sets {var}")));
    }
    Ok(())
}

/// The final environment and cwd of a start: the image env (this machine's, with the image's
/// `PATH` when the simulator was given one), the broker's
/// variables when the imp holds a grant, then the start's own env, which wins.
pub(super) fn command(st: &SimState, imp: &str, s: &Start) -> Result<Command, ImpdError> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(path) = &st.opts.image_path {
        env.insert("PATH".into(), path.clone());
    }
    let i = st.imp(imp)?;
    if !i.grants.is_empty() {
        for (k, v) in [
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("https_proxy", "http://127.0.0.1:9"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("NODE_USE_ENV_PROXY", "1"),
        ] {
            env.insert(k.into(), v.into());
        }
        for k in &BROKER_VARS[5..] {
            env.insert(k.to_string(), "/etc/imp/broker-ca.pem".into());
        }
        let kinds: Vec<String> = i
            .grants
            .iter()
            .filter_map(|g| st.secrets.get(g).map(|(kind, _)| kind.clone()))
            .collect();
        if s.require_broker {
            for kind in &kinds {
                if let Some(var) = s
                    .env
                    .keys()
                    .find(|k| placeholder_vars(kind).contains(&k.as_str()))
                {
                    return Err(broker_refusal(&format!("the start's env sets {var}")));
                }
            }
        }
    }
    env.extend(s.env.clone());
    let cwd = s
        .cwd
        .clone()
        .or_else(|| env.get("HOME").cloned())
        .unwrap_or_else(|| "/".into());
    Ok(Command {
        argv: s.argv.clone(),
        env,
        cwd: PathBuf::from(cwd),
        tty: s.tty.then_some((s.cols, s.rows)),
    })
}
