//! The OpenAPI schemas of the request bodies state what the manager's validation accepts:
//! every range, length and pattern declared on the types (`#[schema(...)]`) is checked here
//! against the code that validates them, so the document and the server cannot drift apart.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine as _;
use loopgate_api::{AnswerRequest, ContinueRequest, InstructRequest, UploadedFile};
use loopgate_common::budget::BudgetFile;
use loopgate_common::decide::{validate_instruction, INSTRUCTION_MAX_CHARS};
use loopgate_common::state::{is_git_object_id, RepoOrigin, MAX_REF_NAME_CHARS};
use loopgate_common::task::{
    name_schemas, AcceptanceFile, TaskFile, MAX_CHECK_TIMEOUT_SECS, MAX_CRITERIA, MAX_GOAL_CHARS,
};
use loopgate_protocol::gui::{GuiFile, MAX_SERVE_CHARS};
use loopgate_protocol::snapshot::validate_relative_path;
use regex::Regex;
use serde_json::{json, Value};
use utoipa::PartialSchema;

fn schema<T: PartialSchema>() -> Value {
    serde_json::to_value(T::schema()).unwrap()
}

/// A property of an object schema (an `Option`'s schema is the same with `null` allowed).
fn property(schema: &Value, name: &str) -> Value {
    schema["properties"][name].clone()
}

fn pattern(property: &Value) -> Regex {
    let text = property["pattern"]
        .as_str()
        .unwrap_or_else(|| panic!("no pattern: {property}"));
    Regex::new(text).unwrap()
}

/// Rust's whitespace (what `str::trim` drops) as a regex class body: `\u0009-\u000d...`.
fn whitespace_class() -> String {
    let mut class = String::new();
    let spaces: Vec<u32> = (0..=0x10FFFF_u32)
        .filter_map(char::from_u32)
        .filter(|c| c.is_whitespace())
        .map(u32::from)
        .collect();
    let mut i = 0;
    while i < spaces.len() {
        let mut j = i;
        while j + 1 < spaces.len() && spaces[j + 1] == spaces[j] + 1 {
            j += 1;
        }
        class.push_str(&format!("\\u{:04x}", spaces[i]));
        if j > i + 1 {
            class.push_str(&format!("-\\u{:04x}", spaces[j]));
        } else if j == i + 1 {
            class.push_str(&format!("\\u{:04x}", spaces[j]));
        }
        i = j + 1;
    }
    class
}

fn task(extra: Value) -> TaskFile {
    let mut base = json!({"goal": "g", "acceptance": [{"id": "a", "check": "true"}]});
    for (k, v) in extra.as_object().unwrap() {
        base[k] = v.clone();
    }
    serde_json::from_value(base).unwrap()
}

/// The field a task's validation refuses, or None when it is valid.
fn refused_field(file: &TaskFile) -> Option<String> {
    file.validate()
        .err()
        .map(|e| e.field_name().unwrap_or("?").to_string())
}

#[test]
fn not_blank_means_not_only_what_trim_drops() {
    let not_blank = format!("[^{}]", whitespace_class());
    let texts = [
        property(&schema::<TaskFile>(), "goal"),
        property(&schema::<AcceptanceFile>(), "check"),
        property(&schema::<AnswerRequest>(), "text"),
        property(&schema::<InstructRequest>(), "text"),
        property(&schema::<ContinueRequest>(), "goal"),
    ];
    for text in &texts {
        assert_eq!(text["pattern"], not_blank.as_str(), "{text}");
    }
    let re = pattern(&texts[0]);
    for c in (0..=0x10FFFF_u32).filter_map(char::from_u32) {
        assert_eq!(re.is_match(&c.to_string()), !c.is_whitespace(), "{c:?}");
    }
    for (text, ok) in [(" \t\u{3000}\n", false), (" x ", true), ("", false)] {
        assert_eq!(re.is_match(text), ok, "{text:?}");
        assert_eq!(validate_instruction(text).is_ok(), ok, "{text:?}");
        assert_eq!(refused_field(&task(json!({"goal": text}))).is_none(), ok);
    }
}

