//! Where `edit_file`'s `old` text sits in a file. Exact first; when the exact text is not
//! there, once more ignoring whitespace (codex's `apply_patch` does the same with trimmed
//! lines). Small models retype the text they mean to replace and drift in it (a docstring's
//! closing quotes moved to their own line, a tab for four spaces, a lost trailing newline);
//! the whitespace part of that drift is what this forgives, and then the quote style: a 1.5B
//! model retyped `f"{x}"` as `f'{x}'` in ten identical calls of one episode, each shown the
//! file's text, so `'` and `"` count as one when nothing else matches (the region is replaced
//! by `new`, quotes and all). A miss that differs in more (a dropped docstring line) gets the
//! file's text in its error instead (`Workspace::edit_file`). The replaced region is whole
//! lines' worth of the original when `old` began or ended with whitespace, so the indentation
//! `new` brings is not doubled. Pure.

/// Files over this many bytes get the exact match only (the lenient scan compares `old` at
/// every non-whitespace character).
const LENIENT_MAX_BYTES: usize = 256 * 1024;

/// How `old` was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MatchKind {
    Exact,
    /// Only with whitespace differences ignored.
    IgnoringWhitespace,
    /// Only with whitespace differences ignored and `'` taken for `"`.
    IgnoringQuotes,
}

/// Why no edit was made: `old` is not there (0) or not unique (its count).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NoUniqueMatch(pub(crate) usize);

/// `text` with its one occurrence of `old` replaced by `new`; exact first, else the one region
/// that equals `old` when whitespace is ignored. An exact `old` that appears more than once is
/// ambiguous (no lenient fallback: that would pick one of them).
pub(crate) fn replace_once(
    text: &str,
    old: &str,
    new: &str,
) -> Result<(String, MatchKind), NoUniqueMatch> {
    match occurrences(text, old).as_slice() {
        [at] => return Ok((splice(text, *at, at + old.len(), new), MatchKind::Exact)),
        [] => {}
        several => return Err(NoUniqueMatch(several.len())),
    }
    let (region, kind) = match lenient_region(text, old, false) {
        Err(NoUniqueMatch(0)) => (lenient_region(text, old, true)?, MatchKind::IgnoringQuotes),
        found => (found?, MatchKind::IgnoringWhitespace),
    };
    Ok((splice(text, region.0, region.1, new), kind))
}

/// `c` as the lenient match compares it: with `fold_quotes`, `'` as `"`.
fn compared(c: char, fold_quotes: bool) -> char {
    if fold_quotes && c == '\'' {
        '"'
    } else {
        c
    }
}

fn splice(text: &str, start: usize, end: usize, new: &str) -> String {
    let mut out = String::with_capacity(text.len() + new.len());
    out.push_str(&text[..start]);
    out.push_str(new);
    out.push_str(&text[end..]);
    out
}

/// The byte range of `text` that equals `old` ignoring whitespace (and with `fold_quotes`,
/// the difference between `'` and `"`), when there is exactly one.
fn lenient_region(
    text: &str,
    old: &str,
    fold_quotes: bool,
) -> Result<(usize, usize), NoUniqueMatch> {
    let wanted: Vec<char> = old
        .chars()
        .filter(|c| !c.is_whitespace())
        .map(|c| compared(c, fold_quotes))
        .collect();
    if wanted.is_empty() || text.len() > LENIENT_MAX_BYTES {
        return Err(NoUniqueMatch(0));
    }
    // Every non-whitespace character of `text` with its byte offset.
    let dense: Vec<(usize, char)> = text
        .char_indices()
        .filter(|(_, c)| !c.is_whitespace())
        .collect();
    let hits: Vec<usize> = dense
        .windows(wanted.len())
        .enumerate()
        .filter(|(_, w)| {
            w.iter()
                .map(|(_, c)| compared(*c, fold_quotes))
                .eq(wanted.iter().copied())
        })
        .map(|(i, _)| i)
        .collect();
    let &[first] = hits.as_slice() else {
        return Err(NoUniqueMatch(hits.len()));
    };
    let (start_at, _) = dense[first];
    let (last_at, last_char) = dense[first + wanted.len() - 1];
    let mut start = start_at;
    let mut end = last_at + last_char.len_utf8();
    // `old` began with whitespace (its indentation): take the line's own indentation too.
    if old.starts_with(char::is_whitespace) {
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        if text[line_start..start].chars().all(char::is_whitespace) {
            start = line_start;
        }
    }
    // `old` ended with a newline: take the rest of the line and its newline too.
    if old.trim_end_matches([' ', '\t']).ends_with('\n') {
        let rest = &text[end..];
        let line_end = rest.find('\n').map_or(rest.len(), |i| i + 1);
        if rest[..line_end].chars().all(char::is_whitespace) {
            end += line_end;
        }
    }
    Ok((start, end))
}

