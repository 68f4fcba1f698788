//! `atc top`: the sessions by what they use, memory (default) or CPU, under a line of fleet
//! totals, refreshed every `--interval` seconds as `top` does. On a terminal it takes the
//! screen (the alternate one, so the shell's scrollback is untouched) and redraws it in place
//! until `q` or Ctrl-C; with `--once`, `-n N` or stdout not a terminal it prints frames one
//! after another with no screen control, for scripts and logs (`top -b`).
//!
//! Usage comes with the session list (the daemon reads each session's cgroup when asked, so
//! nothing samples between refreshes). CPU is shown as a share of one core over the last
//! interval, from two looks at each session's CPU seconds ([`Sample`]); the first frame has no
//! earlier look and shows `-` there, with the seconds used so far beside it.
//!
//! The frames ([`lines`], [`frame`]) are pure functions of the sessions and two samples;
//! [`run`] and its loops own the daemon, the terminal and the clock.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use clap::Args;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::time::Instant;

use super::ls;
use super::output;
use super::table::{self, printable, Column, Style};
use super::terminal::{self, RawMode};
use super::usage_format::{self, SortBy};
use atc_client::atc_protocol::SessionId;
use atc_client::{DaemonClient, Descriptor, SessionLabels};

/// Arguments of `atc top`.
#[derive(Debug, Args)]
pub struct TopArgs {
    /// What to list by, most first.
    #[arg(long, value_enum, default_value = "mem")]
    pub sort: SortBy,
    /// Seconds between refreshes (fractions allowed, at least 0.1).
    #[arg(short = 'd', long, value_name = "SECS", default_value = "2", value_parser = parse_interval)]
    pub interval: Duration,
    /// Print one frame without screen control and exit (`-n 1`).
    #[arg(long, conflicts_with = "iterations")]
    pub once: bool,
    /// Print N frames, one interval apart, without screen control, then exit (`top -b -n N`).
    #[arg(short = 'n', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub iterations: Option<u32>,
}

/// The shortest interval: below it the refreshes are the daemon's load, not the sessions'.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

fn parse_interval(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    let interval = Duration::try_from_secs_f64(secs)
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if interval < MIN_INTERVAL {
        return Err(format!(
            "the interval is at least {}s",
            MIN_INTERVAL.as_secs_f64()
        ));
    }
    Ok(interval)
}

/// Shows the sessions until `q`, Ctrl-C or the last of `-n` frames. Exit code 0.
pub async fn run(client: &DaemonClient, args: TopArgs) -> anyhow::Result<i32> {
    let frames = if args.once { Some(1) } else { args.iterations };
    let mut stop = Stops::register()?;
    if frames.is_none() && std::io::stdout().is_terminal() {
        return screen(client, &args, &mut stop).await;
    }
    batch(client, &args, frames, &mut stop).await
}

/// The signals that end `top` cleanly (exit 0): Ctrl-C when the terminal is not raw, and a
/// terminal or a supervisor going away.
struct Stops {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Stops {
    fn register() -> anyhow::Result<Stops> {
        let register = |kind: SignalKind| {
            signal(kind).map_err(|err| anyhow::anyhow!("cannot watch for signals: {err}"))
        };
        Ok(Stops {
            int: register(SignalKind::interrupt())?,
            term: register(SignalKind::terminate())?,
            hup: register(SignalKind::hangup())?,
        })
    }

