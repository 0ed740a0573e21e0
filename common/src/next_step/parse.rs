//! The layers that read a reply: a JSON object first (fenced or bare), then control lines,
//! then `Next:` and `Task:` run together on one line.

use super::step::{NextStep, NextStepError, ParseLayer, Route};
use crate::json_span::balanced_end;

/// The keys the JSON layer reads for the task, the state and the route, each in any case and
/// with spaces or dashes for underscores; the first of each is the structured reply's key.
pub(super) const TASK_KEYS: &[&str] =
    &["task", "instruction", "instructions", "question", "reason"];
pub(super) const STATE_KEYS: &[&str] = &["current_task_state", "task_state", "state"];
pub(super) const ROUTE_KEYS: &[&str] = &["next", "next_step", "route"];

pub fn parse_next_step(raw: &str) -> Result<NextStep, NextStepError> {
    let text = raw.trim();
    if text.is_empty() {
        return Err(NextStepError::Empty);
    }
    let mut first_error = None;
    for object in json_objects(text) {
        match from_json(&object) {
            Some(Ok(step)) => return Ok(step),
            Some(Err(e)) => {
                first_error.get_or_insert(e);
            }
            None => {}
        }
    }
    match from_lines(text) {
        Ok(step) => Ok(step),
        Err(e @ (NextStepError::NoRoute | NextStepError::MissingTask { .. })) => {
            match (from_inline(text), e) {
                (Some(Ok(step)), _) => Ok(step),
                // An inline route is more specific than "no route at all".
                (Some(Err(inline)), NextStepError::NoRoute) => Err(first_error.unwrap_or(inline)),
                (None, NextStepError::NoRoute) => {
                    Err(first_error.unwrap_or(NextStepError::NoRoute))
                }
                (_, other) => Err(other),
            }
        }
        Err(e) => Err(e),
    }
}

/// The last resort: `... Next: cli. Task: write it` on one line. The first `next:` followed by
/// a route word is the route; the task is what follows the first `task:` (or `question:` /
/// `reason:`) after it; the state is what follows `current task state:` up to the route.
/// `None` when no `next:` marker names a route.
fn from_inline(text: &str) -> Option<Result<NextStep, NextStepError>> {
    // ASCII lowercasing keeps byte offsets, so positions found in `lower` index `text`.
    let lower = text.to_ascii_lowercase();
    let (route, after_route, next_at) = lower.match_indices("next:").find_map(|(at, m)| {
        let rest = &text[at + m.len()..];
        let word = rest.split_whitespace().next()?;
        let route = Route::parse_word(word)?;
        let word_end = at + m.len() + rest.find(word)? + word.len();
        Some((route, word_end, at))
    })?;
    let task = ["task:", "question:", "reason:"]
        .iter()
        .filter_map(|marker| {
            lower[after_route..]
                .find(marker)
                .map(|i| after_route + i + marker.len())
        })
        .min()
        .map(|start| text[start..].trim().to_string())
        .unwrap_or_default();
    let state = lower.find("current task state:").and_then(|i| {
        let start = i + "current task state:".len();
        (start <= next_at).then(|| {
            text[start..next_at]
                .trim()
                .trim_end_matches(['.', ',', ';'])
                .to_string()
        })
    });
    Some(finish(route, task, state, ParseLayer::Inline))
}

fn finish(
    route: Route,
    task: String,
    task_state: Option<String>,
    layer: ParseLayer,
) -> Result<NextStep, NextStepError> {
    let task = task.trim().to_string();
    if task.is_empty() && matches!(route, Route::Cli | Route::Gui | Route::Ask) {
        return Err(NextStepError::MissingTask {
            route: route.as_str().to_string(),
        });
    }
    Ok(NextStep {
        route,
        task,
        task_state: task_state
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty()),
        parsed_from: layer,
    })
}

