//! `atc ls`: the daemon's sessions as a table (unread marker, short id, name, agent, state,
//! liveness, size, working dir, age) with a one-line summary under it, or the daemon's raw
//! answer with `--json` for scripts. Sessions that need you come first, then running, done
//! and exited ones. Colour only when stdout is a terminal and `NO_COLOR` is unset, so a pipe
//! or a file gets plain text. `--watch` redraws whenever the events socket says something
//! changed, until Ctrl-C.
//!
//! The rendering ([`render`]) is a pure function of the sessions, the clock, `$HOME` and the
//! [`Style`]; everything that touches the daemon or the terminal is in [`run`] and [`watch`].

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use awc::ws::{Frame, Message};
use clap::Args;
use futures_util::{SinkExt, StreamExt};
use tokio::signal::unix::{signal, SignalKind};

use super::output;
use super::session_tree::{self, Level, SUB_MARK};
pub use super::table::Style;
use super::table::{self, printable, Column};
use super::usage_format::{self, SortBy};
use atc_client::atc_protocol::workspace::WorkspaceStatus;
use atc_client::atc_protocol::{Attachment, ExitReason, SessionState};
use atc_client::{routes, session, DaemonClient, Descriptor, SessionLabels};

/// Arguments of `atc ls`.
#[derive(Debug, Args)]
pub struct LsArgs {
    /// Print the daemon's answer (`{"sessions": [...]}`) as JSON instead of a table.
    #[arg(long, conflicts_with = "watch")]
    pub json: bool,
    /// Keep the list on screen, redrawn whenever a session changes, until Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// List by a figure of what each session uses, most first, instead of by state
    /// (sessions without a figure come last).
    #[arg(long, value_enum)]
    pub sort: Option<SortBy>,
}

/// Lists sessions. Exit code 0, also when there are none.
pub async fn run(client: &DaemonClient, args: LsArgs) -> anyhow::Result<i32> {
    if args.watch {
        return watch(client, args.sort).await;
    }
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
    let changed = changed_workspaces(client, &sessions).await;
    output::print(&render(
        &sessions,
        args.sort,
        now_ms(),
        home.as_deref(),
        Style::for_stdout(),
        &changed,
    ))?;
    Ok(0)
}

/// The sessions whose workspace holds changes not committed.
pub type Changed = std::collections::HashSet<atc_client::atc_protocol::SessionId>;

