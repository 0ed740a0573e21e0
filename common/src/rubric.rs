//! Scored evaluation: the contract's optional rubric (`[[rubric]] name/weight/description` and
//! `rubric_threshold` in a task file), a defensive parser for the LLM judge's scores and strategy,
//! and the outcome the gate counts.
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

mod judge_json;
mod judge_lines;
mod score_text;

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use judge_json::{findings_in_value, json_candidates, json_layer};
use judge_lines::{dimension_lines_layer, overall_line_layer, strategy_in_text};
use score_text::{label_key, normalize_key, LABEL_SUFFIXES};

/// Replies longer than this many bytes are cut to their first and last `MAX_JUDGE_OUTPUT_CHARS / 2`
/// characters before parsing.
pub const MAX_JUDGE_OUTPUT_CHARS: usize = 64 * 1024;
/// Scores are on this scale.
pub const SCORE_SCALE: f64 = 10.0;
/// An average this close below the threshold still meets it (floating-point noise).
const THRESHOLD_EPSILON: f64 = 1e-9;
/// The judge's own overall differing from the computed average by more than this is noted.
const OVERALL_DISAGREEMENT: f64 = 0.05;
const MAX_NOTES: usize = 32;

fn default_weight() -> f64 {
    1.0
}

/// One scored dimension of the rubric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RubricDimension {
    pub name: String,
    #[serde(default = "default_weight")]
    pub weight: f64,
    #[serde(default)]
    pub description: String,
}

/// The contract's rubric: weighted dimensions and the pass threshold on the 0..10 scale.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rubric {
    pub dimensions: Vec<RubricDimension>,
    pub threshold: f64,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum RubricError {
    #[error("the rubric has no dimensions")]
    NoDimensions,
    #[error("rubric dimension #{index} has an empty name")]
    EmptyName { index: usize },
    #[error(
        "rubric dimension '{name}' is listed twice (names ignore case, spaces and underscores)"
    )]
    DuplicateName { name: String },
    #[error("rubric dimension '{name}' has weight {weight}; weights must be finite and above 0")]
    InvalidWeight { name: String, weight: f64 },
    #[error("rubric threshold {threshold} is outside (0, 10]")]
    InvalidThreshold { threshold: f64 },
}

impl Rubric {
    /// Non-empty, names non-empty and unique (ignoring case, spaces, underscores and hyphens, the
    /// way judge output is matched), weights finite and > 0, threshold in (0, 10].
    pub fn validate(&self) -> Result<(), RubricError> {
        if self.dimensions.is_empty() {
            return Err(RubricError::NoDimensions);
        }
        let mut seen: Vec<String> = Vec::with_capacity(self.dimensions.len());
        for (index, dim) in self.dimensions.iter().enumerate() {
            let key = normalize_key(&dim.name);
            if key.is_empty() {
                return Err(RubricError::EmptyName { index });
            }
            if seen.contains(&key) {
                return Err(RubricError::DuplicateName {
                    name: dim.name.clone(),
                });
            }
            seen.push(key);
            if !(dim.weight.is_finite() && dim.weight > 0.0) {
                return Err(RubricError::InvalidWeight {
                    name: dim.name.clone(),
                    weight: dim.weight,
                });
            }
        }
        if !(self.threshold > 0.0 && self.threshold <= SCORE_SCALE) {
            return Err(RubricError::InvalidThreshold {
                threshold: self.threshold,
            });
        }
        Ok(())
    }
}

// Validated rubrics hold finite numbers only, so equality is total on them.
impl Eq for RubricDimension {}
impl Eq for Rubric {}

/// What the judge recommends next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    Finish,
    Refine,
    Pivot,
}

impl Strategy {
    pub fn as_str(self) -> &'static str {
        match self {
            Strategy::Finish => "FINISH",
            Strategy::Refine => "REFINE",
            Strategy::Pivot => "PIVOT",
        }
    }
}

impl std::fmt::Display for Strategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which parsing layer produced the score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ScoreLayer {
    Json,
    DimensionLines,
    OverallLine,
}

/// The judge's parsed evaluation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricScore {
    /// Per-dimension scores on 0..10, keyed by the rubric's dimension name. Empty when only an
    /// overall score was found.
    pub scores: BTreeMap<String, f64>,
    /// Weighted over the dimensions present, or the judge's overall when no dimension was scored.
    pub weighted_average: f64,
    pub strategy: Option<Strategy>,
    pub layer: ScoreLayer,
    /// What was ignored or missing, for the audit record.
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RubricParseError {
    #[error("the judge's reply is empty")]
    Empty,
    #[error("the judge's reply holds no usable score")]
    NoScores,
}

/// What a rubric score means for the gate. Only `Pass` counts as the rubric's evidence.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum RubricOutcome {
    Pass,
    BelowThreshold {
        average: f64,
        threshold: f64,
    },
    /// The judge said PIVOT: roll back, whatever the scores.
    Pivot,
    /// The judge said FINISH but the average is below the threshold: refused.
    FinishRefused {
        average: f64,
        threshold: f64,
    },
}

