//! Parsing the manager's reply into the 6-way next step, defensively: a JSON object first
//! (fenced or bare), then LongHorizon-style control lines, else an error the manager is re-asked
//! with. [`next_step_schema`] is the JSON schema of that first, JSON layer, for servers that
//! constrain a reply to a schema (a model profile's `structured_output = "json_schema"`).

use serde::{Deserialize, Serialize};

use crate::json_span::balanced_end;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Cli,
    Gui,
    Done,
    Blocked,
    Invalid,
    Ask,
}

impl Route {
    /// Every route, in the order the manager's prompt lists them (`invalid` last).
    pub const ALL: [Route; 6] = [
        Route::Cli,
        Route::Gui,
        Route::Done,
        Route::Blocked,
        Route::Ask,
        Route::Invalid,
    ];

    /// Whether the manager may choose this route: `gui` only when a worker serves it, `invalid`
    /// never (the harness treats it as an unusable reply and asks again).
    pub fn offered(self, gui_offered: bool) -> bool {
        match self {
            Route::Cli | Route::Done | Route::Blocked | Route::Ask => true,
            Route::Gui => gui_offered,
            Route::Invalid => false,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Route::Cli => "cli",
            Route::Gui => "gui",
            Route::Done => "done",
            Route::Blocked => "blocked",
            Route::Invalid => "invalid",
            Route::Ask => "ask",
        }
    }

    pub fn parse_word(word: &str) -> Option<Route> {
        let w: String = word
            .trim()
            .trim_matches(|c: char| !c.is_ascii_alphanumeric())
            .to_ascii_lowercase();
        match w.as_str() {
            "cli" => Some(Route::Cli),
            "gui" => Some(Route::Gui),
            "done" => Some(Route::Done),
            "blocked" => Some(Route::Blocked),
            "invalid" => Some(Route::Invalid),
            "ask" => Some(Route::Ask),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextStep {
    pub route: Route,
    /// The bounded instruction (cli/gui), the question (ask) or the reason (blocked/done).
    pub task: String,
    /// The manager's own summary of where the task stands; carried into the next prompt.
    pub task_state: Option<String>,
    /// Which layer parsed the reply.
    pub parsed_from: ParseLayer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseLayer {
    Json,
    Lines,
    /// `Next:` and `Task:` run together on one line (weak models do this often).
    Inline,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NextStepError {
    #[error("the reply is empty")]
    Empty,
    #[error("no `Next:` line and no JSON object with a `next` key")]
    NoRoute,
    #[error("`Next: {word}` is not one of cli, gui, done, blocked, invalid, ask")]
    UnknownRoute { word: String },
    #[error("`Next: {route}` needs a non-empty `Task:`")]
    MissingTask { route: String },
    #[error("the `{route}` route is not available here (no worker serves it); use cli")]
    RouteNotOffered { route: String },
}

const TASK_KEYS: &[&str] = &["task", "instruction", "instructions", "question", "reason"];
const STATE_KEYS: &[&str] = &["current_task_state", "task_state", "state"];
const ROUTE_KEYS: &[&str] = &["next", "next_step", "route"];

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

/// The keys of a structured reply: each is the first of the names the JSON layer reads for it.
const SCHEMA_STATE_KEY: &str = STATE_KEYS[0];
const SCHEMA_ROUTE_KEY: &str = ROUTE_KEYS[0];
const SCHEMA_TASK_KEY: &str = TASK_KEYS[0];

/// The name [`next_step_schema`] is sent under (OpenAI's `response_format.json_schema.name`).
pub const NEXT_STEP_SCHEMA_NAME: &str = "next_step";

/// The JSON schema of the manager's reply as [`parse_next_step`] reads it first:
/// `{"current_task_state": string, "next": route, "task": string}`, every key required, no
/// other key (OpenAI's strict mode wants both). The route enum holds the routes the manager may
/// choose ([`Route::offered`]): no `invalid`, and `gui` only when `gui_offered`. The schema
/// cannot say that `cli`, `gui` and `ask` need a non-empty task; the parser still refuses an
/// empty one, and a reply that is malformed anyway goes through the defensive layers as usual.
pub fn next_step_schema(gui_offered: bool) -> serde_json::Value {
    let routes: Vec<&str> = Route::ALL
        .into_iter()
        .filter(|route| route.offered(gui_offered))
        .map(Route::as_str)
        .collect();
    let mut properties = serde_json::Map::new();
    properties.insert(
        SCHEMA_STATE_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "description": "One sentence on what is true now, from the audit evidence."
        }),
    );
    properties.insert(
        SCHEMA_ROUTE_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "enum": routes,
            "description": "The next step."
        }),
    );
    properties.insert(
        SCHEMA_TASK_KEY.to_string(),
        serde_json::json!({
            "type": "string",
            "description": "cli/gui: one concrete instruction for the executor, naming files \
                            and exact content; ask: the question; done/blocked: the reason."
        }),
    );
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": [SCHEMA_STATE_KEY, SCHEMA_ROUTE_KEY, SCHEMA_TASK_KEY],
        "additionalProperties": false
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let ok: &[(&str, Route, &str, ParseLayer)] = &[
            ("Current task state: empty\nNext: cli\nTask: create hello.py", Route::Cli, "create hello.py", ParseLayer::Lines),
            ("**Next:** cli\n**Task:** write it", Route::Cli, "write it", ParseLayer::Lines),
            ("- Next: CLI.\n- Task: a\nmore detail", Route::Cli, "a\nmore detail", ParseLayer::Lines),
            ("Next: done\nTask: all checks pass", Route::Done, "all checks pass", ParseLayer::Lines),
            ("Next: done", Route::Done, "", ParseLayer::Lines),
            ("Next: blocked", Route::Blocked, "", ParseLayer::Lines),
            ("Next: ask\nQuestion: which file?", Route::Ask, "which file?", ParseLayer::Lines),
            ("```json\n{\"next\": \"cli\", \"task\": \"do x\", \"current_task_state\": \"s\"}\n```", Route::Cli, "do x", ParseLayer::Json),
            ("Sure! {\"Next\": \"gui\", \"Task\": \"click\"} ok", Route::Gui, "click", ParseLayer::Json),
            ("{\"next_step\": \"invalid\", \"reason\": \"?\"}", Route::Invalid, "?", ParseLayer::Json),
            ("{\"other\": 1}\nNext: cli\nTask: t", Route::Cli, "t", ParseLayer::Lines),
            ("### Next: cli\n### Task: t {with braces}", Route::Cli, "t {with braces}", ParseLayer::Lines),
            ("Current task state: nothing yet. Next: cli. Task: create hello.py", Route::Cli, "create hello.py", ParseLayer::Inline),
            ("Next: cli Task: fix the bug\nin wordcount.py", Route::Cli, "fix the bug\nin wordcount.py", ParseLayer::Inline),
            ("I will go on. next: ASK, question: which file?", Route::Ask, "which file?", ParseLayer::Inline),
            ("Next: done", Route::Done, "", ParseLayer::Lines),
        ];
        for (raw, route, task, layer) in ok {
            let step = parse_next_step(raw).unwrap_or_else(|e| panic!("{raw:?}: {e}"));
            assert_eq!(step.route, *route, "{raw:?}");
            assert_eq!(step.task, *task, "{raw:?}");
            assert_eq!(step.parsed_from, *layer, "{raw:?}");
        }
    }

