//! Layer 1: scores from a JSON value in the judge's reply (fenced block or standing in the prose).

use serde_json::{Map, Value};

use super::findings::{push_note, DimensionIndex, Findings};
use super::score_text::{
    first_score, key_in, scaled_score, strategy_value, Scale, MAX_LABEL_CHARS, NAME_KEYS,
    OVERALL_KEYS, SCORES_KEYS, STRATEGY_KEYS, VALUE_KEYS,
};
use crate::prompt_text::head_chars;
use loopgate_common::json_span::balanced_end;
use loopgate_models::tool_call_recovery::parse_json_lenient;

/// At most this many JSON values are kept per text region, and four times as many `{`/`[`
/// positions tried.
const MAX_JSON_STARTS: usize = 64;
/// At most this many fenced blocks are looked at.
const MAX_FENCES: usize = 16;
/// Wrapper objects (`{"evaluation": {"scores": ...}}`) are searched this deep.
const MAX_JSON_DEPTH: usize = 4;
const MAX_NOTE_NAME_CHARS: usize = 60;

/// A JSON value as a score: a number, a string holding one, or `{"score": ...}`.
fn json_score(value: &Value) -> Option<Result<f64, String>> {
    match value {
        Value::Number(n) => n.as_f64().map(|v| scaled_score(v, Scale::Bare)),
        Value::String(s) => first_score(head_chars(s, MAX_LABEL_CHARS)),
        Value::Object(map) => {
            map.iter()
                .filter(|(k, _)| key_in(k, VALUE_KEYS))
                .find_map(|(_, v)| match v {
                    Value::Object(_) => None,
                    other => json_score(other),
                })
        }
        _ => None,
    }
}

/// JSON values worth reading, in order: fenced blocks first, then values standing in the prose.
pub(super) fn json_candidates(text: &str) -> Vec<Value> {
    let mut values = Vec::new();
    for body in fenced_bodies(text) {
        match parse_json_lenient(body) {
            Some(value @ (Value::Object(_) | Value::Array(_))) => values.push(value),
            _ => values.extend(bare_json_values(body)),
        }
    }
    values.extend(bare_json_values(text));
    values
}

/// Bodies of ```` ``` ```` fences whose info string is empty or JSON-ish.
fn fenced_bodies(text: &str) -> impl Iterator<Item = &str> {
    text.split("```")
        .skip(1)
        .step_by(2)
        .take(MAX_FENCES)
        .filter_map(|block| {
            let (info, body) = block.split_once('\n').unwrap_or(("", block));
            let info = info.trim().to_ascii_lowercase();
            if info.starts_with('{') || info.starts_with('[') {
                return Some(block);
            }
            matches!(
                info.as_str(),
                "" | "json" | "jsonc" | "json5" | "js" | "javascript"
            )
            .then_some(body)
        })
}

/// Balanced `{...}` / `[...]` spans in `text` that parse, outermost first, at most
/// `MAX_JSON_STARTS` attempts.
fn bare_json_values(text: &str) -> Vec<Value> {
    let mut values = Vec::new();
    let mut covered_until = 0;
    let starts = text
        .char_indices()
        .filter(|&(_, c)| c == '{' || c == '[')
        .map(|(i, _)| i);
    for start in starts.take(MAX_JSON_STARTS * 4) {
        if start < covered_until {
            continue;
        }
        let Some(end) = balanced_end(text, start) else {
            continue;
        };
        if let Some(value @ (Value::Object(_) | Value::Array(_))) =
            text.get(start..end).and_then(parse_json_lenient)
        {
            values.push(value);
            covered_until = end;
        }
        if values.len() >= MAX_JSON_STARTS {
            break;
        }
    }
    values
}

