//! Unified diffs of text (`diff -u` / `git diff` hunks), for showing what a round changed.
//! Myers' O(ND) line diff; beyond `MAX_EDITS` differing lines the file is shown as replaced
//! wholesale (still a correct diff, just not a minimal one). Pure.

use std::fmt::Write as _;

/// Lines of context around each change.
pub const CONTEXT_LINES: usize = 3;
/// Edit distance (in lines) past which the diff stops searching for a minimal script.
pub const MAX_EDITS: usize = 2000;
/// A file whose first this many bytes hold a NUL (or that is not UTF-8) is binary.
const BINARY_SNIFF_BYTES: usize = 8000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Edit {
    Equal(usize, usize),
    Delete(usize),
    Insert(usize),
}

/// Is this content better shown as "binary files differ"?
pub fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0) || std::str::from_utf8(bytes).is_err()
}

/// Lines with their terminators, so "no newline at end of file" survives the diff.
fn lines(text: &str) -> Vec<&str> {
    text.split_inclusive('\n').collect()
}

/// The shortest edit script from `a` to `b`, or None when it is longer than `max_edits`.
fn myers(a: &[&str], b: &[&str], max_edits: usize) -> Option<Vec<Edit>> {
    let (n, m) = (a.len() as isize, b.len() as isize);
    let max = (n + m) as usize;
    let offset = max as isize;
    let mut v = vec![0isize; 2 * max + 2];
    // trace[d] holds v[-d..=d] as it was before step d.
    let mut trace: Vec<Vec<isize>> = Vec::new();
    for d in 0..=max.min(max_edits) as isize {
        trace.push(v[(offset - d) as usize..=(offset + d) as usize].to_vec());
        let mut k = -d;
        while k <= d {
            let at = |k: isize| (offset + k) as usize;
            let mut x = if k == -d || (k != d && v[at(k - 1)] < v[at(k + 1)]) {
                v[at(k + 1)]
            } else {
                v[at(k - 1)] + 1
            };
            let mut y = x - k;
            while x < n && y < m && a[x as usize] == b[y as usize] {
                x += 1;
                y += 1;
            }
            v[at(k)] = x;
            if x >= n && y >= m {
                return Some(backtrack(&trace, n, m));
            }
            k += 2;
        }
    }
    None
}

fn backtrack(trace: &[Vec<isize>], n: isize, m: isize) -> Vec<Edit> {
    let mut edits = Vec::new();
    let (mut x, mut y) = (n, m);
    for (d, v) in trace.iter().enumerate().rev() {
        let d = d as isize;
        let get = |k: isize| v[(k + d) as usize];
        let k = x - y;
        let prev_k = if k == -d || (k != d && get(k - 1) < get(k + 1)) {
            k + 1
        } else {
            k - 1
        };
        let prev_x = if d == 0 { 0 } else { get(prev_k) };
        let prev_y = prev_x - prev_k;
        while x > prev_x && y > prev_y {
            edits.push(Edit::Equal((x - 1) as usize, (y - 1) as usize));
            x -= 1;
            y -= 1;
        }
        if d > 0 {
            if x == prev_x {
                edits.push(Edit::Insert((y - 1) as usize));
            } else {
                edits.push(Edit::Delete((x - 1) as usize));
            }
        }
        x = prev_x;
        y = prev_y;
    }
    edits.reverse();
    edits
}

fn push_line(out: &mut String, sign: char, line: &str) {
    out.push(sign);
    out.push_str(line);
    if !line.ends_with('\n') {
        out.push_str("\n\\ No newline at end of file\n");
    }
}

fn range(start: usize, len: usize) -> String {
    // `diff -u` convention: an empty range names the line before it.
    let first = if len == 0 { start } else { start + 1 };
    if len == 1 {
        format!("{first}")
    } else {
        format!("{first},{len}")
    }
}

