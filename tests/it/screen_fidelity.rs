//! The screen model's fidelity corpus: recordings of real agent sessions, the bytes atc
//! streamed for them (`tests/agents/recordings/*.bin`, recorded by `tests/it/real_claude.rs` and
//! `tests/it/real_codex.rs` with `ATC_RECORD=1`, at 120×40). At cut points through each stream,
//! a terminal that got only the model's repaint must show what a terminal that got every byte
//! shows: the same cells with the same attributes, cursor, screen buffer and input modes.
//!
//! The model is fed in odd-sized chunks, so escape sequences and UTF-8 split across reads as
//! they do from a PTY. The terminals are vt100's, as the model's own; a second emulator's
//! opinion is the screen work's (issue 37).

use std::num::NonZeroU16;
use std::path::PathBuf;

use atc::sessions::screen::ScreenModel;
use atc_protocol::TermSize;

const COLS: u16 = 120;
const ROWS: u16 = 40;

/// Every recording of the corpus, by file name.
fn recordings() -> Vec<(String, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/agents/recordings");
    let mut found: Vec<(String, Vec<u8>)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| path.extension().is_some_and(|e| e == "bin"))
        .map(|path| {
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into();
            (name, std::fs::read(&path).expect("read a recording"))
        })
        .collect();
    found.sort();
    assert!(!found.is_empty(), "no recordings in {}", dir.display());
    found
}

/// A terminal of the corpus's size after `bytes`.
fn terminal_after(bytes: &[u8]) -> vt100::Parser {
    let size = |n| NonZeroU16::new(n).expect("a size");
    let mut parser = vt100::Parser::new(size(ROWS), size(COLS), 0);
    parser.process(bytes);
    parser
}

/// What a person (and the program, through its modes) sees of a terminal.
fn seen(parser: &vt100::Parser) -> String {
    let s = parser.screen();
    format!(
        "alternate={} cursor={:?} hidden={} app_cursor={} app_keypad={} paste={} mouse={:?}/{:?}\n{:?}",
        s.alternate_screen(),
        s.cursor_position(),
        s.hide_cursor(),
        s.application_cursor(),
        s.application_keypad(),
        s.bracketed_paste(),
        s.mouse_protocol_mode(),
        s.mouse_protocol_encoding(),
        s.contents_formatted(),
    )
}

#[test]
fn a_repaint_shows_what_every_byte_showed_at_each_cut_of_each_recording() {
    for (name, bytes) in recordings() {
        let cuts = (1..=16).map(|i| bytes.len() * i / 16);
        for cut in cuts {
            let stream = &bytes[..cut];
            let mut model = ScreenModel::new(TermSize {
                cols: COLS,
                rows: ROWS,
            });
            for chunk in stream.chunks(397) {
                model.process(chunk);
            }
            let every_byte = seen(&terminal_after(stream));
            let repaint_only = seen(&terminal_after(&model.repaint()));
            assert_eq!(
                repaint_only,
                every_byte,
                "{name}: after {cut} of {} bytes the repaint shows another screen",
                bytes.len()
            );
        }
    }
}