/// Byte offsets of every (possibly overlapping) occurrence of `needle`; none for an empty one.
fn occurrences(text: &str, needle: &str) -> Vec<usize> {
    let mut hits = Vec::new();
    if needle.is_empty() {
        return hits;
    }
    let mut from = 0;
    while let Some(found) = text.get(from..).and_then(|rest| rest.find(needle)) {
        let at = from + found;
        hits.push(at);
        // Step one character past the start of this hit.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
    }
    hits
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (text, old, new, the edited text and how it matched, or the count of matches).
    type Case<'a> = (
        &'a str,
        &'a str,
        &'a str,
        Result<(&'a str, MatchKind), usize>,
    );

    #[test]
    fn replace_once_table() {
        let doc =
            "def count_words(text):\n    \"\"\"Words.\"\"\"\n    return len(text.split(\" \"))\n";
        let cases: Vec<Case> = vec![
            ("a b c", "b", "x", Ok(("a x c", MatchKind::Exact))),
            ("x = 1\nx = 1\n", "x = 1", "y", Err(2)),
            ("aaa", "aa", "b", Err(2)),
            ("abc", "zz", "y", Err(0)),
            ("abcb", "b", "X", Err(2)),
            ("ééé", "é", "e", Err(3)),
            ("añb", "ñ", "n", Ok(("anb", MatchKind::Exact))),
            ("abc", "", "y", Err(0)),
            ("abc", " \n ", "y", Err(0)),
            // A retyped docstring with its closing quotes on a line of their own.
            (
                doc,
                "def count_words(text):\n    \"\"\"Words.\n    \"\"\"\n    return len(text.split(\" \"))",
                "def count_words(text):\n    return len(text.split())",
                Ok((
                    "def count_words(text):\n    return len(text.split())\n",
                    MatchKind::IgnoringWhitespace,
                )),
            ),
            // Indented `old` with a tab for the spaces: the line's indentation is replaced,
            // not doubled, and the trailing newline goes with it.
            (
                "def f():\n    return 1\n    # end\n",
                "\treturn 1\n",
                "    return 2\n",
                Ok((
                    "def f():\n    return 2\n    # end\n",
                    MatchKind::IgnoringWhitespace,
                )),
            ),
            // Without leading whitespace in `old` the line's indentation stays.
            (
                "def f():\n    return  1\n",
                "return 1",
                "return 2",
                Ok(("def f():\n    return 2\n", MatchKind::IgnoringWhitespace)),
            ),
            // Lenient matches that are not unique are refused, with their count.
            ("a = 1\na  =  1\n", "a= 1", "b", Err(2)),
            // Another quote style, as a 1.5B model retyped it ten times in one episode.
            (
                "def f(c):\n    return f\"{c // 100}.{c % 100}\"\n",
                "return f'{c // 100}.{c % 100}'",
                "return f'{c // 100}.{c % 100:02d}'",
                Ok((
                    "def f(c):\n    return f'{c // 100}.{c % 100:02d}'\n",
                    MatchKind::IgnoringQuotes,
                )),
            ),
            // Quotes folded only when nothing matches without: two regions alike but for
            // their quotes, one of them exact, is an exact match.
            (
                "a = 'x'\nb = \"x\"\n",
                "a = 'x'",
                "a = 1",
                Ok(("a = 1\nb = \"x\"\n", MatchKind::Exact)),
            ),
            // Folded quotes that match twice are refused, with their count.
            ("a('x')\na(\"x\")\n", "a( \"x' )", "b", Err(2)),
            // Multibyte text around the match.
            (
                "é  ü\nß",
                "é ü",
                "x",
                Ok(("x\nß", MatchKind::IgnoringWhitespace)),
            ),
        ];
        for (text, old, new, want) in cases {
            let got = replace_once(text, old, new);
            let want = want.map(|(s, k)| (s.to_string(), k)).map_err(NoUniqueMatch);
            assert_eq!(got, want, "{text:?} / {old:?}");
        }
    }
}
