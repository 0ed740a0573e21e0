//! What a snapshot tool call returns: the full snapshot, or a delta against the previous one
//! when that is smaller, capped in size with a note.

use std::collections::HashMap;

/// Default cap on what one `browser_snapshot` returns, in bytes.
pub const DEFAULT_SNAPSHOT_CAP: usize = 12_000;

/// Frame `current` for the model: a delta against `previous` when that is shorter, then capped
/// at `cap` bytes (cut at a line, with a note saying how much was left out).
pub fn frame_snapshot(previous: Option<&str>, current: &str, cap: usize) -> String {
    let full_lines = current.lines().count();
    let body = match previous.map(|p| delta(p, current)) {
        Some(d) if d.text.len() < current.len() => {
            if d.added == 0 && d.removed == 0 {
                "Snapshot unchanged since the previous browser_snapshot (refs still valid)."
                    .to_string()
            } else {
                format!(
                    "Delta against the previous browser_snapshot ({} lines added with +, {} removed with -; unchanged lines omitted, their refs still valid):\n{}",
                    d.added, d.removed, d.text
                )
            }
        }
        _ => current.to_string(),
    };
    cap_text(&body, cap, full_lines)
}

struct Delta {
    text: String,
    added: usize,
    removed: usize,
}

fn delta(previous: &str, current: &str) -> Delta {
    let mut before: HashMap<&str, usize> = HashMap::new();
    for line in previous.lines() {
        *before.entry(line).or_default() += 1;
    }
    let mut out = Vec::new();
    let mut added = 0;
    for line in current.lines() {
        match before.get_mut(line) {
            Some(n) if *n > 0 => *n -= 1,
            _ => {
                added += 1;
                out.push(format!("+ {line}"));
            }
        }
    }
    let mut removed = 0;
    let mut left = before;
    for line in previous.lines() {
        if let Some(n) = left.get_mut(line) {
            if *n > 0 {
                *n -= 1;
                removed += 1;
                out.push(format!("- {line}"));
            }
        }
    }
    Delta {
        text: out.join("\n"),
        added,
        removed,
    }
}

fn cap_text(body: &str, cap: usize, full_lines: usize) -> String {
    if body.len() <= cap {
        return body.to_string();
    }
    let mut kept = String::new();
    let mut shown = 0;
    for line in body.lines() {
        if kept.len() + line.len() + 1 > cap {
            break;
        }
        kept.push_str(line);
        kept.push('\n');
        shown += 1;
    }
    let total = body.lines().count();
    format!(
        "{kept}[snapshot truncated: {shown} of {total} lines shown ({} bytes cap; page has {full_lines} lines); use browser_wait_for or act on the refs shown]",
        cap
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_cases() {
        let big: String = (0..50)
            .map(|i| format!("- listitem \"item {i}\" [ref=e{i}]\n"))
            .collect();
        let big = big.trim_end();
        let big_plus = format!("{big}\n- text: \"Hello\"");
        struct Case<'a> {
            prev: Option<&'a str>,
            cur: &'a str,
            cap: usize,
            starts: &'a str,
            contains: &'a str,
        }
        let cases = [
            Case {
                prev: None,
                cur: "- button \"A\" [ref=e1]",
                cap: 1000,
                starts: "- button",
                contains: "[ref=e1]",
            },
            Case {
                prev: Some(big),
                cur: &big_plus,
                cap: 10_000,
                starts: "Delta",
                contains: "+ - text: \"Hello\"",
            },
            Case {
                prev: Some(big),
                cur: big,
                cap: 10_000,
                starts: "Snapshot unchanged",
                contains: "refs still valid",
            },
            Case {
                prev: Some("- a"),
                cur: "- b",
                cap: 1000,
                starts: "- b",
                contains: "- b",
            },
            Case {
                prev: None,
                cur: big,
                cap: 200,
                starts: "- listitem",
                contains: "[snapshot truncated:",
            },
        ];
        for (i, c) in cases.iter().enumerate() {
            let got = frame_snapshot(c.prev, c.cur, c.cap);
            assert!(got.starts_with(c.starts), "case {i}: {got}");
            assert!(got.contains(c.contains), "case {i}: {got}");
            assert!(got.len() <= c.cap + 200, "case {i}: over cap");
        }
    }

    #[test]
    fn delta_shows_removed_lines() {
        let prev: String = (0..30).map(|i| format!("- text: \"row {i}\"\n")).collect();
        let cur: String = (1..30).map(|i| format!("- text: \"row {i}\"\n")).collect();
        let got = frame_snapshot(Some(&prev), &cur, 10_000);
        assert!(got.contains("0 lines added"), "{got}");
        assert!(got.contains("- - text: \"row 0\""), "{got}");
    }
}
