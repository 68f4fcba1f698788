//! The argv an agent's harness finally runs with (spec §9.3). A session's row keeps the
//! configured args with its spawn overrides applied; each start (spawn or revive) adds what
//! belongs to that one start, per agent kind:
//!
//! * Claude: `--settings <file>` (atc's hooks and statusline), and `--resume=<id>` when the
//!   agent's own session is being resumed.
//! * Codex: `-c notify=["<atc>","hook-report"]` (its notify program reports each turn's end,
//!   [`super::codex_notify`]), and the `resume -- <id>` subcommand when resuming; its hooks
//!   are installed by the user.
//! * Grok: any configured `--leader` / `--no-leader` replaced by `--no-leader` (a session hosted
//!   by atc must not take the leader role), and `--resume=<id>` when resuming.
//! * Anything else runs its args unchanged.
//!
//! Nothing here goes through a shell: each flag and value is its own argv element. The resumed
//! id came from a hook report; [`AgentSessionId`] already keeps it from starting with `-`, and
//! it is passed joined to its flag (or after `--`) as well, so that no parser can take it for
//! a flag of its own.

use crate::config::agent_kind::AgentKind;
use std::path::Path;

use super::agent_session_id::AgentSessionId;

/// What one start adds to an agent's args.
#[derive(Debug, Default, Clone, Copy)]
pub struct StartExtras<'a> {
    /// Claude's per-session settings file.
    pub settings: Option<&'a Path>,
    /// The agent's own session id to resume.
    pub resume: Option<&'a AgentSessionId>,
    /// Codex: the `atc` its notify program runs (`None`: no atc where it runs).
    pub notify: Option<&'a Path>,
}

/// `args` shaped for one start of an agent of `kind`.
pub fn shaped_args(
    kind: Option<AgentKind>,
    args: &[String],
    extras: StartExtras<'_>,
) -> Vec<String> {
    let mut out: Vec<String> = match kind {
        Some(AgentKind::Grok) => args
            .iter()
            .filter(|a| *a != "--leader" && *a != "--no-leader")
            .cloned()
            .collect(),
        _ => args.to_vec(),
    };
    match kind {
        Some(AgentKind::Claude) => {
            if let Some(file) = extras.settings {
                out.push("--settings".into());
                out.push(file.display().to_string());
            }
            if let Some(id) = extras.resume {
                out.push(format!("--resume={id}"));
            }
        }
        Some(AgentKind::Codex) => {
            // A global option: before the subcommand, and after the configured args so it
            // replaces a `notify` they set.
            if let Some(atc) = extras.notify {
                out.push("-c".into());
                out.push(super::codex_notify::config_override(atc));
            }
            if let Some(id) = extras.resume {
                out.extend(["resume".into(), "--".into(), id.to_string()]);
            }
        }
        Some(AgentKind::Grok) => {
            out.push("--no-leader".into());
            if let Some(id) = extras.resume {
                out.push(format!("--resume={id}"));
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn each_kind_gets_its_shape() {
        let settings = Path::new("/state/claude/s.json");
        let id = AgentSessionId::parse("abc").unwrap();
        let atc = Path::new("/bin/atc");
        let fresh = StartExtras {
            settings: Some(settings),
            resume: None,
            notify: Some(atc),
        };
        let resumed = StartExtras {
            settings: Some(settings),
            resume: Some(&id),
            notify: Some(atc),
        };
        /// Kind, configured args, extras, expected argv.
        type Case<'a> = (
            Option<AgentKind>,
            &'a [&'a str],
            StartExtras<'a>,
            &'a [&'a str],
        );
        let cases: &[Case] = &[
            (
                Some(AgentKind::Claude),
                &["--model", "opus"],
                fresh,
                &["--model", "opus", "--settings", "/state/claude/s.json"],
            ),
            (
                Some(AgentKind::Claude),
                &[],
                resumed,
                &["--settings", "/state/claude/s.json", "--resume=abc"],
            ),
            (
                Some(AgentKind::Codex),
                &["-m", "o3"],
                fresh,
                &["-m", "o3", "-c", r#"notify=["/bin/atc","hook-report"]"#],
            ),
            (
                Some(AgentKind::Codex),
                &["-m", "o3"],
                resumed,
                &[
                    "-m",
                    "o3",
                    "-c",
                    r#"notify=["/bin/atc","hook-report"]"#,
                    "resume",
                    "--",
                    "abc",
                ],
            ),
            (Some(AgentKind::Codex), &[], StartExtras::default(), &[]),
            (
                Some(AgentKind::Grok),
                &["--leader", "-x", "--no-leader"],
                fresh,
                &["-x", "--no-leader"],
            ),
            (
                Some(AgentKind::Grok),
                &[],
                resumed,
                &["--no-leader", "--resume=abc"],
            ),
            (None, &["-c", "x"], resumed, &["-c", "x"]),
        ];
        for (kind, args, extras, want) in cases {
            assert_eq!(
                shaped_args(*kind, &v(args), *extras),
                v(want),
                "{kind:?} {args:?}"
            );
        }
    }
}
