//! A clause judge's `met` is earned by a quote: the answer must copy a line of a file or of a
//! command's output that the auditor showed it, and that quote must be found verbatim (spacing
//! aside) in what was shown. A `met` without such a quote becomes `unknown`, which keeps the
//! gate closed. `unmet` and `unknown` stand as answered. Pure.
//!
//! What counts as a quote in an answer: a span in backticks (`` `...` ``), a span in double
//! quotes (`"..."`), or the text after `Evidence:` on a line (the format the clause prompt asks
//! for). A quote needs at least [`MIN_QUOTE_CHARS`] characters that are not whitespace.

use loopgate_common::goal::criteria::ClauseVerdict;

/// A quote shorter than this (whitespace not counted) proves nothing.
pub(crate) const MIN_QUOTE_CHARS: usize = 8;
/// The reason a `met` without a found quote is read as `unknown`.
pub(crate) const UNQUOTED_MET: &str = "met without a quote found in the evidence";

/// The answer as it stands given `shown` (the files' content and the commands' output the
/// judge saw): a `met` whose `answer` quotes nothing of `shown` becomes `unknown`.
pub(crate) fn earned_verdict(
    verdict: ClauseVerdict,
    reason: String,
    answer: &str,
    shown: &str,
) -> (ClauseVerdict, String) {
    if verdict != ClauseVerdict::Met || quote_found(answer, shown) {
        return (verdict, reason);
    }
    let reason = if reason.is_empty() {
        UNQUOTED_MET.to_string()
    } else {
        format!("{UNQUOTED_MET} (the judge said met: {reason})")
    };
    (ClauseVerdict::Unknown, reason)
}

/// Does `answer` hold a quote of at least [`MIN_QUOTE_CHARS`] non-space characters found in
/// `shown`, whitespace runs read as one space?
pub(crate) fn quote_found(answer: &str, shown: &str) -> bool {
    let shown = normalize(shown);
    quotes(answer).iter().any(|q| {
        let q = normalize(q);
        q.chars().filter(|c| !c.is_whitespace()).count() >= MIN_QUOTE_CHARS && shown.contains(&q)
    })
}

/// The spans `answer` offers as quotes: backticked, double-quoted, and after `Evidence:`.
fn quotes(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    for fence in ['`', '"'] {
        out.extend(
            answer
                .split(fence)
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>(),
        );
    }
    for line in answer.lines() {
        let lower = line.to_lowercase();
        if let Some(at) = lower.find("evidence:") {
            let rest = line[at + "evidence:".len()..].trim();
            let rest = rest.trim_matches(|c: char| c == '`' || c == '"' || c == '\'');
            out.push(rest.trim().to_string());
        }
    }
    out
}

/// Whitespace runs as one space, trimmed.
fn normalize(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use ClauseVerdict::*;

    const SHOWN: &str = "name,score\nada,9\nbob,7\n\nimport csv\nrows.sort(key=lambda r: r[1])\n";

    #[test]
    fn a_met_stands_only_on_a_quote_found_in_what_was_shown() {
        let cases: [(&str, ClauseVerdict, &str, ClauseVerdict); 11] = [
            (
                "backticked line found",
                Met,
                "met - `rows.sort(key=lambda r: r[1])` sorts the rows",
                Met,
            ),
            (
                "double-quoted span found",
                Met,
                "met - the file reads \"ada,9 bob,7\" in order",
                Met,
            ),
            (
                "evidence line found, spacing aside",
                Met,
                "met - the header is there\nEvidence: name,score",
                Met,
            ),
            (
                "evidence line across a newline of the file",
                Met,
                "met - sorted\nEvidence: `ada,9   bob,7`",
                Met,
            ),
            ("no quote at all", Met, "met - looks right", Unknown),
            ("no reason at all", Met, "met", Unknown),
            (
                "fabricated quote",
                Met,
                "met - `rows.sort(key=lambda r: r[0])` sorts them",
                Unknown,
            ),
            ("too short a quote", Met, "met - `ada,9` is first", Unknown),
            (
                "unmet needs no quote",
                Unmet,
                "unmet - the rows are not sorted",
                Unmet,
            ),
            (
                "unknown needs no quote",
                Unknown,
                "unknown - cannot tell",
                Unknown,
            ),
            (
                "the clause quoted back is not evidence",
                Met,
                "met - \"rows sorted by score descending\"",
                Unknown,
            ),
        ];
        for (name, verdict, answer, want) in cases {
            let (got, reason) = earned_verdict(verdict, "r".into(), answer, SHOWN);
            assert_eq!(got, want, "case '{name}'");
            if verdict == Met && want == Unknown {
                assert!(reason.starts_with(UNQUOTED_MET), "case '{name}': {reason}");
            } else {
                assert_eq!(reason, "r", "case '{name}'");
            }
        }
    }

    #[test]
    fn an_empty_reason_reads_as_the_rule() {
        let (v, reason) = earned_verdict(Met, String::new(), "met", SHOWN);
        assert_eq!((v, reason.as_str()), (Unknown, UNQUOTED_MET));
    }
}
