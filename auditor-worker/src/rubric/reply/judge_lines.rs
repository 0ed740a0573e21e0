//! Layers 2 and 3: per-dimension score lines (`Correctness: 8/10`, `**Code quality** — 9`, markdown
//! table rows) and an overall-score line (`Overall: 8.2/10`); also `Strategy: X` lines.

use super::findings::{DimensionIndex, Findings};
use super::score_text::{
    is_overall_label, key_in, label_key, strategy_value, strategy_words, value_score,
    MAX_LABEL_CHARS, STRATEGY_KEYS,
};
use loopgate_protocol::rubric::Strategy;

/// A `Strategy: X` line, else the first standalone word in capitals, else in any case.
pub(super) fn strategy_in_text(text: &str) -> Option<Strategy> {
    text.lines()
        .filter_map(split_labeled_line)
        .filter(|(label, _)| key_in(label, STRATEGY_KEYS))
        .find_map(|(_, value)| strategy_value(value))
        .or_else(|| {
            let words = strategy_words(text);
            let caps = words.iter().find(|(_, caps)| *caps);
            caps.or(words.first()).map(|(s, _)| *s)
        })
}

/// A line without list bullets, heading marks, quote marks, emphasis at its start or numbering.
fn strip_line_prefix(line: &str) -> &str {
    let s = line.trim_start_matches(|c: char| {
        c.is_whitespace()
            || matches!(
                c,
                '-' | '*' | '+' | '>' | '#' | '•' | '·' | '`' | '_' | '✅' | '❌'
            )
    });
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    if (1..=2).contains(&digits) {
        if let Some(rest) = s[digits..].strip_prefix(['.', ')']) {
            if rest.starts_with(char::is_whitespace) {
                return strip_line_prefix(rest);
            }
        }
    }
    s
}

/// `label<separator>value` where the separator is the first `:`, `：`, `=`, `—`, `–`, `|`, `→` or
/// spaced ` - ` outside brackets; without one, the label runs to the first digit.
fn split_labeled_line(line: &str) -> Option<(&str, &str)> {
    let s = strip_line_prefix(line);
    let mut depth = 0usize;
    let mut prev = ' ';
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let next = chars.peek().map_or(' ', |&(_, n)| n);
        match c {
            '(' | '[' | '（' | '【' => depth += 1,
            ')' | ']' | '）' | '】' => depth = depth.saturating_sub(1),
            ':' | '：' | '=' | '—' | '–' | '|' | '→' if depth == 0 => {
                return Some((&s[..i], &s[i + c.len_utf8()..]));
            }
            '-' if depth == 0 && prev.is_whitespace() && next.is_whitespace() => {
                return Some((&s[..i], &s[i + 1..]));
            }
            _ => {}
        }
        if i > MAX_LABEL_CHARS * 4 {
            return None;
        }
        prev = c;
    }
    let digit = s.find(|c: char| c.is_ascii_digit())?;
    (digit > 0).then(|| (&s[..digit], &s[digit..]))
}

/// Cells of a markdown table row (`| a | b |`), `None` for other lines.
fn table_cells(line: &str) -> Option<Vec<&str>> {
    let trimmed = line.trim();
    if !trimmed.starts_with('|') || trimmed.matches('|').count() < 2 {
        return None;
    }
    Some(
        trimmed
            .trim_matches('|')
            .split('|')
            .map(str::trim)
            .collect(),
    )
}

/// The score column of a table header row (`| Dimension | Weight | Score |`).
fn header_score_column(cells: &[&str]) -> Option<usize> {
    cells
        .iter()
        .skip(1)
        .position(|cell| {
            label_key(cell).is_some_and(|k| {
                ["score", "scores", "rating", "评分", "得分", "分数"].contains(&k.as_str())
            })
        })
        .map(|p| p + 1)
}

/// Scores from per-dimension lines; otherwise the notes on what was ignored.
pub(super) fn dimension_lines_layer(
    text: &str,
    dims: &DimensionIndex,
) -> Result<Findings, Vec<String>> {
    let mut found = Findings::default();
    let mut score_column = None;
    for line in text.lines() {
        if let Some(cells) = table_cells(line) {
            let Some(first) = cells.first() else {
                continue;
            };
            match dims.lookup(first) {
                Some(name) => {
                    let read = match score_column {
                        Some(col) => cells.get(col).copied().and_then(value_score),
                        None => cells.iter().skip(1).copied().find_map(value_score),
                    };
                    if let Some(read) = read {
                        found.record(name, read);
                    }
                }
                None => {
                    if let Some(col) = header_score_column(&cells) {
                        score_column = Some(col);
                    }
                }
            }
            continue;
        }
        let Some((label, value)) = split_labeled_line(line) else {
            continue;
        };
        if let (Some(name), Some(read)) = (dims.lookup(label), value_score(value)) {
            found.record(name, read);
        }
    }
    if found.scores.is_empty() {
        Err(found.notes)
    } else {
        Ok(found)
    }
}

/// The first usable overall-score line; otherwise the notes on what was ignored.
pub(super) fn overall_line_layer(text: &str) -> Result<Findings, Vec<String>> {
    let mut found = Findings::default();
    for line in text.lines() {
        let labelled = match table_cells(line) {
            Some(cells) if cells.len() >= 2 => Some((cells[0], cells[1..].join(" "))),
            Some(_) => None,
            None => split_labeled_line(line).map(|(l, v)| (l, v.to_string())),
        };
        let Some((label, value)) = labelled else {
            continue;
        };
        if !is_overall_label(label) {
            continue;
        }
        if let Some(read) = value_score(&value) {
            found.record_overall(read);
            if found.overall.is_some() {
                return Ok(found);
            }
        }
    }
    Err(found.notes)
}
