//! A goal sentence split at its requirements, so that each is checked or judged on its own:
//! "Write people.csv from people.txt with a header name,age and one row per person, sorted by
//! age" asks for a file, a header, one row per entry and an order, and a judge asked about the
//! whole sentence at once answers for the easiest part. A sentence is split where a phrase that
//! states a requirement of its own starts ([`MARKERS`]: "with a header", "one row per",
//! "sorted by", ...), outside backquotes, quotes and parentheses; the connectives between the
//! parts (",", "and", "then") are dropped. Each part is the goal's own words. A sentence with
//! no such phrase, or only one part, stays whole. Pure.

/// Phrases that start a requirement of their own (lowercase, matched at a word start).
const MARKERS: &[&str] = &[
    "with a header",
    "with the header",
    "with a heading",
    "with exactly",
    "one row per",
    "one line per",
    "a row per",
    "a line per",
    "sorted by",
    "sorted in",
    "sorted alphabetically",
    "ordered by",
    "in ascending order",
    "in descending order",
    "in alphabetical order",
];

/// Words that join requirements and belong to none of them.
const CONNECTIVES: &[&str] = &["and", "then", "and then"];

/// The requirements of `sentence`, in order: the sentence itself when it has fewer than two.
pub fn requirements(sentence: &str) -> Vec<String> {
    let starts = marker_starts(sentence);
    let mut cuts: Vec<usize> = vec![0];
    cuts.extend(starts.into_iter().filter(|&s| s > 0));
    cuts.push(sentence.len());
    let parts: Vec<String> = cuts
        .windows(2)
        .map(|w| trim_part(&sentence[w[0]..w[1]]))
        .filter(|p| !p.is_empty())
        .collect();
    if parts.len() < 2 {
        return vec![sentence.trim().to_string()];
    }
    parts
}

/// Byte offsets where a marker starts, at a word start and outside backquotes, double quotes
/// and parentheses.
fn marker_starts(sentence: &str) -> Vec<usize> {
    let lower = sentence.to_ascii_lowercase();
    let mut starts = Vec::new();
    let (mut tick, mut quote, mut depth) = (false, false, 0usize);
    let mut prev: Option<char> = None;
    for (i, c) in sentence.char_indices() {
        match c {
            '`' => tick = !tick,
            '"' => quote = !quote,
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
        let word_start = prev.is_none_or(|p| !p.is_alphanumeric());
        prev = Some(c);
        if tick || quote || depth > 0 || !word_start {
            continue;
        }
        let rest = &lower[i..];
        if MARKERS.iter().any(|m| {
            rest.starts_with(m)
                && rest[m.len()..]
                    .chars()
                    .next()
                    .is_none_or(|n| !n.is_alphanumeric())
        }) {
            starts.push(i);
        }
    }
    starts
}

/// A part without surrounding blanks, punctuation or connectives.
fn trim_part(part: &str) -> String {
    let mut p = part.trim();
    loop {
        let before = p;
        p = p.trim_matches(|c: char| c.is_whitespace() || matches!(c, ',' | ';' | ':' | '.'));
        for word in CONNECTIVES {
            if let Some(rest) = strip_word_suffix(p, word) {
                p = rest;
            }
            if let Some(rest) = strip_word_prefix(p, word) {
                p = rest;
            }
        }
        if p == before {
            return p.to_string();
        }
    }
}

fn strip_word_suffix<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let cut = text.len().checked_sub(word.len())?;
    let (head, tail) = (text.get(..cut)?, text.get(cut..)?);
    (tail.eq_ignore_ascii_case(word) && (head.is_empty() || head.ends_with([' ', ','])))
        .then_some(head)
}

fn strip_word_prefix<'a>(text: &'a str, word: &str) -> Option<&'a str> {
    let (head, tail) = (text.get(..word.len())?, text.get(word.len()..)?);
    (head.eq_ignore_ascii_case(word) && tail.starts_with(' ')).then_some(tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_splits_at_its_requirements() {
        let cases: &[(&str, &[&str])] = &[
            (
                "Write people.csv from people.txt with a header name,age and one row per person, \
                 sorted by age.",
                &[
                    "Write people.csv from people.txt",
                    "with a header name,age",
                    "one row per person",
                    "sorted by age",
                ],
            ),
            (
                "Create out.csv with the header id,total, and then one line per order",
                &[
                    "Create out.csv",
                    "with the header id,total",
                    "one line per order",
                ],
            ),
            (
                "names.txt lists the users in alphabetical order, with exactly 3 lines",
                &[
                    "names.txt lists the users",
                    "in alphabetical order",
                    "with exactly 3 lines",
                ],
            ),
            (
                "Write words.py that reads text from stdin and prints each distinct word once, \
                 one per line, in lowercase, sorted alphabetically.",
                &[
                    "Write words.py that reads text from stdin and prints each distinct word \
                     once, one per line, in lowercase",
                    "sorted alphabetically",
                ],
            ),
            // One requirement: nothing to split.
            (
                "Write dedupe.py that reads lines from stdin and prints them without duplicates, \
                 keeping the order of first occurrence",
                &[
                    "Write dedupe.py that reads lines from stdin and prints them without \
                   duplicates, keeping the order of first occurrence",
                ],
            ),
            ("Sorted by name.", &["Sorted by name."]),
            (
                "Create report.csv sorted by date",
                &["Create report.csv", "sorted by date"],
            ),
            // Inside parentheses, backquotes or quotes a marker is part of its phrase.
            (
                "a line `region,NAME` per region (each sorted by name), then a total",
                &["a line `region,NAME` per region (each sorted by name), then a total"],
            ),
            (
                "It prints \"sorted by size\" first",
                &["It prints \"sorted by size\" first"],
            ),
            // A marker must start a word.
            ("Keep unsorted by design", &["Keep unsorted by design"]),
        ];
        for (sentence, want) in cases {
            assert_eq!(requirements(sentence), *want, "{sentence}");
        }
    }
}
