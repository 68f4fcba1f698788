//! `atc workspaces orphans` and `atc workspaces prune [--force]`: the workspace directories no
//! session owns (a forget whose removal failed, a spawn that died between its copy and its
//! session), and their removal. A prune keeps those that hold work (uncommitted files, commits
//! that would be lost) unless `--force`, and says which it kept and why.

use clap::{Args, Subcommand};

use super::output;
use atc_client::atc_protocol::workspace::{Orphan, OrphanList, PruneAnswer, PruneRequest};
use atc_client::DaemonClient;

/// Arguments of `atc workspaces`.
#[derive(Debug, Args)]
pub struct WorkspacesArgs {
    #[command(subcommand)]
    command: WorkspacesCommand,
}

#[derive(Debug, Subcommand)]
enum WorkspacesCommand {
    /// List the workspace directories no session owns, with the work each holds.
    Orphans,
    /// Remove the orphaned workspaces that hold no work.
    Prune {
        /// Remove those that hold work too.
        #[arg(long)]
        force: bool,
    },
}

/// Runs the subcommand.
pub async fn run(client: &DaemonClient, args: WorkspacesArgs) -> anyhow::Result<i32> {
    match args.command {
        WorkspacesCommand::Orphans => {
            let answer = client.get_json("/v1/workspaces/orphans").await?;
            let list: OrphanList = serde_json::from_value(answer)?;
            if list.orphans.is_empty() {
                output::print("no orphaned workspaces\n")?;
            }
            for o in &list.orphans {
                output::print(&format!("{}\n", line(o)))?;
            }
            Ok(0)
        }
        WorkspacesCommand::Prune { force } => {
            let body = serde_json::to_value(PruneRequest { force: Some(force) })?;
            let answer = client.post_json("/v1/workspaces/prune", &body).await?;
            let done: PruneAnswer = serde_json::from_value(answer)?;
            for dir in &done.removed {
                output::print(&format!("removed {dir}\n"))?;
            }
            for o in &done.kept {
                output::note(&format!("kept {} (`--force` removes it)", line(o)));
            }
            if done.removed.is_empty() && done.kept.is_empty() {
                output::print("no orphaned workspaces\n")?;
            }
            Ok(0)
        }
    }
}

/// One orphan as a line: where, and what it holds.
fn line(o: &Orphan) -> String {
    let plural = |n: u64| if n == 1 { "" } else { "s" };
    let holds = match (o.changed_files, o.unkept_commits) {
        (0, 0) => "nothing to lose".to_string(),
        (f, 0) => format!("{f} uncommitted file{}", plural(f)),
        (0, c) => format!("{c} unkept commit{}", plural(c)),
        (f, c) => format!(
            "{f} uncommitted file{}, {c} unkept commit{}",
            plural(f),
            plural(c)
        ),
    };
    format!("{}  {holds}", o.dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_says_what_an_orphan_holds() {
        let o = |changed_files, unkept_commits| Orphan {
            dir: "/w/a".into(),
            session: None,
            repo_url: None,
            changed_files,
            unkept_commits,
        };
        assert_eq!(line(&o(0, 0)), "/w/a  nothing to lose");
        assert_eq!(line(&o(2, 1)), "/w/a  2 uncommitted files, 1 unkept commit");
    }
}
