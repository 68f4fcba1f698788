//! The environment a start runs in and impd's checks for `require:["broker"]` (protocol §11):
//! the broker's variables and placeholders when the imp's broker is ready, the variables a
//! requiring start may not set itself, and the refusal when the broker is not ready. Whether it
//! is ready is `broker`'s to say.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde_json::json;

use super::message::Start;
use crate::broker::PLACEHOLDER;
use crate::envelope::ImpdError;
use crate::process::Command;
use crate::state::SimState;

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

/// `PRECONDITION_FAILED {reason:"broker_not_ready", detail}`.
pub(super) fn broker_refusal(detail: &str) -> ImpdError {
    ImpdError::new(
        "PRECONDITION_FAILED",
        format!("the broker is not ready: {detail}"),
    )
    .with_data(json!({"reason": "broker_not_ready", "detail": detail}))
}

/// impd's checks for `require:["broker"]` on a start that creates a process (§11 rules 1–3):
/// the imp holds a grant, its CA-bundle step did not fail, and the start's own env sets no
/// broker variable and no placeholder of a granted kind.
pub(super) fn broker_check(
    st: &SimState,
    imp: &str,
    env: &BTreeMap<String, String>,
) -> Result<(), ImpdError> {
    let i = st.imp(imp)?;
    st.broker.readiness(i).map_err(|d| broker_refusal(&d))?;
    let placeholders = st.broker.placeholders_of(i);
    if let Some(var) = env
        .keys()
        .find(|k| BROKER_VARS.contains(&k.as_str()) || placeholders.contains(&k.as_str()))
    {
        return Err(broker_refusal(&format!("the start's env sets {var}")));
    }
    Ok(())
}

/// The final environment and cwd of a start: the image env (this machine's, with the image's
/// `PATH` when the simulator was given one), the broker's variables and the placeholders of
/// granted kinds when the imp's broker is ready, then the start's own env, which wins. No
/// secret's value is ever part of it.
pub(super) fn command(st: &SimState, imp: &str, s: &Start) -> Result<Command, ImpdError> {
    let mut env: BTreeMap<String, String> = std::env::vars().collect();
    if let Some(path) = &st.opts.image_path {
        env.insert("PATH".into(), path.clone());
    }
    let i = st.imp(imp)?;
    if st.broker.readiness(i).is_ok() {
        for (k, v) in [
            ("HTTPS_PROXY", "http://127.0.0.1:9"),
            ("https_proxy", "http://127.0.0.1:9"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("no_proxy", "localhost,127.0.0.1"),
            ("NODE_USE_ENV_PROXY", "1"),
        ] {
            env.insert(k.into(), v.into());
        }
        for k in &BROKER_VARS[5..] {
            env.insert(k.to_string(), "/etc/imp/broker-ca.pem".into());
        }
        for k in st.broker.placeholders_of(i) {
            env.insert(k.to_string(), PLACEHOLDER.into());
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