/// Asks the daemon where each session's workspace on this machine stands (one on an imp,
/// which has no branch, has no history to ask); a session whose status cannot be read is
/// shown without the marker (the list matters more than the mark).
async fn changed_workspaces(client: &DaemonClient, sessions: &[Descriptor]) -> Changed {
    let asks = sessions
        .iter()
        .filter(|s| s.workspace.as_ref().is_some_and(|w| w.branch.is_some()))
        .map(|s| async move {
            let path = format!("{}/workspace", routes::session(s.id));
            let answer = client.get_json(&path).await.ok()?;
            let status: WorkspaceStatus = serde_json::from_value(answer).ok()?;
            (!status.changed.is_empty()).then_some(s.id)
        });
    futures_util::future::join_all(asks)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The place column: the cwd (`~/...` under `home`), or for a session in a workspace its
/// branch, `+` when it holds changes not committed, and the repository it came from.
fn shown_place(s: &Descriptor, home: Option<&str>, changed: &Changed) -> String {
    let Some(ws) = &s.workspace else {
        return shorten_home(&s.cwd, home);
    };
    let branch = ws.branch.as_deref().unwrap_or("-");
    let mark = if changed.contains(&s.id) { "+" } else { "" };
    let repo = if ws.repo_url.starts_with('/') {
        shorten_home(&ws.repo_url, home)
    } else {
        ws.repo_url.clone()
    };
    format!("{branch}{mark} in {repo}")
}

/// How long to wait after an event for the ones that come with it (a spawn is several),
/// so a burst is one redraw.
const REDRAW_SETTLE: Duration = Duration::from_millis(100);

/// Ages move even when nothing happens; this redraws them.
const AGE_REFRESH: Duration = Duration::from_secs(5);

/// `--watch`: the list, redrawn after every burst of fleet events and every
/// [`AGE_REFRESH`] (which also brings usage figures up to date: no event says one moved), until Ctrl-C (exit 0) or the daemon goes away (an error).
async fn watch(client: &DaemonClient, sort: Option<SortBy>) -> anyhow::Result<i32> {
    let style = Style::for_stdout();
    let home = std::env::var("HOME").ok();
    let mut interrupt = signal(SignalKind::interrupt())
        .map_err(|err| anyhow::anyhow!("cannot watch for Ctrl-C: {err}"))?;
    let mut terminate = signal(SignalKind::terminate())
        .map_err(|err| anyhow::anyhow!("cannot watch for signals: {err}"))?;
    let mut events = client.ws_connect(routes::EVENTS).await?;
    let mut ages = tokio::time::interval(AGE_REFRESH);
    let mut redraw_at = Some(tokio::time::Instant::now());
    loop {
        let settle = async {
            match redraw_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = interrupt.recv() => return Ok(0),
            _ = terminate.recv() => return Ok(0),
            () = settle => {
                redraw_at = None;
                let sessions = client.list_sessions().await?;
                let mut screen = String::new();
                if style == Style::Colour {
                    // Home and clear: the list replaces the previous one in place.
                    screen.push_str("\x1b[H\x1b[2J");
                }
                // A watch redraws on every event: it shows branches without asking each
                // workspace's status again.
                let unasked = Changed::new();
                screen.push_str(&render(
                    &sessions,
                    sort,
                    now_ms(),
                    home.as_deref(),
                    style,
                    &unasked,
                ));
                screen.push_str("(watching; Ctrl-C to stop)\n");
                if style == Style::Plain {
                    // A blank line between lists, for a log or a pipe.
                    screen.push('\n');
                }
                output::print(&screen)?;
            }
            _ = ages.tick() => {
                redraw_at.get_or_insert_with(tokio::time::Instant::now);
            }
            frame = events.next() => match frame {
                Some(Ok(Frame::Text(_))) => {
                    redraw_at.get_or_insert_with(|| tokio::time::Instant::now() + REDRAW_SETTLE);
                }
                Some(Ok(Frame::Ping(payload))) => {
                    events
                        .send(Message::Pong(payload))
                        .await
                        .map_err(|err| anyhow::anyhow!("the events socket broke ({err})"))?;
                }
                Some(Ok(Frame::Close(_))) | None => anyhow::bail!(
                    "the daemon closed the events socket; if it stopped, start it again with \
                     `atc daemon`"
                ),
                Some(Ok(_)) => {}
                Some(Err(err)) => anyhow::bail!("the events socket broke ({err})"),
            },
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The columns: the unread marker keeps its one character even when nothing is unread, one
/// space from the id.
const COLUMNS: [Column; 11] = [
    Column {
        min_width: 1,
        gap: "",
        ..Column::left("")
    },
    Column {
        gap: " ",
        ..Column::left("ID")
    },
    Column::left("NAME"),
    Column::left("AGENT"),
    Column::left("TARGET"),
    Column::left("STATE"),
    Column::left("ALIVE"),
    Column::left("SIZE"),
    Column::left("MEM"),
    Column::left("CWD"),
    Column::left("AGE"),
];

/// The column that carries the state, coloured by it.
const STATE_COLUMN: usize = 5;

/// Where a state sorts: what needs the user first, then what is working, then what is done.
fn rank(state: SessionState) -> u8 {
    match state {
        SessionState::NeedsYou => 0,
        SessionState::Running => 1,
        SessionState::Done => 2,
        SessionState::Exited => 3,
    }
}

/// The order sessions are listed in: by [`rank`], pinned ones first within a state, and the
/// daemon's order otherwise (a stable sort). With `sort`, by that figure first, most first
/// (see [`usage_format::sort_most_first`]), and by state among equals.
pub fn ordered(sessions: &[Descriptor], sort: Option<SortBy>) -> Vec<&Descriptor> {
    let mut list: Vec<&Descriptor> = sessions.iter().collect();
    list.sort_by_key(|s| (rank(s.state), !s.pinned));
    if let Some(by) = sort {
        usage_format::sort_most_first(&mut list, |s| usage_format::figure(s, by));
    }
    list
}

/// The state as a user reads it: a remote session's lost connection, a host asleep and a
/// process the kernel killed at the session's memory limit say so.
pub fn shown_state(s: &Descriptor) -> String {
    if s.alive && s.lifecycle.attachment == Attachment::Reattaching {
        return format!("{} (reattaching)", s.state);
    }
    if !s.alive {
        match s.exit_reason {
            Some(ExitReason::Suspended) => return "asleep".into(),
            Some(ExitReason::MemoryLimit) => return format!("{} (memory limit)", s.state),
            _ => {}
        }
    }
    s.state.to_string()
}

/// The SGR colour of a session's state: needs-you bold yellow (it wants you), running green,
/// done cyan, exited dim, except an end at the memory limit, red: it is news, not history.
pub fn state_colour(s: &Descriptor) -> &'static str {
    if !s.alive && s.exit_reason == Some(ExitReason::MemoryLimit) {
        return "31";
    }
    match s.state {
        SessionState::NeedsYou => "1;33",
        SessionState::Running => "32",
        SessionState::Done => "36",
        SessionState::Exited => "2",
    }
}

/// The table and its summary line, as [`format_table`] and [`summary`] make them.
pub fn render(
    sessions: &[Descriptor],
    sort: Option<SortBy>,
    now_ms: u64,
    home: Option<&str>,
    style: Style,
    changed: &Changed,
) -> String {
    let mut out = format_table(sessions, sort, now_ms, home, style, changed);
    out.push_str(&summary(sessions));
    out.push('\n');
    out
}

/// `12 sessions: 2 need you, 7 running, 3 exited`: the count, then each state that has any,
/// in list order.
pub fn summary(sessions: &[Descriptor]) -> String {
    let total = sessions.len();
    let mut parts = Vec::new();
    for state in [
        SessionState::NeedsYou,
        SessionState::Running,
        SessionState::Done,
        SessionState::Exited,
    ] {
        let n = sessions.iter().filter(|s| s.state == state).count();
        if n == 0 {
            continue;
        }
        parts.push(match state {
            SessionState::NeedsYou if n == 1 => "1 needs you".to_string(),
            SessionState::NeedsYou => format!("{n} need you"),
            SessionState::Running => format!("{n} running"),
            SessionState::Done => format!("{n} done"),
            SessionState::Exited => format!("{n} exited"),
        });
    }
    let noun = if total == 1 { "session" } else { "sessions" };
    if parts.is_empty() {
        format!("{total} {noun}")
    } else {
        format!("{total} {noun}: {}", parts.join(", "))
    }
}

/// Renders sessions as left-aligned columns separated by two spaces, one line per session in
/// [`ordered`] order with sub-sessions right under their parent, names indented
/// ([`session_tree`]), header first; `*` in the first column marks unread. `now_ms` and `home`
/// are passed in so the output is reproducible in tests; a cwd under `home` is shown as
/// `~/...`. With [`Style::Colour`] the header is bold, the state coloured ([`state_colour`])
/// and the marker bold; the columns line up the same either way.
pub fn format_table(
    sessions: &[Descriptor],
    sort: Option<SortBy>,
    now_ms: u64,
    home: Option<&str>,
    style: Style,
    changed: &Changed,
) -> String {
    let list = session_tree::tree(&ordered(sessions, sort));
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|(s, level)| {
            let name = printable(if s.name.is_empty() { "-" } else { &s.name });
            vec![
                if s.unread { "*" } else { "" }.to_string(),
                s.short_id(),
                match level {
                    Level::Top => name,
                    Level::Sub => format!("{SUB_MARK}{name}"),
                },
                printable(&s.agent),
                printable(if s.locator.target_id.is_empty() {
                    "-"
                } else {
                    &s.locator.target_id
                }),
                printable(&shown_state(s)),
                if s.alive { "yes" } else { "no" }.to_string(),
                format!("{}x{}", s.cols, s.rows),
                usage_format::memory_cell(s),
                printable(&shown_place(s, home, changed)),
                format_age(now_ms.saturating_sub(u64::try_from(s.created_at).unwrap_or(0))),
            ]
        })
        .collect();
    table::render(&COLUMNS, &rows, style, |row, column| match row {
        None => Some("1"),
        Some(i) if column == STATE_COLUMN => list.get(i).map(|(s, _)| state_colour(s)),
        Some(_) if column == 0 => Some("1"),
        Some(_) => None,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    use atc_client::atc_protocol::limits::{SessionLimits, Usage};
    use atc_client::atc_protocol::{Locator, SessionState};

    fn sample(id: &str, name: Option<&str>, cwd: &str, created_at: i64) -> Descriptor {
        Descriptor {
            id: id.parse().expect("test ids are uuids"),
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
            Descriptor {
                usage: Some(Usage {
                    memory_bytes: 312 * 1024 * 1024,
                    ..Usage::default()
                }),
                limits: Some(SessionLimits {
                    memory_mib: Some(512),
                    ..SessionLimits::default()
                }),
                ..sample(
                    "5f0c2a1e-8b7d-4c3e-9f10-0123456789ab",
                    Some("fix-bug"),
                    "/home/u/src/atc",
                    1_000,
                )
            },
            Descriptor {
                alive: false,
                state: SessionState::Exited,
                exit_reason: Some(ExitReason::MemoryLimit),
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
        let table = format_table(
            &sessions,
            None,
            3_601_000,
            Some("/home/u"),
            Style::Plain,
            &Changed::new(),
        );
        let expected = "  \
  ID        NAME     AGENT   TARGET  STATE                  ALIVE  SIZE    MEM        CWD        AGE
  5f0c2a1e  fix-bug  shell   local   running                yes    120x40  312M/512M  ~/src/atc  1h
  9a9a9a9a  remote   shell   box     running (reattaching)  yes    120x40  -          /w         1h
  0123abcd  -        claude  local   exited (memory limit)  no     80x24   -          /tmp       1h
  8b8b8b8b  napping  shell   box     asleep                 no     120x40  -          /w         1h
";
        assert_eq!(table, expected);
    }

    fn in_state(id: &str, state: SessionState, pinned: bool, unread: bool) -> Descriptor {
        Descriptor {
            state,
            pinned,
            unread,
            alive: state != SessionState::Exited,
            ..sample(id, Some(&id[..4]), "/w", 0)
        }
    }

    fn fleet() -> Vec<Descriptor> {
        vec![
            in_state(
                "e0000000-0000-0000-0000-000000000000",
                SessionState::Exited,
                false,
                true,
            ),
            in_state(
                "d0000000-0000-0000-0000-000000000000",
                SessionState::Done,
                false,
                true,
            ),
            in_state(
                "a0000000-0000-0000-0000-000000000000",
                SessionState::Running,
                false,
                false,
            ),
            in_state(
                "b0000000-0000-0000-0000-000000000000",
                SessionState::NeedsYou,
                false,
                true,
            ),
            in_state(
                "c0000000-0000-0000-0000-000000000000",
                SessionState::Running,
                true,
                false,
            ),
            in_state(
                "f0000000-0000-0000-0000-000000000000",
                SessionState::NeedsYou,
                false,
                true,
            ),
        ]
    }

    #[test]
    fn needs_you_comes_first_then_running_done_exited_with_pinned_first_in_each() {
        let sessions = fleet();
        let order: Vec<String> = ordered(&sessions, None)
            .iter()
            .map(|s| s.name.clone())
            .collect();
        assert_eq!(order, ["b000", "f000", "c000", "a000", "d000", "e000"]);
    }

    #[test]
    fn sort_by_memory_or_cpu_puts_the_most_first_and_the_unmeasured_last_by_state() {
        let mut sessions = fleet();
        let measure = |s: &mut Descriptor, mib: u64, cpu: f64| {
            s.usage = Some(Usage {
                memory_bytes: mib * 1024 * 1024,
                cpu_seconds: cpu,
                ..Usage::default()
            });
        };
        // a000 (running) is the biggest and the least busy; d000 (done) the other way round.
        measure(&mut sessions[2], 900, 1.0);
        measure(&mut sessions[1], 20, 300.0);
        let names = |sort| -> Vec<String> {
            ordered(&sessions, sort)
                .iter()
                .map(|s| s.name.clone())
                .collect()
        };
        assert_eq!(
            names(Some(SortBy::Mem)),
            ["a000", "d000", "b000", "f000", "c000", "e000"]
        );
        assert_eq!(
            names(Some(SortBy::Cpu)),
            ["d000", "a000", "b000", "f000", "c000", "e000"]
        );
        let table = format_table(
            &sessions,
            Some(SortBy::Mem),
            0,
            None,
            Style::Plain,
            &Changed::new(),
        );
        let first = table.lines().nth(1).unwrap_or_default();
        assert!(first.contains("a000") && first.contains("900M"), "{table}");
    }

    #[test]
    fn an_end_at_the_memory_limit_is_said_and_coloured_apart() {
        let killed = Descriptor {
            exit_reason: Some(ExitReason::MemoryLimit),
            ..in_state(
                "e0000000-0000-0000-0000-000000000000",
                SessionState::Exited,
                false,
                false,
            )
        };
        assert_eq!(shown_state(&killed), "exited (memory limit)");
        let colour = format_table(&[killed], None, 0, None, Style::Colour, &Changed::new());
        assert!(
            colour.contains("\x1b[31mexited (memory limit)\x1b[0m"),
            "{colour}"
        );
    }

    #[test]
    fn the_summary_counts_each_state_that_has_sessions() {
        let sessions = fleet();
        assert_eq!(
            summary(&sessions),
            "6 sessions: 2 need you, 2 running, 1 done, 1 exited"
        );
        assert_eq!(summary(&sessions[2..3]), "1 session: 1 running");
        assert_eq!(summary(&sessions[3..4]), "1 session: 1 needs you");
        assert_eq!(summary(&[]), "0 sessions");
        let rendered = render(&sessions, None, 0, None, Style::Plain, &Changed::new());
        assert!(
            rendered.ends_with("\n6 sessions: 2 need you, 2 running, 1 done, 1 exited\n"),
            "{rendered}"
        );
    }

    #[test]
    fn unread_sessions_are_marked() {
        let table = format_table(&fleet(), None, 0, None, Style::Plain, &Changed::new());
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[1].starts_with("* b0000000  b000"), "{table}");
        assert!(lines[3].starts_with("  c0000000  c000"), "{table}");
    }

    #[test]
    fn plain_has_no_escapes_and_colour_only_adds_them() {
        let sessions = fleet();
        let plain = render(&sessions, None, 0, None, Style::Plain, &Changed::new());
        assert!(!plain.contains('\x1b'), "{plain}");
        let colour = render(&sessions, None, 0, None, Style::Colour, &Changed::new());
        assert!(colour.contains("\x1b[1;33mneeds_you\x1b[0m"), "{colour}");
        assert!(colour.contains("\x1b[32mrunning\x1b[0m"), "{colour}");
        assert!(colour.contains("\x1b[2mexited\x1b[0m"), "{colour}");
        assert!(colour.contains("\x1b[1m*\x1b[0m"), "{colour}");
        // Take the escapes out and the text is the plain one: the columns line up the same.
        let stripped = strip_sgr(&colour);
        assert_eq!(stripped, plain);
    }

    fn strip_sgr(text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(at) = rest.find("\x1b[") {
            out.push_str(&rest[..at]);
            let after = &rest[at..];
            let end = after.find('m').map_or(after.len(), |m| m + 1);
            rest = &after[end..];
        }
        out.push_str(rest);
        out
    }

    #[test]
    fn control_characters_in_names_are_not_sent_to_the_terminal() {
        let sessions = [sample(
            "abc00000-0000-0000-0000-000000000000",
            Some("evil\x1b[2J"),
            "/",
            0,
        )];
        let table = format_table(&sessions, None, 0, None, Style::Plain, &Changed::new());
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
    fn a_workspace_shows_its_branch_a_changed_mark_and_its_repository() {
        let mut s = sample(
            "5f0c2a1e-0000-0000-0000-000000000000",
            Some("w"),
            "/s/ws/app-5f0c",
            0,
        );
        s.workspace = Some(atc_client::atc_protocol::workspace::WorkspaceInfo {
            repo_url: "/home/u/app".into(),
            sha: "abc".into(),
            git_ref: None,
            dir: "/s/ws/app-5f0c".into(),
            branch: Some("atc/w-5f0c2a1e".into()),
            materialized_at: 1,
        });
        let clean = Changed::new();
        assert_eq!(
            shown_place(&s, Some("/home/u"), &clean),
            "atc/w-5f0c2a1e in ~/app"
        );
        let changed: Changed = [s.id].into_iter().collect();
        assert_eq!(
            shown_place(&s, Some("/home/u"), &changed),
            "atc/w-5f0c2a1e+ in ~/app"
        );
        let ws = s.workspace.as_mut().unwrap();
        ws.repo_url = "https://h/o/app.git".into();
        assert_eq!(
            shown_place(&s, Some("/home/u"), &clean),
            "atc/w-5f0c2a1e in https://h/o/app.git"
        );
    }

    #[test]
    fn a_sub_session_is_listed_right_under_its_parent_indented() {
        let parent = sample(
            "00000000-0000-4000-8000-000000000001",
            Some("lead"),
            "/w",
            1,
        );
        let other = sample(
            "00000000-0000-4000-8000-000000000002",
            Some("other"),
            "/w",
            2,
        );
        let sub = Descriptor {
            parent: Some(parent.id),
            ..sample(
                "00000000-0000-4000-8000-000000000003",
                Some("helper"),
                "/w",
                3,
            )
        };
        let table = format_table(
            &[sub, other, parent],
            None,
            10_000,
            None,
            Style::Plain,
            &Changed::new(),
        );
        let line_of = |name: &str| {
            table
                .lines()
                .position(|l| l.contains(name))
                .unwrap_or_else(|| panic!("no {name}: {table}"))
        };
        // Listed first, it still comes after its parent, and the listing's other session
        // keeps its place.
        assert_eq!(
            (line_of("other"), line_of("lead"), line_of("└ helper")),
            (1, 2, 3),
            "{table}"
        );
    }

    #[test]
    fn home_is_shortened_only_at_a_path_boundary() {
        assert_eq!(shorten_home("/home/u", Some("/home/u/")), "~");
        assert_eq!(shorten_home("/home/u/x", Some("/home/u")), "~/x");
        assert_eq!(shorten_home("/home/uv", Some("/home/u")), "/home/uv");
        assert_eq!(shorten_home("/home/u/x", None), "/home/u/x");
    }
}
