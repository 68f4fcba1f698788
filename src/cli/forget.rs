//! `atc forget ID|NAME`: removes the session from the daemon and its fleet (killing the
//! harness if it still runs). When forgetting would also destroy the session's host, the
//! daemon answers with a confirmation token instead; the CLI then needs `--yes` and sends the
//! token back (`DELETE ...?confirm=TOKEN`), so a host is never destroyed by surprise. A session
//! whose workspace holds work that would be lost is refused (`workspace_dirty`) unless
//! `--force`.

use clap::Args;
use serde_json::Value;

use super::output;
use atc_client::{routes, DaemonClient, SessionLabels};

/// Arguments of `atc forget`.
#[derive(Debug, Args)]
pub struct ForgetArgs {
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// Confirm when forgetting also destroys the session's host.
    #[arg(long)]
    pub yes: bool,
    /// Remove the session's workspace even when it holds uncommitted files or commits on no
    /// branch (its own branch always stays in the repository).
    #[arg(long)]
    pub force: bool,
}

/// Forgets the session, confirming the host destruction only with `--yes`.
pub async fn run(client: &DaemonClient, args: ForgetArgs) -> anyhow::Result<i32> {
    let session = client.find_session(&args.session).await?;
    let first = match args.force {
        true => routes::forget_forced(session.id),
        false => routes::session(session.id),
    };
    let mut answer = client.delete(&first).await?;
    if let Some(token) = confirm_token(&answer) {
        if !args.yes {
            anyhow::bail!(
                "forgetting {} also destroys its host; run `atc forget {} --yes` to confirm",
                session.label(),
                args.session
            );
        }
        answer = client
            .delete(&routes::forget_confirmed(session.id, &token))
            .await?;
    }
    let destroyed = answer
        .get("destroyed")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    output::note(&format!(
        "forgot {} ({}){}",
        session.label(),
        session.short_id(),
        if destroyed {
            " and destroyed its host"
        } else {
            ""
        }
    ));
    Ok(0)
}

/// The token of a first-step answer (`{confirmToken, expiresAt}`), if this is one.
fn confirm_token(answer: &Value) -> Option<String> {
    answer
        .get("confirmToken")
        .and_then(Value::as_str)
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confirm_token_only_in_first_step_answers() {
        let first = serde_json::json!({"confirmToken": "t1", "expiresAt": 1});
        assert_eq!(confirm_token(&first).as_deref(), Some("t1"));
        let done = serde_json::json!({"forgotten": true, "destroyed": false});
        assert_eq!(confirm_token(&done), None);
    }
}
