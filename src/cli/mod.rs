//! The client subcommands of `atc` (everything but `daemon`, `hook-report` and `bench`): one
//! file per command owning its arguments and its effect, with this module only declaring the
//! clap enum and dispatching. Every command finds the daemon through the state dir
//! (`client::DaemonClient::discover`) and must run inside an actix system, because `awc`
//! does.

pub mod attach;
pub mod forget;
pub mod hook_report;
pub mod key_names;
pub mod kill;
pub mod link_status;
pub mod logs;
pub mod ls;
pub mod open;
pub mod output;
pub mod principals;
pub mod restore;
pub mod revive;
pub mod screen;
pub mod send;
pub mod session_tree;
pub mod spawn;
pub mod suspend;
pub mod table;
pub mod terminal;
pub mod top;
pub mod usage_format;
pub mod wait;
pub mod workspaces;

use std::path::PathBuf;

use clap::Subcommand;

use atc_client::DaemonClient;

/// The client subcommands, meant to be flattened into `main.rs`'s command enum next to
/// `daemon`, `hook-report` and `bench` (`#[command(flatten)] Client(ClientCommand)`).
#[derive(Debug, Subcommand)]
pub enum ClientCommand {
    /// List sessions (`--json` for the daemon's raw answer, `--watch` to keep it up to date,
    /// `--sort mem|cpu` to list by what each uses).
    Ls(ls::LsArgs),
    /// Sessions by memory or CPU, refreshed every few seconds until `q` (`--once` for scripts).
    Top(top::TopArgs),
    /// Start a session and print its id (`--attach` to attach to it instead).
    Spawn(spawn::SpawnArgs),
    /// Connect this terminal to a session (`--watch`: watch only); Ctrl-\ detaches.
    Attach(attach::AttachArgs),
    /// Print a session's visible screen as text.
    Screen(screen::ScreenArgs),
    /// Submit a line to a session as its agent takes one (`--keys`: type named keys instead,
    /// as tmux send-keys names them: Enter, C-c, Escape, Up...).
    Send(send::SendArgs),
    /// Wait until a session is done, needs you, or exited: exit 0 when it is, 1 if it ends
    /// otherwise, 2 after `--timeout` seconds.
    Wait(wait::WaitArgs),
    /// End a session's process (SIGHUP, then SIGKILL after a grace period).
    Kill(kill::KillArgs),
    /// Start a fresh process that resumes an exited session in place.
    Revive(revive::ReviveArgs),
    /// Put a remote session's host to sleep with the process inside.
    Suspend(suspend::SuspendArgs),
    /// Remove a session from the daemon (killing it if it still runs).
    Forget(forget::ForgetArgs),
    /// Revive every session that died with an old daemon.
    Restore(restore::RestoreArgs),
    /// Print a session's event trail (its agent's hook reports); `-f` follows it.
    Logs(logs::LogsArgs),
    /// Print the URL of the daemon's browser page and open it in a browser.
    Open(open::OpenArgs),
    /// List or prune workspace directories no session owns.
    Workspaces(workspaces::WorkspacesArgs),
    /// List the principals config declares: id, granted targets, token file (`--json` for
    /// the daemon's answer).
    Principals(principals::PrincipalsArgs),
}

/// Runs one client command against the daemon found in `state_dir` (default: see
/// `client::default_state_dir`). Returns the process exit code; an `Err` should be printed
/// by the caller (with `{:#}`) and exit 1. By the time this returns, `attach` has restored
/// the terminal, so the caller may print freely.
pub async fn run(cmd: ClientCommand, state_dir: Option<PathBuf>) -> anyhow::Result<i32> {
    let client = DaemonClient::discover(state_dir)?;
    match cmd {
        ClientCommand::Ls(args) => ls::run(&client, args).await,
        ClientCommand::Top(args) => top::run(&client, args).await,
        ClientCommand::Spawn(args) => spawn::run(&client, args).await,
        ClientCommand::Attach(args) => attach::run(&client, args).await,
        ClientCommand::Screen(args) => screen::run(&client, args).await,
        ClientCommand::Send(args) => send::run(&client, args).await,
        ClientCommand::Wait(args) => wait::run(&client, args).await,
        ClientCommand::Kill(args) => kill::run(&client, args).await,
        ClientCommand::Revive(args) => revive::run(&client, args).await,
        ClientCommand::Suspend(args) => suspend::run(&client, args).await,
        ClientCommand::Forget(args) => forget::run(&client, args).await,
        ClientCommand::Restore(args) => restore::run(&client, args).await,
        ClientCommand::Logs(args) => logs::run(&client, args).await,
        ClientCommand::Open(args) => open::run(&client, args).await,
        ClientCommand::Workspaces(args) => workspaces::run(&client, args).await,
        ClientCommand::Principals(args) => principals::run(&client, args).await,
    }
}
