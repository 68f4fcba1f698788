//! What a payload's bytes are (`--payload`): the [`Shape`]s, where each one's bytes come from
//! (`yes`, a generator in `generate.rs`, or a recording of a real program), the files the
//! payload command replays them from, and the shell text that prints them without end.
//!
//! A replayed shape is written to a file of whole periods of at least [`REPLAY_FILE_BYTES`],
//! which a shell loop cats over and over until `head -c` has the payload's size; a shape that
//! starts with something done once (entering the alternate screen) has a prelude file, catted
//! once before the loop.

use super::{generate, PAYLOAD_LINE};
use crate::TERMINAL;

/// What a payload's bytes are (`--payload`). The generated shapes are made for the size every
/// bench session has (`TERMINAL`, 120×40).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Shape {
    /// Printable ASCII with a newline every 99 bytes (`yes`).
    Lines,
    /// One unbroken run of printable text, wrapping at every row end.
    Wrapped,
    /// Short runs behind SGR changes: 16, 256 and truecolor, bold, italic, underline.
    Sgr,
    /// An Ink-style status area redrawn in place, log lines printed above it.
    Redraw,
    /// The alternate screen, entered once, then full-screen redraws row by row (htop).
    Alt,
    /// Wide CJK characters and combining marks, wrapping, wide ones at the right margin.
    Cjk,
    /// Text scrolling in a scroll region between a header and a status line (less, vim).
    Scroll,
    /// A recording of vim 9.0 paging through a Rust file with syntax highlighting
    /// (`crates/atc-bench/recordings/`).
    Tui,
    /// The bytes of a real Claude Code 2.1.332 session as atc streamed them (its start, two
    /// turns of markdown, code, wrapped lines and wide characters, redrawn in place), over
    /// and over.
    Claude,
    /// The same of a real Codex 0.171.0 session.
    Codex,
}

/// Where a shape's bytes come from.
enum Source {
    /// `yes` repeating [`PAYLOAD_LINE`].
    Yes,
    /// Made by a generator: the prelude once, then the period over and over.
    Generated { prelude: String, period: String },
    /// A recording, over and over.
    Recording(&'static [u8]),
}

/// The recordings of real agents, from the real-agent tests (`tests/agents/recordings/`).
const CLAUDE_RECORDING: &[u8] =
    include_bytes!("../../../../tests/agents/recordings/claude-2.1.332.bin");
const CODEX_RECORDING: &[u8] =
    include_bytes!("../../../../tests/agents/recordings/codex-0.171.0.bin");
/// vim paging through a file, recorded by `recordings/record-vim.sh`.
const VIM_RECORDING: &[u8] = include_bytes!("../../recordings/vim-9.0.1378.bin");

/// A replayed shape is written repeated up to this size, so the shell loop that cats it
/// forks once per MiB, not once per few KiB.
pub(super) const REPLAY_FILE_BYTES: usize = 1 << 20;

impl Shape {
    /// Every shape, in the order a run takes them; `--payload all` and the default.
    pub const ALL: [Shape; 10] = [
        Shape::Lines,
        Shape::Wrapped,
        Shape::Sgr,
        Shape::Redraw,
        Shape::Alt,
        Shape::Cjk,
        Shape::Scroll,
        Shape::Tui,
        Shape::Claude,
        Shape::Codex,
    ];