#[test]
fn lengths_and_counts_are_the_validated_ones() {
    let task_schema = schema::<TaskFile>();
    assert_eq!(property(&task_schema, "goal")["maxLength"], MAX_GOAL_CHARS);
    assert_eq!(
        property(&schema::<ContinueRequest>(), "goal")["maxLength"],
        MAX_GOAL_CHARS
    );
    let longest = "g".repeat(MAX_GOAL_CHARS);
    assert_eq!(refused_field(&task(json!({"goal": longest}))), None);
    let over = "g".repeat(MAX_GOAL_CHARS + 1);
    assert_eq!(
        refused_field(&task(json!({"goal": over}))).as_deref(),
        Some("goal")
    );
    assert_eq!(
        property(&schema::<InstructRequest>(), "text")["maxLength"],
        INSTRUCTION_MAX_CHARS
    );
    assert!(validate_instruction(&"i".repeat(INSTRUCTION_MAX_CHARS)).is_ok());
    assert!(validate_instruction(&"i".repeat(INSTRUCTION_MAX_CHARS + 1)).is_err());
    assert_eq!(
        property(&task_schema, "acceptance")["maxItems"],
        MAX_CRITERIA
    );
    let timeout = property(&schema::<AcceptanceFile>(), "timeout_secs");
    assert_eq!(
        (&timeout["minimum"], &timeout["maximum"]),
        (&json!(1), &json!(MAX_CHECK_TIMEOUT_SECS))
    );
    for (secs, ok) in [(0, false), (1, true), (MAX_CHECK_TIMEOUT_SECS, true)] {
        let file =
            task(json!({"acceptance": [{"id": "a", "check": "true", "timeout_secs": secs}]}));
        assert_eq!(refused_field(&file).is_none(), ok, "{secs}");
    }
    let serve = property(&schema::<GuiFile>(), "serve");
    assert_eq!(serve["maxLength"], MAX_SERVE_CHARS);
    assert!(!pattern(&serve).is_match("a\0b"));
    let gui = |serve: String| GuiFile {
        backend: None,
        serve: Some(serve),
        url: Some("http://127.0.0.1:8000/".into()),
    };
    assert!(gui("s".repeat(MAX_SERVE_CHARS)).validate().is_ok());
    assert!(gui("s".repeat(MAX_SERVE_CHARS + 1)).validate().is_err());
    assert!(gui("a\0b".into()).validate().is_err());
    let threshold = property(&task_schema, "rubric_threshold");
    assert_eq!(
        (&threshold["exclusiveMinimum"], &threshold["maximum"]),
        (&json!(0), &json!(10))
    );
    let rubric = json!([{"name": "taste", "weight": 1.0, "description": "d"}]);
    for (t, ok) in [(0.0, false), (0.1, true), (10.0, true), (10.5, false)] {
        let file =
            task(json!({"rubric": rubric, "rubric_threshold": t, "roles": {"auditor": "j"}}));
        assert_eq!(refused_field(&file).is_none(), ok, "{t}");
    }
}

#[test]
fn every_budget_key_states_its_validated_range() {
    let budget = schema::<BudgetFile>();
    let valid = |key: &str, value: Value| {
        let file: BudgetFile = serde_json::from_value(json!({ key: value })).unwrap();
        file.validate().is_ok()
    };
    for (key, prop) in budget["properties"].as_object().unwrap() {
        // A switch has no range.
        if prop["type"].to_string().contains("boolean") {
            continue;
        }
        if let Some(low) = prop.get("exclusiveMinimum").and_then(Value::as_f64) {
            assert!(!valid(key, json!(low)), "{key} = {low}");
            assert!(valid(key, json!(low + 0.01)), "{key} just above {low}");
        } else {
            let low = prop["minimum"]
                .as_u64()
                .unwrap_or_else(|| panic!("{key}: {prop}"));
            assert!(valid(key, json!(low)), "{key} = {low}");
            if low > 0 {
                assert!(!valid(key, json!(low - 1)), "{key} = {}", low - 1);
            }
        }
        let integer = prop["type"].to_string().contains("integer");
        match prop.get("maximum") {
            Some(high) if integer => {
                let high = high.as_u64().unwrap();
                assert!(valid(key, json!(high)), "{key} = {high}");
                if let Some(above) = high.checked_add(1) {
                    assert!(!valid(key, json!(above)), "{key} = {above}");
                }
            }
            Some(high) => {
                let high = high.as_f64().unwrap();
                assert!(valid(key, json!(high)), "{key} = {high}");
                assert!(!valid(key, json!(high + 1.0)), "{key} above {high}");
            }
            None => panic!("{key} states no maximum: {prop}"),
        }
    }
}

