//! `atc suspend ID|NAME [--force]`: puts the session's host (an imp) to sleep with the
//! process inside; `atc revive` wakes it and resumes the same process. A busy session keeps
//! its host awake unless `--force`; a host someone else holds a lease on stays awake.

use clap::Args;

use super::output;
use atc_client::atc_protocol::requests::SuspendRequest;
use atc_client::{routes, DaemonClient, SessionLabels};

/// Arguments of `atc suspend`.
#[derive(Debug, Args)]
pub struct SuspendArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// Sleep even if the session looks busy.
    #[arg(long)]
    pub force: bool,
}

/// Sends the suspend and confirms on stderr.
pub async fn run(client: &DaemonClient, args: SuspendArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    client
        .post_json(
            &routes::session_action(session.id, "suspend"),
            &serde_json::to_value(SuspendRequest {
                force: Some(args.force),
            })?,
        )
        .await?;
    output::note(&format!(
        "{} ({}) is asleep with its host; `atc revive {}` wakes it",
        session.label(),
        session.short_id(),
        session.short_id()
    ));
    Ok(0)
}
