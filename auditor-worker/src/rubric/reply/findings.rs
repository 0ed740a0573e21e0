//! What the layers share: the findings one layer yields, the notes on what was ignored, the
//! reply cut to a bounded size, and the rubric's dimensions looked up by normalised name.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::score_text::{label_key, LABEL_SUFFIXES};
use loopgate_protocol::rubric::normalize_key;
use loopgate_protocol::rubric::{Rubric, Strategy, MAX_JUDGE_OUTPUT_CHARS};

const MAX_NOTES: usize = 32;

/// What one layer found.
#[derive(Debug, Default)]
pub(super) struct Findings {
    pub(super) scores: BTreeMap<String, f64>,
    pub(super) overall: Option<f64>,
    pub(super) strategy: Option<Strategy>,
    pub(super) notes: Vec<String>,
}

impl Findings {
    pub(super) fn record(&mut self, dimension: &str, read: Result<f64, String>) {
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

    pub(super) fn record_overall(&mut self, read: Result<f64, String>) {
        match read {
            Ok(score) if self.overall.is_none() => self.overall = Some(score),
            Ok(_) => {}
            Err(why) => push_note(&mut self.notes, format!("overall score ignored: {why}")),
        }
    }
}

pub(super) fn push_note(notes: &mut Vec<String>, note: String) {
    if notes.len() < MAX_NOTES {
        notes.push(note);
    }
}

/// The reply, cut to its head and tail when it is too long.
pub(super) fn bounded_text<'a>(text: &'a str, notes: &mut Vec<String>) -> Cow<'a, str> {
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
pub(super) struct IndexedDimension {
    pub(super) key: String,
    pub(super) name: String,
    pub(super) weight: f64,
}

/// The rubric's dimensions, looked up by normalised name.
#[derive(Debug)]
pub(super) struct DimensionIndex {
    pub(super) dims: Vec<IndexedDimension>,
}

impl DimensionIndex {
    pub(super) fn new(rubric: &Rubric) -> Self {
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
    pub(super) fn lookup(&self, raw: &str) -> Option<&str> {
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

    pub(super) fn weighted_average(&self, scores: &BTreeMap<String, f64>) -> f64 {
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