/// The hunks (`@@ -a,b +c,d @@` ...) turning `old` into `new`; empty when they are equal.
pub fn unified_hunks(old: &str, new: &str, context: usize) -> String {
    let (a, b) = (lines(old), lines(new));
    let edits = myers(&a, &b, MAX_EDITS).unwrap_or_else(|| {
        let mut replace: Vec<Edit> = (0..a.len()).map(Edit::Delete).collect();
        replace.extend((0..b.len()).map(Edit::Insert));
        replace
    });
    let changed: Vec<usize> = edits
        .iter()
        .enumerate()
        .filter(|(_, e)| !matches!(e, Edit::Equal(..)))
        .map(|(i, _)| i)
        .collect();
    let mut out = String::new();
    let mut i = 0;
    while i < changed.len() {
        // Extend the hunk while the next change is within 2 * context of the last one.
        let mut j = i;
        while j + 1 < changed.len() && changed[j + 1] - changed[j] <= 2 * context + 1 {
            j += 1;
        }
        let start = changed[i].saturating_sub(context);
        let end = (changed[j] + context + 1).min(edits.len());
        let hunk = &edits[start..end];
        // Where the hunk starts in each file: count what came before it.
        let (mut old_start, mut new_start) = (0, 0);
        for edit in &edits[..start] {
            match edit {
                Edit::Equal(..) => {
                    old_start += 1;
                    new_start += 1;
                }
                Edit::Delete(_) => old_start += 1,
                Edit::Insert(_) => new_start += 1,
            }
        }
        let old_len = hunk
            .iter()
            .filter(|e| !matches!(e, Edit::Insert(_)))
            .count();
        let new_len = hunk
            .iter()
            .filter(|e| !matches!(e, Edit::Delete(_)))
            .count();
        let _ = writeln!(
            out,
            "@@ -{} +{} @@",
            range(old_start, old_len),
            range(new_start, new_len)
        );
        for edit in hunk {
            match *edit {
                Edit::Equal(x, _) => push_line(&mut out, ' ', a[x]),
                Edit::Delete(x) => push_line(&mut out, '-', a[x]),
                Edit::Insert(y) => push_line(&mut out, '+', b[y]),
            }
        }
        i = j + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Apply hunks to `old` (a minimal patch tool) to prove they describe `new`.
    fn apply(old: &str, hunks: &str) -> String {
        let a = lines(old);
        let mut out = String::new();
        let mut next = 0;
        let mut body = hunks.lines().peekable();
        while let Some(header) = body.next() {
            let old_range = header.split(' ').nth(1).unwrap().trim_start_matches('-');
            let (start, len) = match old_range.split_once(',') {
                Some((s, l)) => (s.parse::<usize>().unwrap(), l.parse::<usize>().unwrap()),
                None => (old_range.parse().unwrap(), 1),
            };
            let first = if len == 0 { start } else { start - 1 };
            for line in &a[next..first] {
                out.push_str(line);
            }
            next = first;
            while let Some(line) = body.peek().copied() {
                if line.starts_with("@@") {
                    break;
                }
                body.next();
                let no_newline = body.peek() == Some(&"\\ No newline at end of file");
                if no_newline {
                    body.next();
                }
                let text = &line[1..];
                let terminated = if no_newline {
                    text.to_string()
                } else {
                    format!("{text}\n")
                };
                match &line[..1] {
                    " " => {
                        out.push_str(&terminated);
                        next += 1;
                    }
                    "-" => next += 1,
                    _ => out.push_str(&terminated),
                }
            }
        }
        for line in &a[next..] {
            out.push_str(line);
        }
        out
    }

    #[test]
    fn hunks_round_trip_table() {
        let many: String = (0..40).map(|i| format!("line {i}\n")).collect();
        let many_changed = many
            .replace("line 5\n", "line five\n")
            .replace("line 30\n", "");
        let cases: &[(&str, &str)] = &[
            ("", ""),
            ("", "a\nb\n"),
            ("a\nb\n", ""),
            ("a\nb\nc\n", "a\nB\nc\n"),
            ("a\nb", "a\nb\n"),
            ("x\n", "x"),
            ("a\nb\nc\nd\n", "d\nc\nb\na\n"),
            (&many, &many_changed),
        ];
        for (old, new) in cases {
            let hunks = unified_hunks(old, new, CONTEXT_LINES);
            assert_eq!(hunks.is_empty(), old == new, "{old:?} -> {new:?}");
            assert_eq!(apply(old, &hunks), *new, "{old:?} -> {new:?}:\n{hunks}");
        }
    }

    #[test]
    fn hunk_headers_and_context_follow_diff_u() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8\n9\n";
        assert_eq!(
            unified_hunks(old, new, 3),
            "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"
        );
        assert_eq!(unified_hunks("", "new\n", 3), "@@ -0,0 +1 @@\n+new\n");
        assert_eq!(
            unified_hunks("same\nold", "same\nnew", 3),
            "@@ -1,2 +1,2 @@\n same\n-old\n\\ No newline at end of file\n+new\n\\ No newline at end of file\n"
        );
        // Far-apart changes make separate hunks.
        let numbered = |f: &dyn Fn(usize) -> String| (0..40).map(f).collect::<String>();
        let many = numbered(&|i| format!("{i}\n"));
        let changed = numbered(&|i| match i {
            2 => "two\n".to_string(),
            35 => "thirty-five\n".to_string(),
            _ => format!("{i}\n"),
        });
        assert_eq!(unified_hunks(&many, &changed, 3).matches("@@ -").count(), 2);
    }

    #[test]
    fn huge_rewrites_fall_back_to_replacement() {
        let old: String = (0..3000).map(|i| format!("{i}\n")).collect();
        let new: String = (0..3000).map(|i| format!("x{i}\n")).collect();
        let hunks = unified_hunks(&old, &new, 3);
        assert!(hunks.starts_with("@@ -1,3000 +1,3000 @@\n"));
        assert_eq!(apply(&old, &hunks), new);
    }

    #[test]
    fn binary_sniffing() {
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe, 0x41]));
        assert!(!is_binary("héllo\n".as_bytes()));
    }
}
