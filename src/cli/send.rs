//! `atc send ID TEXT…`: submits a line the way the agent takes one (the daemon's line plan:
//! bracketed paste where the agent wants it, then Enter), as `POST /v1/sessions/{id}/submit`.
//! `atc send --keys ID KEY…`: types keys named as tmux's `send-keys` names them (`Enter`,
//! `C-c`, `Escape`, `Up`; other words as literal text), as raw bytes through
//! `POST /v1/sessions/{id}/input`. See [`super::key_names`].

use clap::Args;

use super::key_names;
use atc_client::{routes, DaemonClient};

/// Arguments of `atc send`.
#[derive(Debug, Args)]
pub struct SendArgs {
    /// Send KEYS as named keys (tmux `send-keys` names: Enter, C-c, Escape, Up, M-x, F5,
    /// PageUp…; a word that is no key name is typed as it is), without a line's Enter.
    #[arg(long)]
    pub keys: bool,
    /// Session id (or the short id from `atc ls`) or name.
    pub session: String,
    /// The line to submit (several words are joined with spaces; after the first, words
    /// that start with `-` are text too; `--` before a first one that does), or with --keys
    /// the keys.
    #[arg(required = true, num_args = 1.., trailing_var_arg = true)]
    pub text: Vec<String>,
}

/// Submits the line or types the keys; silent on success, as a script wants.
pub async fn run(client: &DaemonClient, args: SendArgs) -> anyhow::Result<i32> {
    // Keys are checked before anything is sent: a misspelt one sends nothing.
    let keys = if args.keys {
        Some(key_names::keys_to_bytes(&args.text)?)
    } else {
        None
    };
    let id = client.resolve_session(&args.session).await?;
    match keys {
        Some(bytes) => {
            client
                .post_bytes(&routes::session_action(&id, "input"), bytes)
                .await?;
        }
        None => {
            let text = args.text.join(" ");
            client
                .post_json(
                    &routes::session_action(&id, "submit"),
                    &serde_json::json!({ "text": text }),
                )
                .await?;
        }
    }
    Ok(0)
}
