//! `atc ls`: the daemon's sessions as a table (short id, name, agent, state, liveness, size,
//! working dir, age), or the daemon's raw answer with `--json` for scripts.

use std::time::{SystemTime, UNIX_EPOCH};

use clap::Args;

use super::output;
use atc_client::atc_protocol::{Attachment, ExitReason};
use atc_client::{routes, session, DaemonClient, Descriptor, SessionLabels};

/// Arguments of `atc ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print the daemon's answer (`{"sessions": [...]}`) as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Lists sessions. Exit code 0, also when there are none.
pub async fn run(client: &DaemonClient, args: LsArgs) -> anyhow::Result<i32> {
    let answer = client.get_json(routes::SESSIONS).await?;
    if args.json {
        output::print(&format!("{}\n", serde_json::to_string_pretty(&answer)?))?;
        return Ok(0);
    }
    let sessions = session::parse_list(answer)?;
    if sessions.is_empty() {
        output::note("no sessions; start one with `atc spawn`");
        return Ok(0);
    }
    let home = std::env::var("HOME").ok();
    output::print(&format_table(&sessions, now_ms(), home.as_deref()))?;
    Ok(0)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

const HEADER: [&str; 9] = [
    "ID", "NAME", "AGENT", "TARGET", "STATE", "ALIVE", "SIZE", "CWD", "AGE",
];

/// The state as a user reads it: a remote session's lost connection and a host asleep say so.
fn shown_state(s: &Descriptor) -> String {
    if s.alive && s.lifecycle.attachment == Attachment::Reattaching {
        return format!("{} (reattaching)", s.state);
    }
    if !s.alive && s.exit_reason == Some(ExitReason::Suspended) {
        return "asleep".into();
    }
    s.state.to_string()
}

/// Renders sessions as left-aligned columns separated by two spaces, one line per session,
/// header first. `now_ms` and `home` are passed in so the output is reproducible in tests;
/// a cwd under `home` is shown as `~/...`.
pub fn format_table(sessions: &[Descriptor], now_ms: u64, home: Option<&str>) -> String {
    let mut rows: Vec<[String; 9]> = Vec::with_capacity(sessions.len() + 1);
    rows.push(HEADER.map(String::from));
    for s in sessions {
        rows.push([
            s.short_id(),
            printable(if s.name.is_empty() { "-" } else { &s.name }),
            printable(&s.agent),
            printable(if s.locator.target_id.is_empty() {
                "-"
            } else {
                &s.locator.target_id
            }),
            printable(&shown_state(s)),
            if s.alive { "yes" } else { "no" }.to_string(),
            format!("{}x{}", s.cols, s.rows),
            printable(&shorten_home(&s.cwd, home)),
            format_age(now_ms.saturating_sub(u64::try_from(s.created_at).unwrap_or(0))),
        ]);
    }
    let mut widths = [0usize; 9];
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            if i > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            let pad = width.saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', pad));
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// A coarse age: seconds under a minute, then minutes, hours, days.
pub fn format_age(ms: u64) -> String {
    let secs = ms / 1000;
    match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    }
}

fn shorten_home(cwd: &str, home: Option<&str>) -> String {
    match home.map(|h| h.trim_end_matches('/')) {
        Some(home) if !home.is_empty() => match cwd.strip_prefix(home) {
            Some("") => "~".to_string(),
            Some(rest) if rest.starts_with('/') => format!("~{rest}"),
            _ => cwd.to_string(),
        },
        _ => cwd.to_string(),
    }
}

/// Names and paths come from users; a control character in one would be interpreted by the
/// terminal instead of shown, so each is replaced by `?`.
fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    use atc_client::atc_protocol::{Locator, SessionState};

    fn sample(id: &str, name: Option<&str>, cwd: &str, created_at: i64) -> Descriptor {
        Descriptor {
            id: uuid::Uuid::parse_str(id).expect("test ids are uuids"),
            name: name.unwrap_or_default().into(),
            agent: "shell".into(),
            state: SessionState::Running,
            alive: true,
            cols: 120,
            rows: 40,
            cwd: cwd.into(),
            created_at,
            locator: Locator {
                target_id: "local".into(),
                ..Locator::default()
            },
            ..Descriptor::default()
        }
    }

    fn on_box() -> Locator {
        Locator {
            target_id: "box".into(),
            ..Locator::default()
        }
    }

    #[test]
    fn table_has_aligned_columns() {
        let sessions = [
            sample(
                "5f0c2a1e-8b7d-4c3e-9f10-0123456789ab",
                Some("fix-bug"),
                "/home/u/src/atc",
                1_000,
            ),
            Descriptor {
                alive: false,
                state: SessionState::Exited,
                agent: "claude".into(),
                cols: 80,
                rows: 24,
                ..sample("0123abcd-0000-0000-0000-000000000000", None, "/tmp", 0)
            },
            Descriptor {
                locator: on_box(),
                lifecycle: atc_client::atc_protocol::Lifecycle {
                    attachment: Attachment::Reattaching,
                    ..Default::default()
                },
                ..sample(
                    "9a9a9a9a-0000-0000-0000-000000000000",
                    Some("remote"),
                    "/w",
                    0,
                )
            },
            Descriptor {
                alive: false,
                state: SessionState::Exited,
                exit_reason: Some(ExitReason::Suspended),
                locator: on_box(),
                ..sample(
                    "8b8b8b8b-0000-0000-0000-000000000000",
                    Some("napping"),
                    "/w",
                    0,
                )
            },
        ];
        let table = format_table(&sessions, 3_601_000, Some("/home/u"));
        let expected = "\
ID        NAME     AGENT   TARGET  STATE                  ALIVE  SIZE    CWD        AGE
5f0c2a1e  fix-bug  shell   local   running                yes    120x40  ~/src/atc  1h
0123abcd  -        claude  local   exited                 no     80x24   /tmp       1h
9a9a9a9a  remote   shell   box     running (reattaching)  yes    120x40  /w         1h
8b8b8b8b  napping  shell   box     asleep                 no     120x40  /w         1h
";
        assert_eq!(table, expected);
    }

    #[test]
    fn control_characters_in_names_are_not_sent_to_the_terminal() {
        let sessions = [sample(
            "abc00000-0000-0000-0000-000000000000",
            Some("evil\x1b[2J"),
            "/",
            0,
        )];
        let table = format_table(&sessions, 0, None);
        assert!(!table.contains('\x1b'));
        assert!(table.contains("evil?[2J"));
    }

    #[test]
    fn ages_are_coarse() {
        assert_eq!(format_age(0), "0s");
        assert_eq!(format_age(59_999), "59s");
        assert_eq!(format_age(60_000), "1m");
        assert_eq!(format_age(7_200_000), "2h");
        assert_eq!(format_age(3 * 86_400_000), "3d");
    }

    #[test]
    fn home_is_shortened_only_at_a_path_boundary() {
        assert_eq!(shorten_home("/home/u", Some("/home/u/")), "~");
        assert_eq!(shorten_home("/home/u/x", Some("/home/u")), "~/x");
        assert_eq!(shorten_home("/home/uv", Some("/home/u")), "/home/uv");
        assert_eq!(shorten_home("/home/u/x", None), "/home/u/x");
    }
}
