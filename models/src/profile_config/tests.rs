#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use serde_json::json;

/// The config file is TOML, but this crate has no TOML dependency: serde sees the same fields
/// when the tables are written as JSON objects.
fn parse(json_text: &str) -> Result<ModelProfileConfig, serde_json::Error> {
    serde_json::from_str(json_text)
}

fn env_with(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |name| {
        vars.iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }
}

#[test]
fn deserialize_defaults_and_unknown_fields() {
    let config = parse(r#"{"base_url": "http://127.0.0.1:8080/v1", "model": "qwen"}"#).unwrap();
    assert_eq!(config.provider, Provider::OpenAi);
    assert_eq!(config.timeout_secs, DEFAULT_TIMEOUT_SECS);
    assert_eq!(config.api_key_env, None);
    let anthropic =
        parse(r#"{"provider": "anthropic", "base_url": "https://x", "model": "m"}"#).unwrap();
    assert_eq!(anthropic.provider, Provider::Anthropic);
    assert!(parse(r#"{"base_url": "http://x", "model": "m", "api_key": "sk"}"#).is_err());
    assert!(parse(r#"{"provider": "gemini", "base_url": "http://x", "model": "m"}"#).is_err());
}

#[test]
fn structured_output_values() {
    let with = |value: &str| {
        parse(&format!(
            r#"{{"base_url": "http://x", "model": "m", "structured_output": {value}}}"#
        ))
    };
    let cases: &[(&str, Option<StructuredOutput>)] = &[
        (r#""json_schema""#, Some(StructuredOutput::JsonSchema)),
        (r#""off""#, Some(StructuredOutput::Off)),
        (r#""json""#, None),
        (r#""JSON_SCHEMA""#, None),
        ("true", None),
    ];
    for (value, want) in cases {
        match (with(value), want) {
            (Ok(config), Some(want)) => assert_eq!(config.structured_output, *want, "{value}"),
            (Err(error), None) => assert!(
                error.to_string().contains("structured_output"),
                "{value}: the error names the key: {error}"
            ),
            (got, want) => panic!("{value}: got {got:?}, want {want:?}"),
        }
    }
    // Absent means off: configs without the key behave as before.
    let config = parse(r#"{"base_url": "http://x", "model": "m"}"#).unwrap();
    assert_eq!(config.structured_output, StructuredOutput::Off);
    assert_eq!(
        serde_json::to_value(StructuredOutput::JsonSchema).unwrap(),
        "json_schema"
    );
}

fn extra(fields: &[(&str, serde_json::Value)]) -> serde_json::Map<String, serde_json::Value> {
    fields
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn extra_body_reads_from_toml_tables() {
    let config: ModelProfileConfig = toml::from_str(
        r#"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen3"
[extra_body]
dry_multiplier = 0.8
[extra_body.chat_template_kwargs]
enable_thinking = false
"#,
    )
    .unwrap();
    assert_eq!(
        serde_json::Value::Object(config.extra_body),
        json!({"dry_multiplier": 0.8, "chat_template_kwargs": {"enable_thinking": false}})
    );
}

#[test]
fn resolve_table() {
    let base = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: "http://127.0.0.1:8080/v1/".into(),
        model: "qwen2.5-coder".into(),
        api_key_env: None,
        api_key_file: None,
        timeout_secs: 30,
        max_tokens: Some(1024),
        temperature: Some(0.2),
        context_window: Some(32768),
        ..ModelProfileConfig::default()
    };
    let env = env_with(&[("OPENAI_API_KEY", "sk-secret"), ("BLANK_KEY", "  ")]);
    type Check = fn(&Result<ModelProfile, ModelConfigError>) -> bool;
    let cases: Vec<(&str, ModelProfileConfig, Check)> = vec![
        ("local, no key", base.clone(), |r| {
            matches!(r, Ok(p) if p.api_key.is_none()
                && p.base_url == "http://127.0.0.1:8080/v1"
                && p.timeout == Duration::from_secs(30))
        }),
        (
            "key from env",
            ModelProfileConfig {
                api_key_env: Some("OPENAI_API_KEY".into()),
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.api_key.as_ref().map(ApiKey::expose) == Some("sk-secret")),
        ),
        (
            "env var unset",
            ModelProfileConfig {
                api_key_env: Some("NOPE".into()),
                ..base.clone()
            },
            |r| matches!(r, Err(ModelConfigError::MissingKeyEnv { .. })),
        ),
        (
            "env var blank",
            ModelProfileConfig {
                api_key_env: Some("BLANK_KEY".into()),
                ..base.clone()
            },
            |r| matches!(r, Err(ModelConfigError::MissingKeyEnv { .. })),
        ),
        (
            "both key sources",
            ModelProfileConfig {
                api_key_env: Some("OPENAI_API_KEY".into()),
                api_key_file: Some("/nonexistent".into()),
                ..base.clone()
            },
            |r| matches!(r, Err(ModelConfigError::ConflictingKeySources { .. })),
        ),
        (
            "key file missing",
            ModelProfileConfig {
                api_key_file: Some("/nonexistent/loopgate/key".into()),
                ..base.clone()
            },
            |r| matches!(r, Err(ModelConfigError::KeyFileUnreadable { .. })),
        ),
        (
            "anthropic supported",
            ModelProfileConfig {
                provider: Provider::Anthropic,
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.provider == Provider::Anthropic && p.price.is_none()),
        ),
        (
            "price table",
            ModelProfileConfig {
                input_usd_per_mtok: Some(3.0),
                stream: true,
                ..base.clone()
            },
            |r| {
                matches!(r, Ok(p) if p.stream && p.price == Some(crate::pricing::Price {
                    input_usd_per_mtok: 3.0,
                    output_usd_per_mtok: 0.0,
                }))
            },
        ),
        (
            "negative price",
            ModelProfileConfig {
                output_usd_per_mtok: Some(-1.0),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "output_usd_per_mtok",
                        ..
                    })
                )
            },
        ),
        (
            "bad scheme",
            ModelProfileConfig {
                base_url: "ftp://x".into(),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "base_url",
                        ..
                    })
                )
            },
        ),
        (
            "no host",
            ModelProfileConfig {
                base_url: "http://".into(),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "base_url",
                        ..
                    })
                )
            },
        ),
        (
            "empty model",
            ModelProfileConfig {
                model: " ".into(),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField { field: "model", .. })
                )
            },
        ),
        (
            "zero timeout",
            ModelProfileConfig {
                timeout_secs: 0,
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "timeout_secs",
                        ..
                    })
                )
            },
        ),
        (
            "structured output on an openai profile",
            ModelProfileConfig {
                structured_output: StructuredOutput::JsonSchema,
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.structured_output == StructuredOutput::JsonSchema),
        ),
        (
            "structured output off by default",
            base.clone(),
            |r| matches!(r, Ok(p) if p.structured_output == StructuredOutput::Off),
        ),
        (
            "structured output refused for anthropic",
            ModelProfileConfig {
                provider: Provider::Anthropic,
                structured_output: StructuredOutput::JsonSchema,
                ..base.clone()
            },
            |r| {
                matches!(r, Err(e @ ModelConfigError::InvalidField {
                    field: "structured_output",
                    ..
                }) if e.to_string().contains("only supported for provider = \"openai\""))
            },
        ),
        (
            "structured output off is fine for anthropic",
            ModelProfileConfig {
                provider: Provider::Anthropic,
                structured_output: StructuredOutput::Off,
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.structured_output == StructuredOutput::Off),
        ),
        (
            "negative temperature",
            ModelProfileConfig {
                temperature: Some(-0.1),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "temperature",
                        ..
                    })
                )
            },
        ),
        (
            "extra_body passes through",
            ModelProfileConfig {
                extra_body: extra(&[("repeat_penalty", json!(1.1))]),
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.extra_body.get("repeat_penalty") == Some(&json!(1.1))),
        ),
        (
            "extra_body may not set what loopgate sets",
            ModelProfileConfig {
                extra_body: extra(&[("top_k", json!(20)), ("messages", json!([]))]),
                ..base.clone()
            },
            |r| {
                matches!(r, Err(ModelConfigError::InvalidField { field: "extra_body", reason, .. })
                    if reason.contains("`messages`"))
            },
        ),
        (
            "extra_body: anthropic's system is loopgate's",
            ModelProfileConfig {
                provider: Provider::Anthropic,
                extra_body: extra(&[("system", json!("x"))]),
                ..base.clone()
            },
            |r| {
                matches!(
                    r,
                    Err(ModelConfigError::InvalidField {
                        field: "extra_body",
                        ..
                    })
                )
            },
        ),
        (
            "extra_body: top_k is anthropic's to take",
            ModelProfileConfig {
                provider: Provider::Anthropic,
                extra_body: extra(&[("top_k", json!(5))]),
                ..base.clone()
            },
            |r| matches!(r, Ok(p) if p.extra_body.len() == 1),
        ),
    ];
    for (label, config, check) in cases {
        let result = config.resolve("test", &env);
        assert!(check(&result), "case {label}: {result:?}");
    }
}

