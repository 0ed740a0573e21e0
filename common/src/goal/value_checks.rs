//! Mechanical checks for clauses that name a value a command can compare: a CSV file's header,
//! the order of a CSV column, a count of lines or rows, an exact string a file contains. A
//! small judge asked "are the rows sorted by age?" answers for the look of the file; `sort`
//! does not. Each check is written from the clause's own words (and the file its sentence
//! names, when the clause is one requirement of a split sentence) only where they leave no
//! doubt, and is a derived check like the proposer's: a proposal's run on the starting
//! workspace finds it broken if it errors out on its own there
//! ([`crate::goal::derived_checks::proposal_value_checks`]), and every audit sets it aside if the
//! shell cannot parse it, its clause then judged. Pure.
//!
//! | clause (in its sentence) | check |
//! |---|---|
//! | "with a header name,age" (people.csv) | the first line of people.csv is `name,age` |
//! | "sorted by age" (people.csv with a header name,age) | column `age` in ascending order (numbers as numbers); "descending", "largest first": descending |
//! | "with exactly 3 lines" / "exactly 3 rows" (one file) | its line count (rows of a CSV with a header: the data rows) |
//! | "out.txt contains 'hello, loopgate'" | `grep -F` of the string in the file |

use crate::goal::words::exact_words;

/// A derived check for `clause`, one requirement of goal sentence `sentence` (the same text
/// when the sentence was not split), where its words leave no doubt.
pub fn value_check(clause: &str, sentence: &str) -> Option<String> {
    let lower = clause.to_lowercase();
    if lower.contains("header") || lower.contains("heading") {
        return header_check(clause, sentence);
    }
    if lower.contains("sorted by") || lower.contains("ordered by") {
        return sorted_check(clause, sentence);
    }
    if lower.contains("exactly") {
        if let Some(check) = count_check(clause, sentence) {
            return Some(check);
        }
    }
    if ["contain", "with the content", "with the text"]
        .iter()
        .any(|w| lower.contains(w))
    {
        return contains_check(clause, sentence);
    }
    None
}

/// The first line of the CSV file is the header the clause names.
fn header_check(clause: &str, sentence: &str) -> Option<String> {
    let file = csv_file(clause, sentence)?;
    let header = header_fields(clause)?.join(",");
    let file = sh_quote(&file);
    Some(format!(
        "test -f {file} && head -n 1 {file} | tr -d '\\r' | grep -Fqx -- {}",
        sh_quote(&header)
    ))
}

/// The CSV file's column is in order: the column must be one of the header the sentence names.
fn sorted_check(clause: &str, sentence: &str) -> Option<String> {
    let file = csv_file(clause, sentence)?;
    let lower = clause.to_lowercase();
    let (at, marker) = ["sorted by", "ordered by"]
        .iter()
        .find_map(|m| lower.find(m).map(|at| (at, m.len())))?;
    let column = clause[at + marker..]
        .split_whitespace()
        .next()?
        .trim_matches(|c: char| !c.is_alphanumeric() && c != '_');
    if !header_fields(sentence)?.iter().any(|f| f == column) || !plain(column) {
        return None;
    }
    let descending = ["descending", "largest first", "highest first", "most first"]
        .iter()
        .any(|w| lower.contains(w));
    let reverse = if descending { "True" } else { "False" };
    let order = if descending {
        "descending"
    } else {
        "ascending"
    };
    Some(format!(
        "python3 -c 'import csv, sys; v = [r[\"{column}\"] for r in csv.DictReader(open(\"{file}\", \
         newline=\"\"))]; n = all(x.strip().lstrip(\"-\").replace(\".\", \"\", 1).isdigit() for x in v); \
         k = [float(x) for x in v] if n else v; ok = k == sorted(k, reverse={reverse}); \
         print(\"{column}: \" + \", \".join(v) + (\" ({order})\" if ok else \" (not {order})\")); \
         sys.exit(0 if ok else 1)'"
    ))
}