    /// Sleeps until `at`; false when a signal came first.
    async fn sleep_until(&mut self, at: Instant) -> bool {
        tokio::select! {
            () = tokio::time::sleep_until(at) => true,
            _ = self.int.recv() => false,
            _ = self.term.recv() => false,
            _ = self.hup.recv() => false,
        }
    }
}

/// Frames one after another, a blank line between them, plain unless colour was asked for by
/// the terminal: `frames` of them, or until a signal.
async fn batch(
    client: &DaemonClient,
    args: &TopArgs,
    frames: Option<u32>,
    stop: &mut Stops,
) -> anyhow::Result<i32> {
    let style = Style::for_stdout();
    let mut before: Option<Sample> = None;
    let mut shown = 0u32;
    loop {
        let next = Instant::now() + args.interval;
        let sessions = client.list_sessions().await?;
        let now = Sample::of(&sessions, Instant::now());
        let mut text = frame(&sessions, &now, before.as_ref(), args.sort, style, None);
        shown = shown.saturating_add(1);
        let last = frames.is_some_and(|n| shown >= n);
        if !last {
            text.push('\n');
        }
        output::print(&text)?;
        if last || !stop.sleep_until(next).await {
            return Ok(0);
        }
        before = Some(now);
    }
}

/// Takes the alternate screen, without line wrap (a long line is cut at the edge rather than
/// pushing the table down), and hides the cursor.
const ENTER_SCREEN: &[u8] = b"\x1b[?1049h\x1b[?7l\x1b[?25l";

/// Line wrap back on; [`terminal::hand_back_terminal`] does the rest.
const LEAVE_SCREEN: &[u8] = b"\x1b[?7h";

/// How many keystroke reads may wait: `top` reads each as it comes, so a few are plenty.
const KEY_QUEUE: usize = 4;

/// Keystrokes arrive a few bytes at a time.
const KEY_READ_SIZE: usize = 64;

/// The screen, redrawn in place every interval until `q` or Ctrl-C (a byte, since the
/// terminal is raw) or a signal. The terminal is handed back however this ends.
async fn screen(client: &DaemonClient, args: &TopArgs, stop: &mut Stops) -> anyhow::Result<i32> {
    let raw = if std::io::stdin().is_terminal() {
        Some(RawMode::enter()?)
    } else {
        None
    };
    let keys = raw
        .as_ref()
        .map(|_| terminal::spawn_stdin_reader(KEY_QUEUE, KEY_READ_SIZE));
    write_terminal(ENTER_SCREEN)?;
    let ended = redraw(client, args, stop, keys).await;
    // The terminal is restored before an error is printed, so it is readable. Failing to
    // write the sequence means the terminal is gone, and there is nothing left to restore.
    let _ = write_terminal(LEAVE_SCREEN);
    terminal::hand_back_terminal(true);
    drop(raw);
    ended
}

/// The keys that quit: `q`, `Q`, and Ctrl-C, which a raw terminal delivers as a byte.
fn quits(chunk: &[u8]) -> bool {
    chunk.iter().any(|b| matches!(b, b'q' | b'Q' | 0x03))
}

async fn redraw(
    client: &DaemonClient,
    args: &TopArgs,
    stop: &mut Stops,
    mut keys: Option<tokio::sync::mpsc::Receiver<Vec<u8>>>,
) -> anyhow::Result<i32> {
    let style = Style::for_stdout();
    let mut resized = signal(SignalKind::window_change())
        .map_err(|err| anyhow::anyhow!("cannot watch for resizes: {err}"))?;
    let mut before: Option<Sample> = None;
    let mut next = Instant::now();
    loop {
        let key = async {
            match keys.as_mut() {
                Some(keys) => keys.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = tokio::time::sleep_until(next) => {
                next = Instant::now() + args.interval;
                let sessions = client.list_sessions().await?;
                let now = Sample::of(&sessions, Instant::now());
                let rows = terminal::stdout_size().map(|size| usize::from(size.rows));
                let text = frame(&sessions, &now, before.as_ref(), args.sort, style, rows);
                // Over the last frame in place, each line's rest and the screen below cleared
                // (clearing first would flicker); raw output needs the carriage return too.
                let screen = format!("\x1b[H{}\x1b[J", text.replace('\n', "\x1b[K\r\n"));
                output::print(&screen)?;
                before = Some(now);
            }
            chunk = key => match chunk {
                Some(chunk) if quits(&chunk) => return Ok(0),
                Some(_) => {}
                // No more keys (stdin closed): carry on until a signal, as `top` does.
                None => keys = None,
            },
            // A new size: draw again now, to fit it.
            _ = resized.recv() => next = Instant::now(),
            _ = stop.int.recv() => return Ok(0),
            _ = stop.term.recv() => return Ok(0),
            _ = stop.hup.recv() => return Ok(0),
        }
    }
}

fn write_terminal(bytes: &[u8]) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(bytes)
        .and_then(|()| stdout.flush())
        .map_err(|err| anyhow::anyhow!("cannot write to the terminal: {err}"))
}

/// One look at the fleet: when it was taken, and each session's CPU seconds so far.
#[derive(Debug, Clone)]
pub struct Sample {
    at: Instant,
    cpu_seconds: HashMap<SessionId, f64>,
}

impl Sample {
    /// The CPU seconds of each session that reports usage, as of `at`.
    pub fn of(sessions: &[Descriptor], at: Instant) -> Sample {
        let cpu_seconds = sessions
            .iter()
            .filter_map(|s| Some((s.id, s.usage?.cpu_seconds)))
            .collect();
        Sample { at, cpu_seconds }
    }
}

/// A session as a frame lists it.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub session: &'a Descriptor,
    /// Its share of a core since the earlier look; `None` without one (the first frame, a
    /// session new since, or one whose count started again).
    pub cpu_percent: Option<f64>,
}