    #[test]
    fn error_table() {
        let bad: &[(&str, fn(&NextStepError) -> bool)] = &[
            ("", |e| matches!(e, NextStepError::Empty)),
            ("   \n ", |e| matches!(e, NextStepError::Empty)),
            ("I think we should write the file.", |e| {
                matches!(e, NextStepError::NoRoute)
            }),
            ("Next: maybe\nTask: x", |e| {
                matches!(e, NextStepError::UnknownRoute { .. })
            }),
            ("Next: cli", |e| {
                matches!(e, NextStepError::MissingTask { .. })
            }),
            ("Current task state: next: maybe later", |e| {
                matches!(e, NextStepError::NoRoute)
            }),
            ("The context: next: cli", |e| {
                matches!(e, NextStepError::MissingTask { .. })
            }),
            ("Next: cli\nTask:   ", |e| {
                matches!(e, NextStepError::MissingTask { .. })
            }),
            ("{\"next\": \"fly\"}", |e| {
                matches!(e, NextStepError::UnknownRoute { .. })
            }),
            ("{\"next\": \"ask\"}", |e| {
                matches!(e, NextStepError::MissingTask { .. })
            }),
            ("{\"next\": ", |e| matches!(e, NextStepError::NoRoute)),
        ];
        for (raw, check) in bad {
            let err = parse_next_step(raw).unwrap_err();
            assert!(check(&err), "{raw:?}: {err:?}");
        }
    }

    #[test]
    fn state_is_carried() {
        let s = parse_next_step("Current task state: hello.py missing\nNext: cli\nTask: create it")
            .unwrap();
        assert_eq!(s.task_state.as_deref(), Some("hello.py missing"));
    }

