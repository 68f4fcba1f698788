//! `atc principals [--json]`: the principals config declares, one line each: its id, the
//! targets it is granted and its token file. The token stays in the file, which is where a
//! script's owner reads it (or rewrites it, then sends the daemon SIGHUP).

use clap::Args;

use super::output;
use atc_client::atc_protocol::responses::{PrincipalEntry, PrincipalList};
use atc_client::DaemonClient;

/// Arguments of `atc principals`.
#[derive(Debug, Args)]
pub struct PrincipalsArgs {
    /// Print the daemon's answer as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Runs the command.
pub async fn run(client: &DaemonClient, args: PrincipalsArgs) -> anyhow::Result<i32> {
    let answer = client.get_json("/v1/principals").await?;
    if args.json {
        output::print(&format!("{}\n", serde_json::to_string_pretty(&answer)?))?;
        return Ok(0);
    }
    let list: PrincipalList = serde_json::from_value(answer)?;
    if list.principals.is_empty() {
        output::note("no principals configured (config 'principals')");
    }
    let width = list
        .principals
        .iter()
        .map(|p| p.id.len())
        .max()
        .unwrap_or(0);
    for p in &list.principals {
        output::print(&format!("{}\n", line(p, width)))?;
    }
    Ok(0)
}

/// One principal as a line: its id padded to `width`, its targets, its token file.
fn line(p: &PrincipalEntry, width: usize) -> String {
    let targets = if p.targets.is_empty() {
        "(no targets)".to_string()
    } else {
        p.targets.join(",")
    };
    format!("{:width$}  {targets}  {}", p.id, p.token_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_names_the_targets_and_the_file() {
        let p = |id: &str, targets: &[&str]| PrincipalEntry {
            id: id.into(),
            targets: targets.iter().map(|t| t.to_string()).collect(),
            token_file: format!("/s/principals/{id}"),
        };
        assert_eq!(
            line(&p("ci", &["local", "box"]), 4),
            "ci    local,box  /s/principals/ci"
        );
        assert_eq!(
            line(&p("bot", &[]), 3),
            "bot  (no targets)  /s/principals/bot"
        );
    }
}
