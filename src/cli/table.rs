//! Text tables for the terminal, as `atc ls` and `atc top` draw them: a header row, columns
//! padded to their widest cell, numbers flush right where a column asks for it, and colour
//! only as escapes around a cell's text, so a coloured table lines up exactly as its plain
//! form does. What goes in the cells, and which get which colour, is the caller's.

use std::io::IsTerminal;

/// How a table is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Plain text: for pipes, files and `NO_COLOR`.
    Plain,
    /// ANSI colours for a terminal.
    Colour,
}

impl Style {
    /// Colour when stdout is a terminal and `NO_COLOR` is unset or empty (no-color.org).
    pub fn for_stdout() -> Style {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        if std::io::stdout().is_terminal() && !no_color {
            Style::Colour
        } else {
            Style::Plain
        }
    }
}

/// Which side of its column a cell keeps to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    /// Text: names, states, paths.
    Left,
    /// Figures, so their digits line up.
    Right,
}

/// One column: its header, its alignment, what separates it from the column before it, and
/// the least width it takes even when every cell is shorter.
#[derive(Debug, Clone, Copy)]
pub struct Column {
    pub header: &'static str,
    pub align: Align,
    pub gap: &'static str,
    pub min_width: usize,
}

impl Column {
    /// A left-aligned column two spaces after the one before it.
    pub const fn left(header: &'static str) -> Column {
        Column {
            header,
            align: Align::Left,
            gap: "  ",
            min_width: 0,
        }
    }

    /// A right-aligned column two spaces after the one before it.
    pub const fn right(header: &'static str) -> Column {
        Column {
            align: Align::Right,
            ..Column::left(header)
        }
    }
}

/// The table: the header, then one line per row, each line's trailing blanks cut. `sgr` says
/// which SGR parameters (`"1"`, `"32"`) to wrap a cell in, given its row (`None` for the
/// header) and column; it is asked only with [`Style::Colour`] and only for non-empty cells.
/// A row shorter than `columns` is padded with empty cells; cells past them are dropped.
pub fn render(
    columns: &[Column],
    rows: &[Vec<String>],
    style: Style,
    sgr: impl Fn(Option<usize>, usize) -> Option<&'static str>,
) -> String {
    let empty = String::new();
    let cell = |row: &[String], column: usize| row.get(column).unwrap_or(&empty).clone();
    let header: Vec<String> = columns.iter().map(|c| c.header.to_string()).collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            rows.iter()
                .map(|r| cell(r, i).chars().count())
                .chain([c.header.chars().count(), c.min_width])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (index, row) in std::iter::once(&header).chain(rows).enumerate() {
        // Line 0 is the header; line i > 0 is row i - 1.
        let at = index.checked_sub(1);
        let mut line = String::new();
        for (i, (column, width)) in columns.iter().zip(&widths).enumerate() {
            if i > 0 {
                line.push_str(column.gap);
            }
            let text = cell(row, i);
            let pad: String = " ".repeat(width.saturating_sub(text.chars().count()));
            let shown = match style {
                Style::Colour if !text.is_empty() => match sgr(at, i) {
                    Some(sgr) => format!("\x1b[{sgr}m{text}\x1b[0m"),
                    None => text,
                },
                Style::Colour | Style::Plain => text,
            };
            match column.align {
                Align::Left => {
                    line.push_str(&shown);
                    line.push_str(&pad);
                }
                Align::Right => {
                    line.push_str(&pad);
                    line.push_str(&shown);
                }
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Names and paths come from users; a control character in one would be interpreted by the
/// terminal instead of shown, so each is replaced by `?`.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLUMNS: [Column; 3] = [
        Column::left("NAME"),
        Column::right("MEM"),
        Column::left("STATE"),
    ];

    fn rows() -> Vec<Vec<String>> {
        vec![
            vec!["a".into(), "312M".into(), "running".into()],
            vec!["longer".into(), "1.2G/2.0G".into(), "exited".into()],
        ]
    }

    #[test]
    fn columns_pad_to_their_widest_cell_and_figures_keep_right() {
        let text = render(&COLUMNS, &rows(), Style::Plain, |_, _| Some("1"));
        assert_eq!(
            text,
            "\
NAME          MEM  STATE
a            312M  running
longer  1.2G/2.0G  exited
"
        );
    }

    #[test]
    fn colour_wraps_cells_without_moving_them() {
        let colour = render(&COLUMNS, &rows(), Style::Colour, |row, column| {
            (row.is_none() || column == 2).then_some("1")
        });
        assert!(colour.contains("\x1b[1mNAME\x1b[0m"), "{colour}");
        assert!(colour.contains("\x1b[1mrunning\x1b[0m"), "{colour}");
        let plain = render(&COLUMNS, &rows(), Style::Plain, |_, _| None);
        let stripped = colour.replace("\x1b[1m", "").replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
    }

    #[test]
    fn a_short_row_is_padded_and_a_minimum_width_kept() {
        let columns = [
            Column {
                min_width: 1,
                gap: "",
                ..Column::left("")
            },
            Column {
                gap: " ",
                ..Column::left("ID")
            },
        ];
        let text = render(
            &columns,
            &[vec![], vec!["*".into(), "x".into()]],
            Style::Plain,
            |_, _| None,
        );
        assert_eq!(text, "  ID\n\n* x\n");
    }
}