    /// Whether `value` conforms to `schema`, for the subset of JSON Schema [`next_step_schema`]
    /// uses (`type` object/string, `properties`, `enum`, `required`, `additionalProperties`).
    fn conforms(schema: &serde_json::Value, value: &serde_json::Value) -> bool {
        match schema["type"].as_str() {
            Some("object") => {
                let Some(obj) = value.as_object() else {
                    return false;
                };
                let props = schema["properties"]
                    .as_object()
                    .cloned()
                    .unwrap_or_default();
                let required = schema["required"].as_array().cloned().unwrap_or_default();
                let closed = schema["additionalProperties"] == serde_json::json!(false);
                required
                    .iter()
                    .all(|k| k.as_str().is_some_and(|k| obj.contains_key(k)))
                    && obj.iter().all(|(k, v)| match props.get(k) {
                        Some(sub) => conforms(sub, v),
                        None => !closed,
                    })
            }
            Some("string") => {
                value.is_string()
                    && schema["enum"]
                        .as_array()
                        .is_none_or(|allowed| allowed.contains(value))
            }
            _ => false,
        }
    }

    fn schema_routes(schema: &serde_json::Value) -> Vec<String> {
        schema["properties"]["next"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn schema_routes_are_the_offered_routes() {
        let cases: &[(bool, &[&str])] = &[
            (true, &["cli", "gui", "done", "blocked", "ask"]),
            (false, &["cli", "done", "blocked", "ask"]),
        ];
        for (gui_offered, want) in cases {
            let routes = schema_routes(&next_step_schema(*gui_offered));
            assert_eq!(routes, *want, "gui_offered={gui_offered}");
            // Every enum word is a route the parser knows, spelled as the route type spells it,
            // and every route the type has is either offered or deliberately left out.
            for word in &routes {
                let route = Route::parse_word(word).unwrap();
                assert_eq!(route.as_str(), word);
            }
            for route in Route::ALL {
                assert_eq!(
                    routes.iter().any(|w| w == route.as_str()),
                    route.offered(*gui_offered),
                    "{route:?}"
                );
            }
        }
        assert!(!Route::Invalid.offered(true));
    }

    #[test]
    fn schema_keys_are_read_by_the_json_layer_in_line_order() {
        let schema = next_step_schema(false);
        let keys: Vec<&str> = schema["properties"]
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        // The order the grammar-constrained server writes them: as the three lines.
        assert_eq!(keys, ["current_task_state", "next", "task"]);
        assert!(STATE_KEYS.contains(&keys[0]));
        assert!(ROUTE_KEYS.contains(&keys[1]));
        assert!(TASK_KEYS.contains(&keys[2]));
        assert_eq!(schema["required"], serde_json::json!(keys));
        assert_eq!(schema["additionalProperties"], serde_json::json!(false));
    }

    #[test]
    fn conforming_replies_parse_through_the_json_layer() {
        for gui_offered in [false, true] {
            let schema = next_step_schema(gui_offered);
            for word in schema_routes(&schema) {
                let reply = serde_json::json!({
                    "current_task_state": "hello.py is missing",
                    "next": word,
                    "task": "create hello.py that prints exactly: hello, loopgate",
                });
                assert!(conforms(&schema, &reply), "{reply}");
                // Compact or pretty, as servers write it.
                for raw in [
                    reply.to_string(),
                    serde_json::to_string_pretty(&reply).unwrap(),
                ] {
                    let step = parse_next_step(&raw).unwrap_or_else(|e| panic!("{raw}: {e}"));
                    assert_eq!(step.route.as_str(), word);
                    assert_eq!(step.parsed_from, ParseLayer::Json);
                    assert_eq!(
                        step.task,
                        "create hello.py that prints exactly: hello, loopgate"
                    );
                    assert_eq!(step.task_state.as_deref(), Some("hello.py is missing"));
                }
            }
        }
    }

    #[test]
    fn schema_conformance_table() {
        let schema = next_step_schema(false);
        let cases: &[(&str, bool)] = &[
            (
                r#"{"current_task_state": "s", "next": "done", "task": ""}"#,
                true,
            ),
            (
                r#"{"current_task_state": "s", "next": "gui", "task": "t"}"#,
                false,
            ),
            (
                r#"{"current_task_state": "s", "next": "invalid", "task": "t"}"#,
                false,
            ),
            (r#"{"current_task_state": "s", "next": "cli"}"#, false),
            (
                r#"{"current_task_state": "s", "next": "cli", "task": "t", "x": 1}"#,
                false,
            ),
            (
                r#"{"current_task_state": 1, "next": "cli", "task": "t"}"#,
                false,
            ),
        ];
        for (raw, want) in cases {
            let value: serde_json::Value = serde_json::from_str(raw).unwrap();
            assert_eq!(conforms(&schema, &value), *want, "{raw}");
        }
        // What the schema cannot express the parser still refuses.
        let empty_ask = r#"{"current_task_state": "s", "next": "ask", "task": ""}"#;
        assert!(conforms(&schema, &serde_json::from_str(empty_ask).unwrap()));
        assert!(matches!(
            parse_next_step(empty_ask),
            Err(NextStepError::MissingTask { .. })
        ));
    }
}
