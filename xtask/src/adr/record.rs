//! Reading one decision record: its file name, heading, status line, date line and the ADR
//! numbers its text mentions. The grammar is described in `adr.rs`; this file only parses it.

/// Where a record stands. `Superseded` always comes with the records that replaced it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    Proposed,
    Accepted,
    Rejected,
    Deprecated,
    Superseded,
}

impl State {
    pub fn word(self) -> &'static str {
        match self {
            State::Proposed => "proposed",
            State::Accepted => "accepted",
            State::Rejected => "rejected",
            State::Deprecated => "deprecated",
            State::Superseded => "superseded",
        }
    }
}

/// A parsed status line. Each list holds ADR numbers, in the order the line gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    pub state: State,
    pub superseded_by: Vec<u32>,
    pub amends: Vec<u32>,
    pub supersedes: Vec<u32>,
    pub amended_by: Vec<u32>,
}

/// One record as its file states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub number: u32,
    pub file: String,
    pub title: String,
    pub status: Status,
    pub date: String,
    /// `(line number, ADR number)` for every "ADR N" / "ADRs N, M" outside the status line.
    pub mentions: Vec<(usize, u32)>,
}

/// The number of a record's file name, `NNNN-slug.md`; `None` when the name has another shape.
pub fn file_number(name: &str) -> Option<u32> {
    let slug = name.strip_suffix(".md")?;
    let (digits, slug) = slug.split_at_checked(4)?;
    let slug = slug.strip_prefix('-')?;
    let slug_ok = !slug.is_empty()
        && slug
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
    if digits.bytes().all(|b| b.is_ascii_digit()) && slug_ok {
        digits.parse().ok()
    } else {
        None
    }
}

/// Parses a whole record. On failure returns every problem found, each saying what to write.
pub fn parse_record(file: &str, text: &str) -> Result<Record, Vec<String>> {
    let mut problems = Vec::new();
    let number = file_number(file);
    let lines: Vec<&str> = text.lines().collect();

    let heading = lines.first().copied().unwrap_or("");
    let title = match parse_heading(heading) {
        Ok((n, title)) => {
            if let Some(file_n) = number
                && n != file_n
            {
                problems.push(format!(
                    "the heading says `# {n}.` but the file name says {file_n:04}: make them agree (`# {file_n}. …` or rename the file)"
                ));
            }
            title
        }
        Err(e) => {
            problems.push(e);
            String::new()
        }
    };

    // The header is everything before the first section; the status and date lines live there.
    let header_end = lines
        .iter()
        .position(|l| l.starts_with("## "))
        .unwrap_or(lines.len());
    let mut status_at = None;
    let mut date_at = None;
    for (i, line) in lines.iter().enumerate().take(header_end).skip(1) {
        let bare = line
            .trim_start()
            .trim_start_matches(['*', '-'])
            .trim_start()
            .to_ascii_lowercase();
        let slot = if bare.starts_with("status:") {
            &mut status_at
        } else if bare.starts_with("date:") {
            &mut date_at
        } else {
            if ["amends:", "amended by:", "supersedes:", "superseded by:"]
                .iter()
                .any(|k| bare.starts_with(k))
            {
                problems.push(format!(
                    "line {}: `{}` is a separate line; write it in the status line instead, as `* Status: accepted; amends NNNN`",
                    i + 1,
                    line.trim()
                ));
            }
            continue;
        };
        if slot.is_some() {
            problems.push(format!(
                "line {}: a second `{}` line; keep one",
                i + 1,
                line.trim()
            ));
        } else {
            *slot = Some(i);
        }
    }

    let mut status_lines = Vec::new();
    let status = match status_at {
        None => {
            problems.push(
                "no status line: add `* Status: accepted` (or proposed, rejected, deprecated, superseded by NNNN) two lines under the heading".into(),
            );
            None
        }
        Some(i) => {
            // A long status line may wrap onto lines indented by two spaces.
            let mut value = lines[i].to_string();
            status_lines.push(i);
            let mut next = i + 1;
            while next < lines.len()
                && lines[next].starts_with("  ")
                && !lines[next].trim().is_empty()
            {
                value.push(' ');
                value.push_str(lines[next].trim());
                status_lines.push(next);
                next += 1;
            }
            if date_at.is_some_and(|d| d != next) {
                problems.push(format!(
                    "line {}: the date line must come right after the status line",
                    date_at.unwrap_or(0) + 1
                ));
            }
            match value.strip_prefix("* Status: ") {
                None => {
                    problems.push(format!(
                        "line {}: write the status line as `* Status: …` (a `* ` list item, then `Status: `), not `{}`",
                        i + 1,
                        lines[i].trim()
                    ));
                    None
                }
                Some(rest) => match parse_status(rest) {
                    Ok(status) => Some(status),
                    Err(e) => {
                        problems.push(format!("line {}: status: {e}", i + 1));
                        None
                    }
                },
            }
        }
    };

    let date = match date_at {
        None => {
            problems.push(format!(
                "no date line: add `* Date: YYYY-MM-DD` under the status line, the day the file was added (`git log --diff-filter=A --format=%as -- adr/{file} | tail -1`)"
            ));
            None
        }
        Some(i) => match lines[i].strip_prefix("* Date: ") {
            None => {
                problems.push(format!(
                    "line {}: write the date line as `* Date: YYYY-MM-DD`, not `{}`",
                    i + 1,
                    lines[i].trim()
                ));
                None
            }
            Some(value) => match check_date(value) {
                Ok(()) => Some(value.to_string()),
                Err(e) => {
                    problems.push(format!("line {}: {e}", i + 1));
                    None
                }
            },
        },
    };

    let mentions = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| !status_lines.contains(i))
        .flat_map(|(i, line)| mentions(line).into_iter().map(move |n| (i + 1, n)))
        .collect();

    match (number, status, date) {
        (Some(number), Some(status), Some(date)) if problems.is_empty() => Ok(Record {
            number,
            file: file.to_string(),
            title,
            status,
            date,
            mentions,
        }),
        _ => Err(problems),
    }
}

