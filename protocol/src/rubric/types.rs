//! The rubric and what judging it yields: dimensions and threshold, scores, the strategy, the
//! outcome the gate counts, and the standing kept on the run.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::keys::normalize_key;

/// Replies longer than this many bytes are cut to their first and last `MAX_JUDGE_OUTPUT_CHARS / 2`
/// characters before parsing.
pub const MAX_JUDGE_OUTPUT_CHARS: usize = 64 * 1024;
/// Scores are on this scale.
pub const SCORE_SCALE: f64 = 10.0;
/// An average this close below the threshold still meets it (floating-point noise).
const THRESHOLD_EPSILON: f64 = 1e-9;

fn default_weight() -> f64 {
    1.0
}

/// One scored dimension of the rubric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RubricStanding {
    pub snapshot: String,
    #[cfg_attr(feature = "openapi", schema(required = true))]
    pub average: Option<f64>,
    pub threshold: f64,
    #[cfg_attr(feature = "openapi", schema(required = true))]
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
