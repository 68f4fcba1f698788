//! What a client's terminal shows after some bytes: a vt100 screen of a given size.

/// A `cols`×`rows` terminal (vt100, no scrollback) after `bytes`: what a client would show.
pub fn terminal_after(bytes: &[u8], cols: u16, rows: u16) -> vt100::Parser {
    let size = |n| std::num::NonZeroU16::new(n).expect("a terminal size above zero");
    let mut parser = vt100::Parser::new(size(rows), size(cols), 0);
    parser.process(bytes);
    parser
}

/// `bytes` rendered on a fresh vt100 screen of `cols`×`rows`: its rows as text, each with its
/// trailing blanks trimmed, and the cursor's row.
pub fn rendered_rows(bytes: &[u8], cols: u16, rows: u16) -> (Vec<String>, usize) {
    let p = terminal_after(bytes, cols, rows);
    let screen = p.screen();
    let lines = screen
        .rows(0, cols)
        .map(|r| r.trim_end().to_string())
        .collect();
    (lines, usize::from(screen.cursor_position().0))
}