#[test]
fn key_file_is_read_and_trimmed() {
    let dir = std::env::temp_dir().join(format!("loopgate-models-key-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let key_path = dir.join("key");
    std::fs::write(&key_path, "sk-from-file\n").unwrap();
    let empty_path = dir.join("empty");
    std::fs::write(&empty_path, "\n").unwrap();
    let config = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: "https://api.example.com/v1".into(),
        model: "m".into(),
        api_key_env: None,
        api_key_file: Some(key_path),
        timeout_secs: 10,
        max_tokens: None,
        temperature: None,
        context_window: None,
        ..ModelProfileConfig::default()
    };
    let profile = config.resolve("p", &|_| None).unwrap();
    assert_eq!(
        profile.api_key.as_ref().map(ApiKey::expose),
        Some("sk-from-file")
    );
    let empty = ModelProfileConfig {
        api_key_file: Some(empty_path),
        ..config
    };
    assert!(matches!(
        empty.resolve("p", &|_| None),
        Err(ModelConfigError::EmptyKeyFile { .. })
    ));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn debug_never_shows_the_key() {
    let config = ModelProfileConfig {
        provider: Provider::OpenAi,
        base_url: "https://api.example.com/v1".into(),
        model: "m".into(),
        api_key_env: Some("K".into()),
        api_key_file: None,
        timeout_secs: 10,
        max_tokens: None,
        temperature: None,
        context_window: None,
        ..ModelProfileConfig::default()
    };
    let profile = config
        .resolve("p", &|_| Some("sk-very-secret".into()))
        .unwrap();
    let debug = format!("{profile:?}");
    assert!(!debug.contains("sk-very-secret"), "{debug}");
    assert!(debug.contains("redacted"), "{debug}");
}

#[test]
fn resolve_map_and_single() {
    let mut profiles = ModelProfiles::new();
    profiles.insert(
        "manager".into(),
        parse(r#"{"base_url": "http://127.0.0.1:1/v1", "model": "standin-manager"}"#).unwrap(),
    );
    profiles.insert(
        "executor".into(),
        parse(r#"{"base_url": "http://127.0.0.1:1/v1", "model": "standin-executor"}"#).unwrap(),
    );
    let resolved = resolve_profiles(&profiles, &|_| None).unwrap();
    assert_eq!(resolved.len(), 2);
    assert_eq!(resolved["manager"].name, "manager");
    assert_eq!(resolved["executor"].model, "standin-executor");
    assert!(resolve_profile(&profiles, "manager", &|_| None).is_ok());
    assert!(matches!(
        resolve_profile(&profiles, "auditor", &|_| None),
        Err(ModelConfigError::UnknownProfile(_))
    ));
}