    /// The name `--payload` takes and the report shows.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Lines => "lines",
            Shape::Wrapped => "wrapped",
            Shape::Sgr => "sgr",
            Shape::Redraw => "redraw",
            Shape::Alt => "alt",
            Shape::Cjk => "cjk",
            Shape::Scroll => "scroll",
            Shape::Tui => "tui",
            Shape::Claude => "claude",
            Shape::Codex => "codex",
        }
    }

    /// The payload's size when `--payload-mib` is not given. One size for every shape keeps
    /// their figures comparable. At 64 MiB the daemon reads each shape for about two seconds
    /// (25–40 MiB/s on the 2-core machine, 2026-12-07); at 32 MiB its rounds of one shape
    /// spread over 24–39 MiB/s. The README command's run of all ten shapes, three rounds
    /// each, then takes about five minutes (README, "Load tool").
    pub fn default_mib(self) -> u32 {
        64
    }

    fn source(self) -> Source {
        let (cols, rows) = (TERMINAL.cols, TERMINAL.rows);
        let generated = |prelude: String, period: String| Source::Generated { prelude, period };
        match self {
            Shape::Lines => Source::Yes,
            Shape::Wrapped => generated(String::new(), generate::wrapped()),
            Shape::Sgr => generated(String::new(), generate::sgr(cols)),
            Shape::Redraw => generated(String::new(), generate::redraw(cols)),
            Shape::Alt => generated(generate::alt_prelude(), generate::alt(cols, rows)),
            Shape::Cjk => generated(String::new(), generate::cjk(cols)),
            Shape::Scroll => generated(String::new(), generate::scroll(cols, rows)),
            Shape::Tui => Source::Recording(VIM_RECORDING),
            Shape::Claude => Source::Recording(CLAUDE_RECORDING),
            Shape::Codex => Source::Recording(CODEX_RECORDING),
        }
    }

    /// Where the payload command reads this shape's period from, and its prelude if it has
    /// one: files in the temp dir of this machine, which is the daemon's (the bench finds it
    /// through its state dir). A generated shape's names carry the size it was made for.
    fn replay_file(self, what: &str) -> std::path::PathBuf {
        let stem = match self {
            Shape::Tui => "vim-9.0.1378".to_string(),
            Shape::Claude => "claude-2.1.332".to_string(),
            Shape::Codex => "codex-0.171.0".to_string(),
            other => format!("{}-{}x{}", other.name(), TERMINAL.cols, TERMINAL.rows),
        };
        std::env::temp_dir().join(format!("atc-bench-{stem}{what}.bin"))
    }

    /// Writes the files the payload command replays, if this shape has them. Runs of the same
    /// build write the same bytes; the rename keeps a reader from seeing half of a file.
    pub fn prepare(self) -> std::io::Result<()> {
        let source = self.source();
        let period: &[u8] = match &source {
            Source::Yes => return Ok(()),
            Source::Generated { prelude, period } => {
                write_file(&self.replay_file("-prelude"), prelude.as_bytes())?;
                period.as_bytes()
            }
            Source::Recording(bytes) => bytes,
        };
        let repeated: Vec<u8> = period
            .iter()
            .copied()
            .cycle()
            .take(REPLAY_FILE_BYTES.div_ceil(period.len()) * period.len())
            .collect();
        write_file(&self.replay_file(""), &repeated)
    }

    /// The first `len` bytes this shape's payload prints (after its start marker), with line
    /// ends as `yes` prints them: for measuring a screen model on the shape without a PTY.
    pub fn sample(self, len: usize) -> Vec<u8> {
        let (prelude, period) = match self.source() {
            Source::Yes => (Vec::new(), format!("{PAYLOAD_LINE}\n").into_bytes()),
            Source::Generated { prelude, period } => (prelude.into_bytes(), period.into_bytes()),
            Source::Recording(bytes) => (Vec::new(), bytes.to_vec()),
        };
        prelude
            .into_iter()
            .chain(period.iter().copied().cycle())
            .take(len)
            .collect()
    }

    /// Shell text that prints this shape's bytes without end (the payload cuts it).
    pub(super) fn endless_command(self) -> String {
        // `cat` fails once `head` has closed the pipe, which ends the loop.
        let replay = || format!("while cat '{}'; do :; done", self.replay_file("").display());
        match self.source() {
            Source::Yes => format!("yes {PAYLOAD_LINE}"),
            Source::Generated { prelude, .. } if !prelude.is_empty() => format!(
                "{{ cat '{}'; {}; }}",
                self.replay_file("-prelude").display(),
                replay()
            ),
            Source::Generated { .. } | Source::Recording(_) => replay(),
        }
    }
}

/// Writes `bytes` to `path` through a temp file and a rename.
fn write_file(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The shapes `--payload` names: one, a comma-separated list, or `all`; each once, in the order
/// given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShapeList(pub Vec<Shape>);

impl Default for ShapeList {
    fn default() -> ShapeList {
        ShapeList(Shape::ALL.to_vec())
    }
}

impl std::fmt::Display for ShapeList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if *self == ShapeList::default() {
            return f.write_str("all");
        }
        let names: Vec<&str> = self.0.iter().map(|s| s.name()).collect();
        f.write_str(&names.join(","))
    }
}

