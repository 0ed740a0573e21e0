//! A defensive parser for the rubric judge's reply: its scores and strategy.
//!
//! The judge is asked for a JSON block with per-dimension scores (0..10) and a strategy
//! `FINISH | REFINE | PIVOT`. Its reply is read in three layers, the first yielding a usable score
//! wins and is recorded:
//! 1. [`ScoreLayer::Json`]: a fenced ```` ```json ```` block or a balanced `{...}` (or `[...]` of
//!    named scores) standing in the prose; key names are normalised (case, spaces, underscores,
//!    hyphens, synonyms including Chinese ones); trailing commas are repaired.
//! 2. [`ScoreLayer::DimensionLines`]: `Correctness: 8/10`, `- correctness = 7.5`,
//!    `**Code quality** — 9`, `Correctness (weight 2): 8 out of 10`, markdown table rows.
//! 3. [`ScoreLayer::OverallLine`]: `Overall: 8.2/10`, `Average score: 8.2`, `Final score = 7`.
//!
//! Scores live in `[0, 10]`; `x/N` (N > 0) and `x%` are scaled to /10; anything else out of range is
//! ignored with a note. Hand-written matching, bounded work, never panics.
//!
//! [`ScoreLayer::Json`]: loopgate_protocol::rubric::ScoreLayer::Json
//! [`ScoreLayer::DimensionLines`]: loopgate_protocol::rubric::ScoreLayer::DimensionLines
//! [`ScoreLayer::OverallLine`]: loopgate_protocol::rubric::ScoreLayer::OverallLine

mod findings;
mod judge_json;
mod judge_lines;
mod parse;
mod score_text;

pub(crate) use parse::parse_rubric_reply;

#[cfg(test)]
mod tests;