/// The sessions in the order a frame lists them: by `by`, most first, and in `atc ls`'s order
/// among equals and among those without a figure, which come last. By CPU, the share since
/// `before`, or on the first frame the seconds used so far.
pub fn lines<'a>(
    sessions: &'a [Descriptor],
    now: &Sample,
    before: Option<&Sample>,
    by: SortBy,
) -> Vec<Line<'a>> {
    let elapsed = before.map(|b| now.at.saturating_duration_since(b.at));
    let mut list: Vec<Line<'a>> = ls::ordered(sessions, None)
        .into_iter()
        .map(|s| Line {
            session: s,
            cpu_percent: match (before, elapsed, now.cpu_seconds.get(&s.id)) {
                (Some(b), Some(elapsed), Some(&seconds)) => {
                    usage_format::cpu_percent(b.cpu_seconds.get(&s.id).copied(), seconds, elapsed)
                }
                _ => None,
            },
        })
        .collect();
    match (by, before) {
        (SortBy::Cpu, Some(_)) => usage_format::sort_most_first(&mut list, |l| l.cpu_percent),
        (SortBy::Mem | SortBy::Cpu, _) => {
            usage_format::sort_most_first(&mut list, |l| usage_format::figure(l.session, by));
        }
    }
    list
}

/// The fleet's totals, the first line of a frame: `4 sessions, 3 alive · mem 1.2G · pids 31 ·
/// cpu 42.0%`. Memory and processes add up the sessions that report usage; CPU the shares
/// known this frame, and it is left out on the first.
pub fn totals(sessions: &[Descriptor], lines: &[Line<'_>]) -> String {
    let alive = sessions.iter().filter(|s| s.alive).count();
    let measured: Vec<_> = sessions.iter().filter_map(|s| s.usage).collect();
    let noun = if sessions.len() == 1 {
        "session"
    } else {
        "sessions"
    };
    let mut text = format!("{} {noun}, {alive} alive", sessions.len());
    if measured.is_empty() {
        if alive > 0 {
            // Said once here instead of as a column of dashes nobody can explain.
            text.push_str(" · no usage reported (the daemon measures local sessions in cgroups)");
        }
        return text;
    }
    let memory: u64 = measured.iter().map(|u| u.memory_bytes).sum();
    let pids: u64 = measured.iter().map(|u| u64::from(u.pids)).sum();
    let shares: Vec<f64> = lines.iter().filter_map(|l| l.cpu_percent).collect();
    text.push_str(&format!(
        " · mem {} · pids {pids}",
        usage_format::bytes(memory)
    ));
    // No share on the first frame: there is no earlier look to measure from.
    if !shares.is_empty() {
        let cpu = usage_format::percent(Some(shares.iter().sum()));
        text.push_str(&format!(" · cpu {cpu}%"));
    }
    text
}

const COLUMNS: [Column; 9] = [
    Column::left("ID"),
    Column::left("NAME"),
    Column::left("AGENT"),
    Column::left("STATE"),
    Column::right("PIDS"),
    Column::right("MEM"),
    Column::right("PEAK"),
    Column::right("CPU%"),
    Column::right("TIME"),
];

/// The column that carries the state, coloured by it.
const STATE_COLUMN: usize = 3;

/// One frame: the totals, what it is sorted by, and the table. With `rows` (a terminal's
/// height) the table is cut to fit under the two lines above it, and the cut is said.
pub fn frame(
    sessions: &[Descriptor],
    now: &Sample,
    before: Option<&Sample>,
    by: SortBy,
    style: Style,
    rows: Option<usize>,
) -> String {
    let mut list = lines(sessions, now, before, by);
    let mut text = totals(sessions, &list);
    text.push('\n');
    let by_name = match by {
        SortBy::Mem => "memory",
        SortBy::Cpu => "cpu",
    };
    // Two lines above the table, its header and a last line for the cut.
    let room = rows.map(|r| r.saturating_sub(4).max(1));
    let hidden = room.map_or(0, |room| list.len().saturating_sub(room));
    if let Some(room) = room {
        list.truncate(room);
    }
    text.push_str(&format!("by {by_name}"));
    if rows.is_some() {
        text.push_str("; q to quit");
    }
    text.push('\n');
    let cells: Vec<Vec<String>> = list.iter().map(row).collect();
    text.push_str(&table::render(
        &COLUMNS,
        &cells,
        style,
        |row, column| match row {
            None => Some("1"),
            Some(i) if column == STATE_COLUMN => list.get(i).map(|l| ls::state_colour(l.session)),
            Some(_) => None,
        },
    ));
    if hidden > 0 {
        text.push_str(&format!("... and {hidden} more\n"));
    }
    text
}

fn row(line: &Line<'_>) -> Vec<String> {
    let s = line.session;
    let usage = s.usage;
    let dash = || "-".to_string();
    vec![
        s.short_id(),
        printable(if s.name.is_empty() { "-" } else { &s.name }),
        printable(&s.agent),
        printable(&ls::shown_state(s)),
        usage.map_or_else(dash, |u| u.pids.to_string()),
        usage_format::memory_cell(s),
        usage.map_or_else(dash, |u| usage_format::bytes(u.memory_peak_bytes)),
        usage_format::percent(line.cpu_percent),
        usage.map_or_else(dash, |u| usage_format::cpu_time(u.cpu_seconds)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    use atc_client::atc_protocol::limits::{SessionLimits, Usage};
    use atc_client::atc_protocol::{ExitReason, SessionState};

    const MIB: u64 = 1024 * 1024;

    fn session(n: u8, memory_mib: Option<u64>, cpu_seconds: f64) -> Descriptor {
        Descriptor {
            id: format!("{n:x}0000000-0000-0000-0000-000000000000")
                .parse()
                .expect("test ids are uuids"),
            name: format!("s{n}"),
            agent: "shell".into(),
            state: SessionState::Running,
            alive: true,
            usage: memory_mib.map(|m| Usage {
                memory_bytes: m * MIB,
                memory_peak_bytes: 2 * m * MIB,
                cpu_seconds,
                pids: 3,
            }),
            ..Descriptor::default()
        }
    }

    fn names(lines: &[Line<'_>]) -> Vec<String> {
        lines.iter().map(|l| l.session.name.clone()).collect()
    }

    #[test]
    fn by_memory_most_first_and_unmeasured_last_in_list_order() {
        let exited = Descriptor {
            state: SessionState::Exited,
            alive: false,
            ..session(4, None, 0.0)
        };
        let sessions = [
            exited,
            session(1, Some(10), 0.0),
            session(2, None, 0.0),
            session(3, Some(300), 0.0),
        ];
        let now = Sample::of(&sessions, Instant::now());
        let list = lines(&sessions, &now, None, SortBy::Mem);
        assert_eq!(names(&list), ["s3", "s1", "s2", "s4"]);
    }

    #[test]
    fn by_cpu_the_first_frame_uses_seconds_so_far_and_later_ones_the_share_since() {
        let t0 = Instant::now();
        let first = [session(1, Some(1), 100.0), session(2, Some(1), 5.0)];
        let before = Sample::of(&first, t0);
        let list = lines(&first, &before, None, SortBy::Cpu);
        assert_eq!(names(&list), ["s1", "s2"]);
        assert!(list.iter().all(|l| l.cpu_percent.is_none()));

        // Two seconds on, s2 used a core and a half, s1 a quarter of one.
        let second = [session(1, Some(1), 100.5), session(2, Some(1), 8.0)];
        let now = Sample::of(&second, t0 + Duration::from_secs(2));
        let list = lines(&second, &now, Some(&before), SortBy::Cpu);
        assert_eq!(names(&list), ["s2", "s1"]);
        assert_eq!(list[0].cpu_percent, Some(150.0));
        assert_eq!(list[1].cpu_percent, Some(25.0));
    }

    #[test]
    fn the_frame_has_totals_and_a_row_per_session() {
        let mut limited = session(1, Some(312), 12.0);
        limited.limits = Some(SessionLimits {
            memory_mib: Some(512),
            ..SessionLimits::default()
        });
        let killed = Descriptor {
            state: SessionState::Exited,
            alive: false,
            exit_reason: Some(ExitReason::MemoryLimit),
            ..session(2, None, 0.0)
        };
        let sessions = [limited, killed];
        let now = Sample::of(&sessions, Instant::now());
        let text = frame(&sessions, &now, None, SortBy::Mem, Style::Plain, None);
        assert_eq!(
            text,
            "\
2 sessions, 1 alive · mem 312M · pids 3
by memory
ID        NAME  AGENT  STATE                  PIDS        MEM  PEAK  CPU%  TIME
10000000  s1    shell  running                   3  312M/512M  624M     -   12s
20000000  s2    shell  exited (memory limit)     -          -     -     -     -
"
        );
    }

    #[test]
    fn without_usage_the_totals_say_why_and_a_small_terminal_cuts_the_table() {
        let sessions: Vec<Descriptor> = (1..=6).map(|n| session(n, None, 0.0)).collect();
        let now = Sample::of(&sessions, Instant::now());
        let text = frame(&sessions, &now, None, SortBy::Mem, Style::Plain, Some(7));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("6 sessions, 6 alive · no usage reported"),
            "{text}"
        );
        assert_eq!(lines[1], "by memory; q to quit");
        assert_eq!(lines.len(), 7, "{text}");
        assert_eq!(lines[6], "... and 3 more");
    }

    #[test]
    fn q_and_ctrl_c_quit() {
        assert!(quits(b"q"));
        assert!(quits(b"xQ"));
        assert!(quits(b"\x03"));
        assert!(!quits(b"j\x1b[A"));
    }

    #[test]
    fn the_interval_is_seconds_and_not_too_short() {
        assert_eq!(parse_interval("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_interval("0.5"), Ok(Duration::from_millis(500)));
        assert!(parse_interval("0.01").is_err());
        assert!(parse_interval("-1").is_err());
        assert!(parse_interval("soon").is_err());
        assert!(parse_interval("inf").is_err());
    }
}