/// `--payload`'s parser.
pub fn parse_shapes(text: &str) -> Result<ShapeList, String> {
    let mut shapes = Vec::new();
    for name in text.split(',').map(str::trim) {
        if name == "all" {
            shapes.extend(Shape::ALL);
            continue;
        }
        let shape = Shape::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Shape::ALL.iter().map(|s| s.name()).collect();
                format!(
                    "unknown shape {name:?}; the shapes are all, {}",
                    names.join(", ")
                )
            })?;
        shapes.push(shape);
    }
    let mut seen = Vec::new();
    shapes.retain(|s| {
        let first = !seen.contains(s);
        seen.push(*s);
        first
    });
    Ok(ShapeList(shapes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_value_enum_names() {
        use clap::ValueEnum as _;
        assert_eq!(Shape::value_variants(), Shape::ALL.as_slice());
        for s in Shape::ALL {
            let v = s.to_possible_value().expect("every shape is named");
            assert_eq!(v.get_name(), s.name());
            assert_eq!(serde_json::to_value(s).expect("json"), s.name());
        }
    }

    #[test]
    fn payload_takes_one_a_list_or_all() {
        assert_eq!(parse_shapes("sgr"), Ok(ShapeList(vec![Shape::Sgr])));
        assert_eq!(
            parse_shapes("cjk, lines,cjk"),
            Ok(ShapeList(vec![Shape::Cjk, Shape::Lines])),
            "each once, in the order given"
        );
        assert_eq!(parse_shapes("all"), Ok(ShapeList::default()));
        assert_eq!(parse_shapes("codex,all").map(|l| l.0.len()), Ok(10));
        assert!(parse_shapes("sgr,nope").is_err());
        assert!(parse_shapes("").is_err());
        assert!(parse_shapes("SGR").is_err());
        assert_eq!(ShapeList::default().to_string(), "all");
        assert_eq!(
            ShapeList(vec![Shape::Alt, Shape::Tui]).to_string(),
            "alt,tui"
        );
    }

    #[test]
    fn every_shape_is_valid_utf8_and_free_of_the_start_marker() {
        let start = super::super::START.bytes();
        for s in Shape::ALL {
            let (prelude, period): (Vec<u8>, Vec<u8>) = match s.source() {
                Source::Yes => (Vec::new(), format!("{PAYLOAD_LINE}\n").into_bytes()),
                Source::Generated { prelude, period } => (prelude.into(), period.into()),
                Source::Recording(bytes) => (Vec::new(), bytes.to_vec()),
            };
            for bytes in [&prelude, &period] {
                assert!(!bytes.windows(start.len()).any(|w| w == start), "{s:?}");
            }
            // The recordings are what programs wrote; the generated ones must be text.
            if !matches!(s.source(), Source::Recording(_)) {
                assert!(std::str::from_utf8(&period).is_ok(), "{s:?}");
            }
        }
    }

    #[test]
    fn a_generated_shape_replays_its_prelude_once_then_its_period() {
        Shape::Alt.prepare().expect("write the replay files");
        let prelude = std::fs::read(Shape::Alt.replay_file("-prelude")).expect("the prelude");
        assert_eq!(prelude, generate::alt_prelude().into_bytes());
        let file = std::fs::read(Shape::Alt.replay_file("")).expect("the period file");
        let period = generate::alt(TERMINAL.cols, TERMINAL.rows);
        assert_eq!(file.len() % period.len(), 0);
        assert!(file.len() >= REPLAY_FILE_BYTES && file.starts_with(period.as_bytes()));
        let cmd = Shape::Alt.endless_command();
        assert!(
            cmd.starts_with("{ cat '") && cmd.ends_with("; do :; done; }"),
            "{cmd}"
        );
        assert!(cmd.contains("atc-bench-alt-120x40-prelude.bin"));
        // Without a prelude, just the loop.
        assert!(Shape::Sgr.endless_command().starts_with("while cat '"));
    }

    #[test]
    fn a_recording_replays_from_a_file_of_whole_copies() {
        let p = super::super::Payload {
            bytes: 5000,
            shape: Shape::Claude,
        };
        p.shape.prepare().expect("write the replay file");
        let path = Shape::Claude.replay_file("");
        assert!(path.ends_with("atc-bench-claude-2.1.332.bin"));
        let file = std::fs::read(&path).expect("the replay file");
        assert!(file.len() >= REPLAY_FILE_BYTES);
        assert_eq!(file.len() % CLAUDE_RECORDING.len(), 0);
        assert!(file.starts_with(CLAUDE_RECORDING));
        assert!(p.command().contains(&format!(
            "while cat '{}'; do :; done | head -c 5000",
            path.display()
        )));
    }

    #[test]
    fn the_vim_recording_is_a_full_screen_session_of_its_size() {
        let rec = VIM_RECORDING;
        assert!(rec.len() < 300 * 1024, "{}", rec.len());
        assert!(rec.starts_with(b"\x1b[?1006;1000h"));
        let has = |s: &str| rec.windows(s.len()).any(|w| w == s.as_bytes());
        assert!(has("\x1b[?1049h") && has("\x1b[?1049l"));
        // It drew 40 rows: vim sets its scroll region to the whole screen and writes the last.
        assert!(has("\x1b[1;40r") && has("\x1b[40;1H"));
        assert!(!has("Script started") && !has("Script done"));
    }
}