impl RubricOutcome {
    pub fn is_pass(&self) -> bool {
        matches!(self, RubricOutcome::Pass)
    }
}

/// The auditor's rubric result on one snapshot, carried in its report. The gate counts it through
/// the `rubric` evidence record; this is the detail behind it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricVerdict {
    pub threshold: f64,
    /// `None` when no usable score came back (no judge, the call failed, unparseable reply).
    pub score: Option<RubricScore>,
    pub outcome: Option<RubricOutcome>,
    /// The judge's reason (capped), or why there is no score.
    pub reason: String,
}

// Scores and thresholds are finite (parsed and validated), so equality is total.
impl Eq for RubricVerdict {}

impl RubricVerdict {
    pub fn passed(&self) -> bool {
        self.outcome.is_some_and(|o| o.is_pass())
    }

    pub fn average(&self) -> Option<f64> {
        self.score.as_ref().map(|s| s.weighted_average)
    }

    pub fn strategy(&self) -> Option<Strategy> {
        self.score.as_ref().and_then(|s| s.strategy)
    }

    /// One line for evidence excerpts, logs and the manager: `rubric 7.9/8.5 REFINE: below threshold`.
    pub fn summary(&self) -> String {
        match (&self.score, self.outcome) {
            (Some(score), Some(outcome)) => {
                let strategy = score.strategy.map(|s| format!(" {s}")).unwrap_or_default();
                let what = match outcome {
                    RubricOutcome::Pass => "pass".to_string(),
                    RubricOutcome::BelowThreshold { .. } => "below threshold".to_string(),
                    RubricOutcome::Pivot => "PIVOT: roll back and change approach".to_string(),
                    RubricOutcome::FinishRefused { .. } => {
                        "FINISH refused: below threshold".to_string()
                    }
                };
                format!(
                    "rubric {:.1}/{}{strategy}: {what}",
                    score.weighted_average, self.threshold
                )
            }
            _ => format!("rubric not scored: {}", self.reason),
        }
    }
}

/// Where the run's rubric stands on its current snapshot (for status, watch and the API).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RubricStanding {
    pub snapshot: String,
    pub average: Option<f64>,
    pub threshold: f64,
    pub strategy: Option<Strategy>,
    pub passed: bool,
}

impl Eq for RubricStanding {}

/// Pass when the average meets the threshold and the strategy is not PIVOT; PIVOT always wins.
pub fn rubric_outcome(score: &RubricScore, rubric: &Rubric) -> RubricOutcome {
    if score.strategy == Some(Strategy::Pivot) {
        return RubricOutcome::Pivot;
    }
    let (average, threshold) = (score.weighted_average, rubric.threshold);
    if average.is_finite() && average + THRESHOLD_EPSILON >= threshold {
        return RubricOutcome::Pass;
    }
    if score.strategy == Some(Strategy::Finish) {
        RubricOutcome::FinishRefused { average, threshold }
    } else {
        RubricOutcome::BelowThreshold { average, threshold }
    }
}

/// Parse the judge's reply against `rubric` (see the module docs for the layers).
pub fn parse_judge_output(text: &str, rubric: &Rubric) -> Result<RubricScore, RubricParseError> {
    if text.trim().is_empty() {
        return Err(RubricParseError::Empty);
    }
    let mut notes = Vec::new();
    let text = bounded_text(text, &mut notes);
    let dims = DimensionIndex::new(rubric);
    let json_values = json_candidates(&text);
    // Each layer yields its findings, or the notes on what it had to ignore.
    let attempt = |result: Result<Findings, Vec<String>>, notes: &mut Vec<String>| match result {
        Ok(found) => Some(found),
        Err(ignored) => {
            ignored.into_iter().for_each(|n| push_note(notes, n));
            None
        }
    };
    let picked = attempt(json_layer(&json_values, &dims), &mut notes)
        .map(|f| (ScoreLayer::Json, f))
        .or_else(|| {
            attempt(dimension_lines_layer(&text, &dims), &mut notes)
                .map(|f| (ScoreLayer::DimensionLines, f))
        })
        .or_else(|| {
            attempt(overall_line_layer(&text), &mut notes).map(|f| (ScoreLayer::OverallLine, f))
        });
    let Some((layer, found)) = picked else {
        return Err(RubricParseError::NoScores);
    };
    for note in found.notes {
        push_note(&mut notes, note);
    }
    let weighted_average = if found.scores.is_empty() {
        push_note(
            &mut notes,
            "no per-dimension scores; the overall score is used".to_string(),
        );
        found.overall.unwrap_or(0.0)
    } else {
        let missing: Vec<&str> = dims
            .dims
            .iter()
            .filter(|d| !found.scores.contains_key(&d.name))
            .map(|d| d.name.as_str())
            .collect();
        if !missing.is_empty() {
            push_note(
                &mut notes,
                format!(
                    "no score for {}; averaged over the {} dimension(s) scored",
                    missing.join(", "),
                    found.scores.len()
                ),
            );
        }
        let average = dims.weighted_average(&found.scores);
        if let Some(overall) = found.overall {
            if (overall - average).abs() > OVERALL_DISAGREEMENT {
                push_note(
                    &mut notes,
                    format!("the judge's overall {overall} differs from the weighted average {average:.3}"),
                );
            }
        }
        average
    };
    let strategy = found
        .strategy
        .or_else(|| {
            json_values
                .iter()
                .find_map(|v| findings_in_value(v, &dims).strategy)
        })
        .or_else(|| strategy_in_text(&text));
    Ok(RubricScore {
        scores: found.scores,
        weighted_average,
        strategy,
        layer,
        notes,
    })
}

