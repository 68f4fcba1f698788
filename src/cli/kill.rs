//! `atc kill ID|NAME`: asks the daemon to end the session's harness (SIGHUP, then SIGKILL
//! after the grace period). The answer comes before the process is gone; the exit shows up
//! later as a state change (`atc ls`). The session itself stays and can be revived.

use clap::Args;

use super::output;
use crate::client::{routes, DaemonClient};

/// Arguments of `atc kill`.
#[derive(Debug, Args)]
pub struct KillArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
}

/// Sends the kill and confirms on stderr.
pub async fn run(client: &DaemonClient, args: KillArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    client
        .post_json(
            &routes::session_action(&session.id, "kill"),
            &serde_json::json!({}),
        )
        .await?;
    output::note(&format!(
        "killing {} ({}); `atc revive {}` starts it again",
        session.label(),
        session.short_id(),
        session.short_id()
    ));
    Ok(0)
}