/// `# N. Title` → `(N, Title)`.
pub fn parse_heading(line: &str) -> Result<(u32, String), String> {
    let shape = || format!("the first line must be `# N. Title`, not `{line}`");
    let rest = line.strip_prefix("# ").ok_or_else(shape)?;
    let (number, title) = rest.split_once(". ").ok_or_else(shape)?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(shape());
    }
    let title = title.trim();
    if title.is_empty() {
        return Err(shape());
    }
    Ok((number.parse().map_err(|_| shape())?, title.to_string()))
}

/// Parses what follows `* Status: `.
pub fn parse_status(text: &str) -> Result<Status, String> {
    let clauses = split_top_level(text, ';')?;
    let mut clauses = clauses.into_iter().map(str::trim);
    let first = clauses.next().unwrap_or("");
    let mut status = Status {
        state: State::Accepted,
        superseded_by: Vec::new(),
        amends: Vec::new(),
        supersedes: Vec::new(),
        amended_by: Vec::new(),
    };
    status.state = match first {
        "proposed" => State::Proposed,
        "accepted" => State::Accepted,
        "rejected" => State::Rejected,
        "deprecated" => State::Deprecated,
        _ => {
            let Some(refs) = first.strip_prefix("superseded by ") else {
                // The older form put the clauses in parentheses after the state.
                if let Some((word, rest)) = first.split_once(" (")
                    && ["proposed", "accepted", "rejected", "deprecated"].contains(&word)
                {
                    let inner = rest.strip_suffix(')').unwrap_or(rest);
                    return Err(format!(
                        "`{first}`: clauses follow the state after `; `, not in parentheses: `{word}; {inner}`"
                    ));
                }
                return Err(format!(
                    "`{first}`: the status starts with `proposed`, `accepted`, `rejected`, `deprecated` or `superseded by NNNN`, then `; amends NNNN`, `; supersedes NNNN`, `; amended by NNNN` as needed"
                ));
            };
            status.superseded_by = parse_refs(refs)?;
            State::Superseded
        }
    };
    // Each clause at most once, in one order, so two records saying the same thing read the same.
    let mut last_rank = 0;
    for clause in clauses {
        let (rank, refs, list) = if let Some(refs) = clause.strip_prefix("amends ") {
            (1, refs, &mut status.amends)
        } else if let Some(refs) = clause.strip_prefix("supersedes ") {
            (2, refs, &mut status.supersedes)
        } else if let Some(refs) = clause.strip_prefix("amended by ") {
            (3, refs, &mut status.amended_by)
        } else if clause.starts_with("superseded by") {
            return Err(
                "`superseded by NNNN` is the state: write it first, in place of `accepted`".into(),
            );
        } else {
            return Err(format!(
                "`{clause}`: after the state only `amends NNNN`, `supersedes NNNN` and `amended by NNNN` may follow, separated by `; `"
            ));
        };
        if rank <= last_rank {
            return Err(
                "write each clause once, in this order: amends, supersedes, amended by".into(),
            );
        }
        last_rank = rank;
        *list = parse_refs(refs)?;
    }
    Ok(status)
}