// ----------------------------------------------------------------------------------------------
// Shared pieces

/// What one layer found.
#[derive(Debug, Default)]
struct Findings {
    scores: BTreeMap<String, f64>,
    overall: Option<f64>,
    strategy: Option<Strategy>,
    notes: Vec<String>,
}

impl Findings {
    fn record(&mut self, dimension: &str, read: Result<f64, String>) {
        match read {
            Ok(score) => match self.scores.get(dimension) {
                None => {
                    self.scores.insert(dimension.to_string(), score);
                }
                Some(first) if (first - score).abs() > f64::EPSILON => push_note(
                    &mut self.notes,
                    format!(
                        "'{dimension}' scored again as {score}; the first score {first} is kept"
                    ),
                ),
                Some(_) => {}
            },
            Err(why) => push_note(
                &mut self.notes,
                format!("score for '{dimension}' ignored: {why}"),
            ),
        }
    }

    fn record_overall(&mut self, read: Result<f64, String>) {
        match read {
            Ok(score) if self.overall.is_none() => self.overall = Some(score),
            Ok(_) => {}
            Err(why) => push_note(&mut self.notes, format!("overall score ignored: {why}")),
        }
    }
}

pub(crate) fn push_note(notes: &mut Vec<String>, note: String) {
    if notes.len() < MAX_NOTES {
        notes.push(note);
    }
}

fn cut_chars(text: &str, max: usize) -> &str {
    match text.char_indices().nth(max) {
        Some((cut, _)) => &text[..cut],
        None => text,
    }
}

/// The reply, cut to its head and tail when it is too long.
fn bounded_text<'a>(text: &'a str, notes: &mut Vec<String>) -> Cow<'a, str> {
    if text.len() <= MAX_JUDGE_OUTPUT_CHARS {
        return Cow::Borrowed(text);
    }
    let half = MAX_JUDGE_OUTPUT_CHARS / 2;
    let head_end = text.char_indices().nth(half).map_or(text.len(), |(i, _)| i);
    let tail_start = text
        .char_indices()
        .rev()
        .nth(half.saturating_sub(1))
        .map_or(0, |(i, _)| i);
    if tail_start <= head_end {
        return Cow::Borrowed(text);
    }
    push_note(
        notes,
        format!(
            "reply of {} bytes cut to its first and last {half} characters",
            text.len()
        ),
    );
    Cow::Owned(format!("{}\n{}", &text[..head_end], &text[tail_start..]))
}

#[derive(Debug)]
struct IndexedDimension {
    key: String,
    name: String,
    weight: f64,
}

/// The rubric's dimensions, looked up by normalised name.
#[derive(Debug)]
struct DimensionIndex {
    dims: Vec<IndexedDimension>,
}

impl DimensionIndex {
    fn new(rubric: &Rubric) -> Self {
        let dims = rubric
            .dimensions
            .iter()
            .map(|d| IndexedDimension {
                key: normalize_key(&d.name),
                name: d.name.clone(),
                weight: if d.weight.is_finite() && d.weight > 0.0 {
                    d.weight
                } else {
                    1.0
                },
            })
            .filter(|d| !d.key.is_empty())
            .collect();
        DimensionIndex { dims }
    }

    /// The rubric name a label or key refers to (`Correctness score (weight 2)` → `Correctness`).
    fn lookup(&self, raw: &str) -> Option<&str> {
        let key = label_key(raw)?;
        if key.is_empty() {
            return None;
        }
        let find = |k: &str| {
            self.dims
                .iter()
                .find(|d| d.key == k)
                .map(|d| d.name.as_str())
        };
        find(&key).or_else(|| {
            LABEL_SUFFIXES
                .iter()
                .filter_map(|suffix| key.strip_suffix(suffix))
                .filter(|k| !k.is_empty())
                .find_map(find)
        })
    }

    fn weighted_average(&self, scores: &BTreeMap<String, f64>) -> f64 {
        let (mut sum, mut weights) = (0.0, 0.0);
        for (name, score) in scores {
            let weight = self
                .dims
                .iter()
                .find(|d| &d.name == name)
                .map_or(1.0, |d| d.weight);
            sum += weight * score;
            weights += weight;
        }
        let average = sum / weights;
        if average.is_finite() {
            average
        } else {
            scores.values().sum::<f64>() / scores.len().max(1) as f64
        }
    }
}

#[cfg(test)]
mod tests;
