//! Reading the pieces of a judge's reply: normalised key names and their synonyms, scores written
//! as numbers (`8`, `8/10`, `85/100`, `85%`, `8 out of 10`) and strategy words.

use crate::prompt_text::head_chars;
use loopgate_protocol::rubric::normalize_key;
use loopgate_protocol::rubric::{Strategy, SCORE_SCALE};

/// A line's label (before its separator) longer than this is prose, not a label.
pub(super) const MAX_LABEL_CHARS: usize = 80;

/// `raw` without parenthesised or bracketed parts: `Correctness (weight 2)` → `Correctness `.
fn without_brackets(raw: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::with_capacity(raw.len());
    for c in raw.chars() {
        match c {
            '(' | '[' | '（' | '【' => depth += 1,
            ')' | ']' | '）' | '】' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// A normalised label, bracketed parts dropped; `None` when it is too long to be a label.
pub(super) fn label_key(raw: &str) -> Option<String> {
    if raw.chars().nth(MAX_LABEL_CHARS).is_some() {
        return None;
    }
    Some(normalize_key(&without_brackets(raw)))
}

pub(super) const LABEL_SUFFIXES: &[&str] = &["score", "rating", "评分", "得分", "分数", "分"];
pub(super) const SCORES_KEYS: &[&str] = &[
    "scores",
    "score",
    "ratings",
    "rating",
    "dimensions",
    "dimensionscores",
    "rubric",
    "rubricscores",
    "criteria",
    "评分",
    "分数",
    "得分",
    "各项评分",
];
pub(super) const OVERALL_KEYS: &[&str] = &[
    "overall",
    "overallscore",
    "overallrating",
    "average",
    "averagescore",
    "avg",
    "weightedaverage",
    "weightedscore",
    "weightedaveragescore",
    "total",
    "totalscore",
    "final",
    "finalscore",
    "总分",
    "综合得分",
    "综合评分",
    "综合",
    "平均分",
    "总评分",
];
pub(super) const STRATEGY_KEYS: &[&str] = &[
    "strategy",
    "decision",
    "recommendation",
    "nextstep",
    "nextaction",
    "recommendedstrategy",
    "finalstrategy",
    "finaldecision",
    "策略",
    "决定",
    "决策",
    "建议",
];
pub(super) const NAME_KEYS: &[&str] = &[
    "name",
    "dimension",
    "criterion",
    "criteria",
    "category",
    "aspect",
    "metric",
    "key",
    "名称",
    "维度",
    "项目",
    "指标",
];
pub(super) const VALUE_KEYS: &[&str] =
    &["score", "value", "rating", "points", "分数", "得分", "评分"];

pub(super) fn key_in(raw: &str, keys: &[&str]) -> bool {
    let key = normalize_key(raw);
    keys.contains(&key.as_str())
}

pub(super) fn is_overall_label(raw: &str) -> bool {
    let Some(key) = label_key(raw) else {
        return false;
    };
    key == "score"
        || OVERALL_KEYS.contains(&key.as_str())
        || LABEL_SUFFIXES
            .iter()
            .filter_map(|s| key.strip_suffix(s))
            .any(|k| OVERALL_KEYS.contains(&k))
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Scale {
    Bare,
    OutOf(f64),
    Percent,
}

/// A number read as a score, scaled to /10, or why it was refused.
pub(super) fn scaled_score(value: f64, scale: Scale) -> Result<f64, String> {
    let (scaled, shown) = match scale {
        Scale::Bare => (value, format!("{value}")),
        Scale::Percent => (value / 10.0, format!("{value}%")),
        Scale::OutOf(d) if d > 0.0 && d.is_finite() => {
            (value / d * SCORE_SCALE, format!("{value}/{d}"))
        }
        Scale::OutOf(d) => return Err(format!("{value}/{d} has no usable scale")),
    };
    if scaled.is_finite() && (0.0..=SCORE_SCALE).contains(&scaled) {
        Ok(scaled)
    } else {
        Err(format!("{shown} is outside 0..10"))
    }
}

/// An unsigned decimal number (`8`, `8.5`, `.5`) at the start of `s`: its value and byte length.
fn leading_number(s: &str) -> Option<(f64, usize)> {
    let bytes = s.as_bytes();
    let int = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let mut end = int;
    if bytes.get(int) == Some(&b'.') {
        let frac = bytes
            .iter()
            .skip(int + 1)
            .take_while(|b| b.is_ascii_digit())
            .count();
        if frac > 0 {
            end = int + 1 + frac;
        }
    }
    if end == 0 {
        return None;
    }
    s.get(..end)?.parse::<f64>().ok().map(|v| (v, end))
}

/// A number written in some text, with the scale written after it.
#[derive(Debug, Clone, Copy, PartialEq)]
struct WrittenNumber {
    value: f64,
    scale: Scale,
    /// It opens a range like `0-10` (a template), so it is no score.
    range: bool,
    /// Byte offsets of its first character and just past what was read.
    start: usize,
    end: usize,
}

/// At most this many numbers are looked at in one value.
const MAX_NUMBERS_PER_VALUE: usize = 16;

/// The next number at or after byte `from`: `8`, `8.5`, `-1`, `8/10`, `8 / 10`, `8 out of 10`,
/// `85%`, `9／10`, `0-10` (a range).
fn next_number(s: &str, from: usize) -> Option<WrittenNumber> {
    let rest = s.get(from..)?;
    let start = from
        + rest
            .char_indices()
            .find(|&(i, c)| {
                c.is_ascii_digit()
                    || (c == '.' && rest.as_bytes().get(i + 1).is_some_and(u8::is_ascii_digit))
            })?
            .0;
    let (mut value, len) = leading_number(s.get(start..)?)?;
    if s[..start].ends_with(['-', '−']) {
        value = -value;
    }
    let mut number = WrittenNumber {
        value,
        scale: Scale::Bare,
        range: false,
        start,
        end: start + len,
    };
    let tail = &s[number.end..];
    let after = tail.trim_start();
    let after_at = number.end + (tail.len() - after.len());
    let denominator = after
        .strip_prefix('/')
        .or_else(|| after.strip_prefix('／'))
        .or_else(|| strip_prefix_ignore_case(after, "out of"));
    if let Some(d) = denominator {
        let d_trimmed = d.trim_start();
        if let Some((d_value, d_len)) = leading_number(d_trimmed) {
            number.scale = Scale::OutOf(d_value);
            number.end = after_at + (after.len() - d_trimmed.len()) + d_len;
        }
    } else if after.starts_with(['%', '％']) {
        number.scale = Scale::Percent;
    } else if let Some(r) = after.strip_prefix(['-', '–', '~']) {
        number.range = r.trim_start().starts_with(|c: char| c.is_ascii_digit());
    }
    Some(number)
}

fn read(number: WrittenNumber) -> Option<Result<f64, String>> {
    (!number.range).then(|| scaled_score(number.value, number.scale))
}

/// The first number written in `s` as a score; `None` when `s` has none or it opens a range.
pub(super) fn first_score(s: &str) -> Option<Result<f64, String>> {
    read(next_number(s, 0)?)
}

/// The score in the value part of a line: a number leading the value (`9/10 - solid`), else the
/// first one written with a scale (`handles all 12 cases, 9/10`), else the first number.
pub(super) fn value_score(s: &str) -> Option<Result<f64, String>> {
    let first = next_number(s, 0)?;
    let leading = s[..first.start].chars().all(|c| {
        c.is_whitespace() || matches!(c, '*' | '_' | '`' | '"' | '\'' | '(' | '[' | '-' | '−')
    });
    if first.range || leading || first.scale != Scale::Bare {
        return read(first);
    }
    let mut from = first.end;
    for _ in 0..MAX_NUMBERS_PER_VALUE {
        let Some(next) = next_number(s, from) else {
            break;
        };
        if !next.range && next.scale != Scale::Bare {
            return read(next);
        }
        from = next.end.max(from + 1);
    }
    read(first)
}

fn strip_prefix_ignore_case<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn strategy_word(word: &str) -> Option<Strategy> {
    if word.eq_ignore_ascii_case("finish") {
        Some(Strategy::Finish)
    } else if word.eq_ignore_ascii_case("refine") {
        Some(Strategy::Refine)
    } else if word.eq_ignore_ascii_case("pivot") {
        Some(Strategy::Pivot)
    } else {
        None
    }
}

const CHINESE_STRATEGIES: &[(&str, Strategy)] = &[
    ("完成", Strategy::Finish),
    ("结束", Strategy::Finish),
    ("改进", Strategy::Refine),
    ("完善", Strategy::Refine),
    ("优化", Strategy::Refine),
    ("细化", Strategy::Refine),
    ("转向", Strategy::Pivot),
    ("转换方向", Strategy::Pivot),
    ("重来", Strategy::Pivot),
];

/// What may stand between two strategy words listed as alternatives (`FINISH, REFINE or PIVOT`).
const ALTERNATIVE_GLUE: &[&str] = &["", ",", "|", "/", "or", ",or", "and", ",and", "、", "或"];

/// Standalone strategy words in `text`, in order, skipping those listed as alternatives
/// (`FINISH | REFINE | PIVOT`, `finish/refine`, `FINISH, REFINE or PIVOT`):
/// `(strategy, written in capitals)`.
pub(super) fn strategy_words(text: &str) -> Vec<(Strategy, bool)> {
    let is_word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut words: Vec<(usize, usize, Strategy, bool)> = Vec::new();
    let mut start = None;
    for (i, c) in text
        .char_indices()
        .chain(std::iter::once((text.len(), ' ')))
    {
        match (is_word(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                start = None;
                if let Some(strategy) = text.get(s..i).and_then(strategy_word) {
                    let caps = text[s..i].bytes().all(|b| b.is_ascii_uppercase());
                    words.push((s, i, strategy, caps));
                }
            }
            _ => {}
        }
    }
    let listed = |a: usize, b: usize| {
        let gap: String = text
            .get(a..b)
            .unwrap_or("x")
            .chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect();
        ALTERNATIVE_GLUE.contains(&gap.as_str())
    };
    let piped = |c: Option<char>| matches!(c, Some('|' | '/'));
    (0..words.len())
        .filter(|&k| {
            let (s, e, _, _) = words[k];
            let before = k > 0 && listed(words[k - 1].1, s);
            let after = words.get(k + 1).is_some_and(|next| listed(e, next.0));
            let prev = text.get(..s).and_then(|t| t.trim_end().chars().next_back());
            let next = text.get(e..).and_then(|t| t.trim_start().chars().next());
            !(before || after || piped(prev) || piped(next))
        })
        .map(|k| (words[k].2, words[k].3))
        .collect()
}

/// A strategy value (`"FINISH"`, `"refine - more tests"`, `"转向"`); `None` for a template.
pub(super) fn strategy_value(value: &str) -> Option<Strategy> {
    let value = head_chars(value, MAX_LABEL_CHARS);
    if value.contains('|') {
        return None;
    }
    strategy_words(value).first().map(|(s, _)| *s).or_else(|| {
        CHINESE_STRATEGIES
            .iter()
            .filter_map(|(word, s)| value.find(word).map(|at| (at, *s)))
            .min_by_key(|(at, _)| *at)
            .map(|(_, s)| s)
    })
}
