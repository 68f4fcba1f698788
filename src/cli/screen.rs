//! `atc screen ID|NAME`: prints the session's visible screen as plain text (the daemon's
//! screen model, so it works without attaching and on a killed session's last screen).

use clap::Args;
use serde_json::Value;

use super::output;
use atc_client::{routes, ClientError, DaemonClient};

/// Arguments of `atc screen`.
#[derive(Debug, Args)]
pub struct ScreenArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
}

/// Prints the screen text, ending with a newline.
pub async fn run(client: &DaemonClient, args: ScreenArgs) -> anyhow::Result<i32> {
    let id = client.resolve_session(&args.session).await?;
    let answer = client
        .get_json(&routes::session_action(&id, "screen"))
        .await?;
    let text =
        answer
            .get("text")
            .and_then(Value::as_str)
            .ok_or_else(|| ClientError::BadResponse {
                cause: "the screen answer has no `text`".to_string(),
            })?;
    let mut text = text.to_string();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    output::print(&text)?;
    Ok(0)
}
