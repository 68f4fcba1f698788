//! Two answers of the reference compared, and where they part said in words: the terminal-wide
//! fields (cursor, buffer, modes, title) first, then the first cell that differs, by row,
//! column and attribute, with both rows' text for context.
//!
//! Cells arrive sparse (`0` for a cell never written, otherwise only the fields that are not
//! the default; `tests/screen-reference/reference.mjs`); a field one side lacks is compared as
//! its default, so the two sides need not have been written the same way to be equal.

use serde_json::{Map, Value};

/// The value an absent cell field stands for, as it reads in a report.
fn default_of(field: &str) -> Value {
    match field {
        "ch" | "link" => Value::String(String::new()),
        "w" => Value::from(1),
        "fg" | "bg" | "underlineColour" => Value::String("default".into()),
        "underline" => Value::String("none".into()),
        _ => Value::Bool(false),
    }
}

fn cell_fields(cell: &Value) -> Map<String, Value> {
    cell.as_object().cloned().unwrap_or_default()
}

fn show(value: &Value) -> String {
    match value {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

/// The row as text: each cell's characters, blank for an empty cell, nothing for the second
/// half of a wide one.
fn row_text(row: &Value) -> String {
    let mut text = String::new();
    for cell in row["cells"].as_array().into_iter().flatten() {
        let fields = cell_fields(cell);
        if fields.get("w").and_then(Value::as_u64) == Some(0) {
            continue;
        }
        match fields.get("ch").and_then(Value::as_str) {
            Some(ch) => text.push_str(ch),
            None => text.push(' '),
        }
    }
    text.trim_end().to_string()
}

/// The first way `got` (the repaint's side) differs from `want` (the stream's), or `None`
/// when the two are the same terminal.
pub fn difference(want: &Value, got: &Value) -> Option<String> {
    let mut found = Vec::new();

    let empty = Map::new();
    let want_top = want.as_object().unwrap_or(&empty);
    let got_top = got.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = want_top.keys().chain(got_top.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys.into_iter().filter(|k| k.as_str() != "screen") {
        let (a, b) = (&want[key.as_str()], &got[key.as_str()]);
        if a != b {
            found.push(format!("{key}: stream {} / repaint {}", show(a), show(b)));
        }
    }

    let no_rows = Vec::new();
    let want_rows = want["screen"].as_array().unwrap_or(&no_rows);
    let got_rows = got["screen"].as_array().unwrap_or(&no_rows);
    let mut first_cell = None;
    let mut cells_differing = 0;
    for (y, (a_row, b_row)) in want_rows.iter().zip(got_rows).enumerate() {
        if a_row["wrapped"] != b_row["wrapped"] && first_cell.is_none() {
            first_cell = Some(format!(
                "row {y} wrapped from the row above: stream {} / repaint {}",
                a_row["wrapped"], b_row["wrapped"]
            ));
        }
        let no_cells = Vec::new();
        let a_cells = a_row["cells"].as_array().unwrap_or(&no_cells);
        let b_cells = b_row["cells"].as_array().unwrap_or(&no_cells);
        for (x, (a, b)) in a_cells.iter().zip(b_cells).enumerate() {
            let (a, b) = (cell_fields(a), cell_fields(b));
            if a == b {
                continue;
            }
            let mut fields: Vec<&String> = a.keys().chain(b.keys()).collect();
            fields.sort();
            fields.dedup();
            let differing: Vec<String> = fields
                .into_iter()
                .filter_map(|f| {
                    let va = a.get(f).cloned().unwrap_or_else(|| default_of(f));
                    let vb = b.get(f).cloned().unwrap_or_else(|| default_of(f));
                    (va != vb).then(|| format!("{f}: stream {} / repaint {}", show(&va), show(&vb)))
                })
                .collect();
            if differing.is_empty() {
                continue;
            }
            cells_differing += 1;
            if first_cell.is_none() {
                first_cell = Some(format!(
                    "row {y} col {x}: {}\n      stream  row {y}: {:?}\n      repaint row {y}: {:?}",
                    differing.join(", "),
                    row_text(a_row),
                    row_text(b_row)
                ));
            }
        }
    }
    if let Some(cell) = first_cell {
        found.push(cell);
    }
    if cells_differing > 1 {
        found.push(format!("{cells_differing} cells differ in all"));
    }
    (!found.is_empty()).then(|| found.join("; "))
}
