//! Tables for people: `comfy-table` with no borders and no wrapping, so long ids stay whole and
//! each row stays one line for `grep` and `awk`; colour only when stdout is a terminal and
//! `NO_COLOR` is unset.

use std::io::IsTerminal as _;

use comfy_table::presets::NOTHING;
use comfy_table::{Cell, Color, ContentArrangement, Table};
use serde_json::Value;

/// How a command prints.
#[derive(Debug, Clone, Copy)]
pub struct Style {
    pub color: bool,
}

impl Style {
    /// Colour on a terminal unless `NO_COLOR` says otherwise.
    pub fn detect() -> Self {
        Style {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    /// A table with these column headers.
    pub fn table(&self, headers: &[&str]) -> Table {
        let mut table = Table::new();
        table
            .load_preset(NOTHING)
            .set_content_arrangement(ContentArrangement::Disabled)
            .set_header(headers.iter().map(|h| Cell::new(*h)));
        if !self.color {
            table.force_no_tty();
        }
        table
    }

    /// A status or state cell, coloured by what it means on a terminal.
    pub fn status(&self, text: &str) -> Cell {
        let cell = Cell::new(text);
        if !self.color {
            return cell;
        }
        match text {
            "running" | "completed" | "IDLE" | "BUSY" => cell.fg(Color::Green),
            "waiting_human" | "paused" | "pending" | "DRAINING" => cell.fg(Color::Yellow),
            "failed" | "ERROR" | "OFFLINE" => cell.fg(Color::Red),
            "cancelled" => cell.fg(Color::DarkGrey),
            _ => cell,
        }
    }
}

/// Prints `table` with two spaces between columns and no trailing blanks.
pub fn print(table: &mut Table) {
    for column in table.column_iter_mut() {
        column.set_padding((0, 2));
    }
    println!("{}", table.trim_fmt());
}

/// A JSON value as a table cell: strings raw (never in quotes), null as `-`, the rest as JSON.
pub fn raw(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "-".to_string(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cells_print_ids_raw() {
        assert_eq!(raw(Some(&json!("t-1"))), "t-1");
        assert_eq!(raw(Some(&json!(7))), "7");
        assert_eq!(raw(None), "-");
        assert_eq!(raw(Some(&Value::Null)), "-");
    }

    #[test]
    fn long_ids_stay_whole_on_one_line() {
        let style = Style { color: false };
        let mut table = style.table(&["RUN", "STATUS"]);
        let long = "r".repeat(300);
        table.add_row(vec![Cell::new(&long), style.status("running")]);
        for column in table.column_iter_mut() {
            column.set_padding((0, 2));
        }
        let text = table.trim_fmt();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(lines[1].starts_with(&long) && lines[1].ends_with("running"));
        assert!(!text.contains('\u{1b}'), "no colour off a terminal");
    }
}