/// "exactly N lines|rows": the one file's line count (a CSV's data rows when the sentence
/// gives it a header and the clause counts rows).
fn count_check(clause: &str, sentence: &str) -> Option<String> {
    let (n, unit) = exact_words(clause)
        .counts
        .into_iter()
        .find(|(_, unit)| matches!(unit.as_str(), "line" | "lines" | "row" | "rows"))?;
    let file = one_file(clause, sentence, |_| true)?;
    let skip = usize::from(
        unit.starts_with("row")
            && file.ends_with(".csv")
            && sentence.to_lowercase().contains("header"),
    );
    Some(format!(
        "python3 -c 'import sys; n = len([l for l in open(\"{file}\").read().splitlines() if \
         l.strip()]) - {skip}; print(n, \"{unit}\"); sys.exit(0 if n == {n} else 1)'"
    ))
}

/// The file named before the verb ("out.txt contains", "with the content") contains the
/// quoted string right after it (a few words like "the line" between at most).
fn contains_check(clause: &str, sentence: &str) -> Option<String> {
    let lower = clause.to_lowercase();
    let (at, verb) = [
        "containing",
        "contains",
        "contain",
        "with the content",
        "with the text",
    ]
    .iter()
    .find_map(|v| lower.find(v).map(|at| (at, v.len())))?;
    let mut rest = clause[at + verb..].trim_start_matches([':', ' ']);
    while let Some((word, tail)) = rest.split_once(' ') {
        if !matches!(
            word.to_lowercase().as_str(),
            "the" | "a" | "line" | "text" | "string" | "word" | "exactly" | "exact"
        ) {
            break;
        }
        rest = tail.trim_start_matches([':', ' ']);
    }
    if !rest.starts_with(['"', '\'', '“', '‘']) {
        return None;
    }
    let text = exact_words(rest).strings.into_iter().next()?;
    if text.contains('\n') || text.trim().is_empty() || !rest[1..].starts_with(text.as_str()) {
        return None;
    }
    let file = sh_quote(&one_file(&clause[..at], sentence, |_| true)?);
    Some(format!(
        "test -f {file} && grep -Fq -- {} {file}",
        sh_quote(&text)
    ))
}

/// The one `.csv` file the clause names, else the one its sentence names.
fn csv_file(clause: &str, sentence: &str) -> Option<String> {
    one_file(clause, sentence, |n| n.ends_with(".csv"))
}

/// The one file name (passing `keep`) in the clause, else the one in its sentence; names a
/// check can hold without quoting only.
fn one_file(clause: &str, sentence: &str, keep: impl Fn(&str) -> bool) -> Option<String> {
    let names = |text: &str| -> Vec<String> {
        exact_words(text)
            .names
            .into_iter()
            .filter(|n| !n.ends_with('/') && keep(n))
            .collect()
    };
    let mut found = names(clause);
    if found.is_empty() {
        found = names(sentence);
    }
    match found.as_slice() {
        [one] if plain(one) => Some(one.clone()),
        _ => None,
    }
}

/// The fields of the header named after "header" (`name,age`, `` `id,total` ``), two at least.
fn header_fields(text: &str) -> Option<Vec<String>> {
    let lower = text.to_lowercase();
    let at = lower.find("header").or_else(|| lower.find("heading"))?;
    let token = text[at..]
        .split_whitespace()
        .skip(1)
        .find(|w| !matches!(w.to_lowercase().as_str(), "line" | "row" | "is" | "of"))?;
    let token = token
        .trim_matches(|c: char| "`\"'".contains(c))
        .trim_end_matches(['.', ';', ':'])
        .trim_matches(|c: char| "`\"'".contains(c));
    let fields: Vec<String> = token.split(',').map(str::to_string).collect();
    (fields.len() >= 2 && fields.iter().all(|f| plain(f))).then_some(fields)
}

/// Letters, digits and `_ . - /` only: safe inside the checks' quotes as it is.
fn plain(word: &str) -> bool {
    !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/'))
}

/// `text` as one shell word.
fn sh_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

#[cfg(test)]
#[path = "value_checks_tests.rs"]
mod tests;
