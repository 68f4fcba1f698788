//! `atc revive ID|NAME`: starts a fresh harness that resumes an exited session in place,
//! sized to this terminal (80x24 when stdout is not one), and prints the session id on stdout
//! like `atc spawn`.

use clap::Args;

use super::{output, terminal};
use atc_client::atc_protocol::requests::ReviveRequest;
use atc_client::{routes, DaemonClient};

/// Arguments of `atc revive`.
#[derive(Debug, Args)]
pub struct ReviveArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
}

/// Revives the session and prints its id.
pub async fn run(client: &DaemonClient, args: ReviveArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    let size = terminal::stdout_size().unwrap_or(terminal::FALLBACK_SIZE);
    client
        .post_json(
            &routes::session_action(session.id, "revive"),
            &serde_json::to_value(ReviveRequest {
                cols: Some(size.cols),
                rows: Some(size.rows),
            })?,
        )
        .await?;
    output::print(&format!("{}\n", session.id))?;
    Ok(0)
}