/// The first JSON value with per-dimension scores, else the first with a usable overall.
/// Otherwise the notes on what was ignored.
pub(super) fn json_layer(values: &[Value], dims: &DimensionIndex) -> Result<Findings, Vec<String>> {
    let mut overall_only = None;
    let mut ignored = Vec::new();
    for value in values {
        let mut found = findings_in_value(value, dims);
        if !found.scores.is_empty() {
            return Ok(found);
        }
        if found.overall.is_some() && overall_only.is_none() {
            overall_only = Some(found);
        } else {
            ignored.append(&mut found.notes);
        }
    }
    overall_only.ok_or(ignored)
}

pub(super) fn findings_in_value(value: &Value, dims: &DimensionIndex) -> Findings {
    let mut found = Findings::default();
    match value {
        Value::Object(map) => found = findings_in_object(map, dims, 0),
        Value::Array(items) => collect_score_list(items, dims, &mut found),
        _ => {}
    }
    found
}

fn findings_in_object(map: &Map<String, Value>, dims: &DimensionIndex, depth: usize) -> Findings {
    let mut found = Findings::default();
    if let Some((name, read)) = named_score(map, dims) {
        found.record(name, read);
        return found;
    }
    for (key, value) in map {
        if let Some(name) = dims.lookup(key) {
            if let Some(read) = json_score(value) {
                found.record(name, read);
            }
        } else if key_in(key, SCORES_KEYS) {
            match value {
                Value::Object(scores) => collect_score_map(scores, dims, &mut found),
                Value::Array(items) => collect_score_list(items, dims, &mut found),
                scalar => {
                    if let Some(read) = json_score(scalar) {
                        found.record_overall(read);
                    }
                }
            }
        } else if key_in(key, OVERALL_KEYS) {
            if let Some(read) = json_score(value) {
                found.record_overall(read);
            }
        } else if key_in(key, STRATEGY_KEYS) {
            if let (None, Value::String(s)) = (found.strategy, value) {
                found.strategy = strategy_value(s);
            }
        }
    }
    if found.scores.is_empty() && depth < MAX_JSON_DEPTH {
        let nested = map.values().find_map(|value| match value {
            Value::Object(inner) => {
                Some(findings_in_object(inner, dims, depth + 1)).filter(|f| !f.scores.is_empty())
            }
            _ => None,
        });
        if let Some(mut nested) = nested {
            nested.overall = nested.overall.or(found.overall);
            nested.strategy = nested.strategy.or(found.strategy);
            return nested;
        }
    }
    found
}

/// `{"name": "Correctness", "score": 8}` (any of the name/value key synonyms).
fn named_score<'a>(
    map: &Map<String, Value>,
    dims: &'a DimensionIndex,
) -> Option<(&'a str, Result<f64, String>)> {
    let name = map
        .iter()
        .filter(|(k, _)| key_in(k, NAME_KEYS))
        .find_map(|(_, v)| v.as_str().and_then(|s| dims.lookup(s)))?;
    let read = map
        .iter()
        .filter(|(k, _)| key_in(k, VALUE_KEYS))
        .find_map(|(_, v)| json_score(v))?;
    Some((name, read))
}

fn collect_score_map(scores: &Map<String, Value>, dims: &DimensionIndex, found: &mut Findings) {
    for (key, value) in scores {
        if let Some(name) = dims.lookup(key) {
            if let Some(read) = json_score(value) {
                found.record(name, read);
            }
        } else if key_in(key, OVERALL_KEYS) {
            if let Some(read) = json_score(value) {
                found.record_overall(read);
            }
        } else {
            push_note(
                &mut found.notes,
                format!(
                    "unknown dimension '{}' ignored",
                    head_chars(key, MAX_NOTE_NAME_CHARS)
                ),
            );
        }
    }
}

fn collect_score_list(items: &[Value], dims: &DimensionIndex, found: &mut Findings) {
    for item in items {
        let Value::Object(map) = item else {
            continue;
        };
        if let Some((name, read)) = named_score(map, dims) {
            found.record(name, read);
        } else if map.iter().any(|(k, _)| key_in(k, NAME_KEYS)) {
            push_note(
                &mut found.notes,
                "a list entry names no rubric dimension or has no score; ignored".to_string(),
            );
        } else {
            collect_score_map(map, dims, found);
        }
    }
}