/// `0005, 0252 (a note), 0363` → `[5, 252, 363]`.
fn parse_refs(text: &str) -> Result<Vec<u32>, String> {
    let mut numbers = Vec::new();
    for item in split_top_level(text, ',')? {
        let item = item.trim();
        let digits_len = item.bytes().take_while(u8::is_ascii_digit).count();
        let (digits, rest) = item.split_at(digits_len);
        if digits.is_empty() {
            return Err(if let Some(named) = item.strip_prefix("ADR") {
                let named = named.trim_start_matches('s').trim_start();
                let n: u64 = named
                    .get(..named.bytes().take_while(u8::is_ascii_digit).count())
                    .and_then(|d| d.parse().ok())
                    .unwrap_or(0);
                format!("`{item}`: write the number alone, `{n:04}`, without `ADR`")
            } else {
                format!("`{item}` is not an ADR number: write four digits, `0022`")
            });
        }
        if digits.len() != 4 {
            let n: u64 = digits.parse().unwrap_or(0);
            return Err(format!(
                "`{digits}`: write ADR numbers with four digits, `{n:04}`"
            ));
        }
        let rest = rest.trim_start();
        let note_ok = rest.is_empty()
            || (rest.starts_with('(')
                && rest.ends_with(')')
                && closing_paren(rest) == Some(rest.len() - 1));
        if !note_ok {
            return Err(if rest.starts_with("and ") {
                format!("`{item}`: separate numbers with `, `, not `and`")
            } else {
                format!("`{item}`: after a number only a note in parentheses may follow")
            });
        }
        let n = digits
            .parse()
            .map_err(|_| format!("`{digits}` is not a number"))?;
        if numbers.contains(&n) {
            return Err(format!("{n:04} is listed twice in one clause"));
        }
        numbers.push(n);
    }
    Ok(numbers)
}

/// Splits at `sep` outside parentheses, so notes may hold commas and semicolons.
fn split_top_level(text: &str, sep: char) -> Result<Vec<&str>, String> {
    let mut parts = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| format!("a `)` without its `(` in `{text}`"))?;
            }
            c if c == sep && depth == 0 => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    if depth != 0 {
        return Err(format!("a `(` without its `)` in `{text}`"));
    }
    parts.push(&text[start..]);
    Ok(parts)
}

/// The byte index of the `)` that closes the `(` at the start of `text`.
fn closing_paren(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// `YYYY-MM-DD`, a real day.
pub fn check_date(text: &str) -> Result<(), String> {
    let malformed = || format!("`{text}` is not a date: write `* Date: YYYY-MM-DD`");
    let parts: Vec<&str> = text.split('-').collect();
    let [y, m, d] = parts.as_slice() else {
        return Err(malformed());
    };
    let all_digits = |s: &str, len: usize| s.len() == len && s.bytes().all(|b| b.is_ascii_digit());
    if !(all_digits(y, 4) && all_digits(m, 2) && all_digits(d, 2)) {
        return Err(malformed());
    }
    let (y, m, d): (u32, u32, u32) = (
        y.parse().map_err(|_| malformed())?,
        m.parse().map_err(|_| malformed())?,
        d.parse().map_err(|_| malformed())?,
    );
    let leap = y % 4 == 0 && (y % 100 != 0 || y % 400 == 0);
    let days = match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(malformed()),
    };
    if d == 0 || d > days {
        return Err(malformed());
    }
    Ok(())
}

