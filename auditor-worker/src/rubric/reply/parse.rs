//! Reading a judge's reply in three layers (JSON, dimension lines, an overall line); the first
//! that yields a usable score wins.

use super::findings::{bounded_text, push_note, DimensionIndex, Findings};
use super::judge_json::{findings_in_value, json_candidates, json_layer};
use super::judge_lines::{dimension_lines_layer, overall_line_layer, strategy_in_text};
use loopgate_protocol::rubric::{Rubric, RubricParseError, RubricScore, ScoreLayer};

/// The judge's own overall differing from the computed average by more than this is noted.
const OVERALL_DISAGREEMENT: f64 = 0.05;

/// Parse the judge's reply against `rubric` (see the module docs for the layers).
pub(crate) fn parse_rubric_reply(
    text: &str,
    rubric: &Rubric,
) -> Result<RubricScore, RubricParseError> {
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
    let Some((layer, mut found)) = picked else {
        return Err(RubricParseError::NoScores);
    };
    for note in std::mem::take(&mut found.notes) {
        push_note(&mut notes, note);
    }
    let weighted_average = weighted_average(&found, &dims, &mut notes);
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

/// The weighted average of the scores `found`, or the judge's overall score without any, with
/// notes on dimensions left unscored and an overall that disagrees.
fn weighted_average(found: &Findings, dims: &DimensionIndex, notes: &mut Vec<String>) -> f64 {
    if found.scores.is_empty() {
        push_note(
            notes,
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
                notes,
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
                    notes,
                    format!("the judge's overall {overall} differs from the weighted average {average:.3}"),
                );
            }
        }
        average
    }
}
