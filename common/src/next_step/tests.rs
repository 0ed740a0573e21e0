use super::parse::{ROUTE_KEYS, STATE_KEYS, TASK_KEYS};
use super::*;

#[test]
#[rustfmt::skip]
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