/// The ADR numbers a line of prose mentions: `ADR 60`, `ADR 0090/0091`, `ADRs 0170–0175, 0220`.
/// Only the plural form takes a list, so `(ADR 0141, 64 calls)` mentions 0141 alone.
pub fn mentions(line: &str) -> Vec<u32> {
    let mut found = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("ADR") {
        let word_start = rest[..at]
            .chars()
            .next_back()
            .is_none_or(|c| !c.is_alphanumeric());
        let after = &rest[at + 3..];
        rest = after;
        if !word_start {
            continue;
        }
        let (plural, after) = match after.strip_prefix('s') {
            Some(a) => (true, a),
            None => (false, after),
        };
        let Some(mut tail) = after.strip_prefix(' ') else {
            continue;
        };
        let separators: &[&str] = if plural {
            &[", and ", ", ", " and ", "–", "/"]
        } else {
            &["/"]
        };
        loop {
            let len = tail.bytes().take_while(u8::is_ascii_digit).count();
            if len == 0 || len > 4 {
                break;
            }
            found.extend(tail[..len].parse::<u32>().ok());
            tail = &tail[len..];
            match separators.iter().find_map(|s| tail.strip_prefix(s)) {
                Some(t) => tail = t,
                None => break,
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Status {
        parse_status(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn err(text: &str) -> String {
        parse_status(text).expect_err(text)
    }

    #[test]
    fn states_alone() {
        assert_eq!(ok("accepted").state, State::Accepted);
        assert_eq!(ok("proposed").state, State::Proposed);
        assert_eq!(ok("rejected").state, State::Rejected);
        assert_eq!(ok("deprecated").state, State::Deprecated);
        let s = ok("superseded by 0211");
        assert_eq!(s.state, State::Superseded);
        assert_eq!(s.superseded_by, vec![211]);
    }

    #[test]
    fn clauses_and_notes() {
        let s = ok("accepted; amends 0005, 0252; amended by 0363");
        assert_eq!(s.amends, vec![5, 252]);
        assert_eq!(s.amended_by, vec![363]);
        let s =
            ok("superseded by 0211 (msgpack; both tags, read) ; amended by 0177 (pycompat (core))");
        assert_eq!(s.superseded_by, vec![211]);
        assert_eq!(s.amended_by, vec![177]);
        let s = ok("accepted; amends 0022; supersedes 0055");
        assert_eq!((s.amends, s.supersedes), (vec![22], vec![55]));
    }

    #[test]
    fn malformed_statuses_say_what_to_write() {
        assert!(err("Accepted").contains("starts with `proposed`"));
        assert!(err("accepted (amends 0232)").contains("`accepted; amends 0232`"));
        assert!(err("accepted, amends 0232").contains("starts with"));
        assert!(err("accepted; amended by ADR 330").contains("`0330`, without `ADR`"));
        assert!(err("accepted; amended by 160").contains("`0160`"));
        assert!(err("accepted; amended by 0330 and 0351").contains("not `and`"));
        assert!(err("accepted; amended by 0330 x").contains("note in parentheses"));
        assert!(err("accepted; extended by 0296").contains("only `amends NNNN`"));
        assert!(err("accepted; amended by 0363; amends 0005").contains("in this order"));
        assert!(err("accepted; amends 0005; amends 0006").contains("in this order"));
        assert!(err("accepted; superseded by 0211").contains("write it first"));
        assert!(err("accepted; amends 0005, 0005").contains("twice"));
        assert!(err("accepted; amends 0005 (open").contains("without its `)`"));
        assert!(err("accepted; amends 0005)").contains("without its `(`"));
        assert!(err("accepted; amends 0005 (a) (b)").contains("note in parentheses"));
        assert!(err("accepted; amends 0005, x").contains("not an ADR number"));
        assert!(err("accepted; amends").contains("only `amends NNNN`"));
    }

    #[test]
    fn headings_and_file_names() {
        assert_eq!(
            parse_heading("# 5. Event store deviations"),
            Ok((5, "Event store deviations".into()))
        );
        assert!(parse_heading("# Event store").is_err());
        assert!(parse_heading("#5. Event store").is_err());
        assert!(parse_heading("# 5.").is_err());
        assert_eq!(file_number("0005-event-store.md"), Some(5));
        assert_eq!(file_number("005-event-store.md"), None);
        assert_eq!(file_number("0005_event.md"), None);
        assert_eq!(file_number("0005-Event.md"), None);
        assert_eq!(file_number("README.md"), None);
    }

    #[test]
    fn dates() {
        assert!(check_date("2026-12-04").is_ok());
        assert!(check_date("2028-02-29").is_ok());
        assert!(check_date("2026-02-29").is_err());
        assert!(check_date("2026-13-01").is_err());
        assert!(check_date("2026-1-01").is_err());
        assert!(check_date("4 December 2026").is_err());
        assert!(check_date("").is_err());
    }

    #[test]
    fn mentions_in_prose() {
        assert_eq!(mentions("see ADR 60 and ADR 0090/0091."), vec![60, 90, 91]);
        assert_eq!(
            mentions("(ADRs 0170–0175, 0220 and 0221)"),
            vec![170, 175, 220, 221]
        );
        assert_eq!(mentions("(ADR 0141, 64 calls)"), vec![141]);
        assert_eq!(mentions("NOADR 12, ADRS, ADR x"), Vec::<u32>::new());
    }

    const GOOD: &str = "# 7. A title\n\n* Status: accepted; amends 0005 (a note,\n  wrapped); amended by 0009\n* Date: 2026-12-01\n\n## Context\n\nAs ADR 3 says.\n";

    #[test]
    fn a_whole_record() {
        let r = parse_record("0007-a-title.md", GOOD).unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!((r.number, r.title.as_str()), (7, "A title"));
        assert_eq!(r.status.amends, vec![5]);
        assert_eq!(r.status.amended_by, vec![9]);
        assert_eq!(r.date, "2026-12-01");
        assert_eq!(r.mentions, vec![(9, 3)]);
    }

    fn problems(file: &str, text: &str) -> String {
        parse_record(file, text).expect_err(text).join("\n")
    }

    #[test]
    fn broken_records() {
        let f = "0007-a-title.md";
        assert!(problems("0008-a-title.md", GOOD).contains("heading says `# 7.`"));
        let no_status = GOOD.replace(
            "* Status: accepted; amends 0005 (a note,\n  wrapped); amended by 0009\n",
            "",
        );
        assert!(problems(f, &no_status).contains("no status line"));
        let bare = GOOD.replace("* Status:", "Status:");
        assert!(problems(f, &bare).contains("write the status line as `* Status: …`"));
        let no_date = GOOD.replace("* Date: 2026-12-01\n", "");
        assert!(problems(f, &no_date).contains("no date line"));
        let bad_date = GOOD.replace("2026-12-01", "2026-12-1");
        assert!(problems(f, &bad_date).contains("not a date"));
        let bare_date = GOOD.replace("* Date:", "Date:");
        assert!(problems(f, &bare_date).contains("`* Date: YYYY-MM-DD`"));
        let apart = GOOD.replace("\n* Date", "\n\n* Date");
        assert!(problems(f, &apart).contains("right after the status line"));
        let extra = GOOD.replace(
            "* Date: 2026-12-01\n",
            "* Date: 2026-12-01\n* Amends: ADR 0005\n",
        );
        assert!(problems(f, &extra).contains("write it in the status line"));
    }
}
