//! `atc kill ID|NAME`: asks the daemon to end the session's process (SIGHUP, then SIGKILL
//! after the grace period). The daemon answers once the process is gone and its exit is
//! recorded; the session stays and can be revived. Killing a session that is already dead
//! forgets it (spec §3.7), and the daemon says so with `forgotten: true`.

use clap::Args;

use super::output;
use atc_client::{routes, DaemonClient, SessionLabels};

/// Arguments of `atc kill`.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
}

/// Sends the kill and confirms on stderr.
pub async fn run(client: &DaemonClient, args: KillArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    let answer = client
        .post_json(
            &routes::session_action(session.id, "kill"),
            &serde_json::json!({}),
        )
        .await?;
    if answer["forgotten"] == true {
        output::note(&format!(
            "{} ({}) was already dead; forgot it",
            session.label(),
            session.short_id()
        ));
        return Ok(0);
    }
    let how = match (
        &answer["session"]["exitSignal"],
        &answer["session"]["exitCode"],
    ) {
        (serde_json::Value::Number(sig), _) => format!("ended by signal {sig}"),
        (_, serde_json::Value::Number(code)) => format!("exited with status {code}"),
        _ => "ended".to_string(),
    };
    output::note(&format!(
        "killed {} ({}): {how}; `atc revive {}` starts it again",
        session.label(),
        session.short_id(),
        session.short_id()
    ));
    Ok(0)
}