fn string_field(obj: &serde_json::Map<String, serde_json::Value>, keys: &[&str]) -> Option<String> {
    for (k, v) in obj {
        let key = k.to_ascii_lowercase().replace([' ', '-'], "_");
        if keys.contains(&key.as_str()) {
            match v {
                serde_json::Value::String(s) => return Some(s.clone()),
                serde_json::Value::Null => {}
                other => return Some(other.to_string()),
            }
        }
    }
    None
}

/// `None` when the object has no route key at all (not a next-step object).
fn from_json(value: &serde_json::Value) -> Option<Result<NextStep, NextStepError>> {
    let obj = value.as_object()?;
    let word = string_field(obj, ROUTE_KEYS)?;
    let Some(route) = Route::parse_word(&word) else {
        return Some(Err(NextStepError::UnknownRoute { word }));
    };
    let task = string_field(obj, TASK_KEYS).unwrap_or_default();
    let state = string_field(obj, STATE_KEYS);
    Some(finish(route, task, state, ParseLayer::Json))
}

/// Most `{` positions tried as the start of a JSON object (bounds the work on hostile text).
const MAX_JSON_STARTS: usize = 64;

/// Balanced `{...}` spans that parse as JSON, in order of appearance.
fn json_objects(text: &str) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let mut covered_until = 0;
    let starts = text.match_indices('{').map(|(i, _)| i);
    for start in starts.take(MAX_JSON_STARTS) {
        if start < covered_until {
            continue;
        }
        let Some(end) = balanced_end(text, start) else {
            continue;
        };
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(&text[start..end]) {
            out.push(v);
            covered_until = end;
        }
    }
    out
}

#[derive(Clone, Copy, PartialEq)]
enum Header {
    State,
    Next,
    Task,
}

/// Recognise `Header: value` lines, tolerating markdown decoration (`**Next:**`, `- Next:`, `### Task:`).
fn header_of(line: &str) -> Option<(Header, String)> {
    let cleaned: String = line
        .trim()
        .trim_start_matches(['-', '*', '#', '>', ' '])
        .to_string();
    let (head, rest) = cleaned.split_once(':')?;
    let head = head.trim().trim_matches('*').trim().to_ascii_lowercase();
    let rest = rest.trim().trim_start_matches('*').trim().to_string();
    let header = match head.as_str() {
        "current task state" | "current_task_state" | "task state" => Header::State,
        "next" | "next step" | "next_step" | "route" => Header::Next,
        "task" | "instruction" | "question" | "reason" => Header::Task,
        _ => return None,
    };
    Some((header, rest))
}

fn from_lines(text: &str) -> Result<NextStep, NextStepError> {
    let mut state: Option<String> = None;
    let mut route_word: Option<String> = None;
    let mut task: Option<String> = None;
    let mut current: Option<Header> = None;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            continue;
        }
        if let Some((header, value)) = header_of(line) {
            // The first occurrence of each header wins; later repeats are ignored.
            let slot = match header {
                Header::State => &mut state,
                Header::Next => &mut route_word,
                Header::Task => &mut task,
            };
            if slot.is_none() {
                *slot = Some(value);
                current = Some(header);
            } else {
                current = None;
            }
            continue;
        }
        // Continuation lines extend a multi-line Task or state.
        match current {
            Some(Header::Task) => {
                if let Some(t) = task.as_mut() {
                    t.push('\n');
                    t.push_str(line);
                }
            }
            Some(Header::State) => {
                if let Some(s) = state.as_mut() {
                    s.push('\n');
                    s.push_str(line);
                }
            }
            _ => {}
        }
    }
    let word = route_word.ok_or(NextStepError::NoRoute)?;
    let first = word.split_whitespace().next().unwrap_or("").to_string();
    let route =
        Route::parse_word(&first).ok_or(NextStepError::UnknownRoute { word: word.clone() })?;
    finish(route, task.unwrap_or_default(), state, ParseLayer::Lines)
}