#[test]
fn names_are_what_a_task_accepts() {
    let name = schema::<name_schemas::Name>();
    let re = pattern(&name);
    let cases = [
        ("exec-1", true),
        ("a.b_c", true),
        (" padded\t", true),
        (&"n".repeat(64), true),
        (&"n".repeat(65), false),
        ("", false),
        ("two words", false),
        ("ünïcode", false),
    ];
    for (text, ok) in cases {
        assert_eq!(re.is_match(text), ok, "{text:?}");
        let criterion = task(json!({"acceptance": [{"id": text, "check": "true"}]}));
        assert_eq!(refused_field(&criterion).is_none(), ok, "id {text:?}");
        let manager = task(json!({"roles": {"manager": text}}));
        assert_eq!(refused_field(&manager).is_none(), ok, "manager {text:?}");
    }
}

#[test]
fn workspace_paths_and_contents_are_what_a_submit_accepts() {
    let file = schema::<UploadedFile>();
    let path = pattern(&property(&file, "path"));
    let paths = [
        "hello.py",
        "src/a.rs",
        ".env",
        "...",
        "a/..b/.c",
        "",
        "/etc/passwd",
        "a//b",
        "a/",
        "./a",
        "a/../b",
        "..",
        "a\\b",
        "a\0b",
    ];
    for p in paths {
        assert_eq!(path.is_match(p), validate_relative_path(p).is_ok(), "{p:?}");
    }
    let content = pattern(&property(&file, "content_b64"));
    let engine = base64::engine::general_purpose::STANDARD;
    let mut texts: Vec<String> = (0..8).map(|n| engine.encode(vec![0xA5_u8; n])).collect();
    texts.extend(
        [
            "AB==", "ABC=", "AQ==", "ABE=", "A", "AB", "ABC", "AB=", "====", "a b=",
        ]
        .map(String::from),
    );
    for text in texts {
        assert_eq!(
            content.is_match(&text),
            engine.decode(&text).is_ok(),
            "{text:?}"
        );
    }
}

#[test]
fn a_start_commit_is_what_a_submit_accepts() {
    let origin = schema::<RepoOrigin>();
    let id = "0123456789abcdef0123456789abcdef01234567";
    let ids = [
        id.to_string(),
        format!("{id}{}", &id[..24]),
        id.to_uppercase(),
        id[..39].to_string(),
        format!("{id}0"),
        format!("{id} "),
        String::new(),
        "g".repeat(40),
    ];
    for field in ["commit", "tree"] {
        let declared = pattern(&property(&origin, field));
        for value in &ids {
            assert_eq!(
                declared.is_match(value),
                is_git_object_id(value),
                "{field}: {value:?}"
            );
        }
    }
    let name = property(&origin, "ref_name");
    assert_eq!(name["maxLength"], json!(MAX_REF_NAME_CHARS), "{name}");
    let declared = pattern(&name);
    let valid = |v: &str| {
        RepoOrigin {
            commit: id.into(),
            tree: id.into(),
            ref_name: Some(v.into()),
            dirty: false,
        }
        .problem()
        .is_none()
    };
    for value in [
        "main",
        "refs/heads/main",
        "v1.2",
        "HEAD~2",
        "",
        "a\nb",
        "a\u{7f}",
        "ü",
    ] {
        assert_eq!(
            declared.is_match(value),
            valid(value),
            "ref_name: {value:?}"
        );
    }
}
