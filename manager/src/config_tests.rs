use super::JetStreamSection;

#[test]
fn jetstream_keys_are_checked() {
    let ok = |replicas, bytes| JetStreamSection {
        replicas,
        stream_max_bytes: bytes,
        ..Default::default()
    };
    // (replicas, stream_max_bytes) -> accepted
    for (replicas, bytes, accepted) in [
        (None, None, true),
        (Some(1), None, true),
        (Some(3), Some(10 << 30), true),
        (Some(5), Some(1 << 20), true),
        (Some(2), None, false),
        (Some(0), None, false),
        (Some(3), Some(1024), false),
        (None, Some(-1), false),
    ] {
        let got = ok(replicas, bytes).resolve();
        assert_eq!(got.is_ok(), accepted, "{replicas:?} {bytes:?}: {got:?}");
    }
    let topology = ok(Some(3), Some(2 << 30)).resolve();
    assert_eq!(topology.as_ref().map(|t| t.replicas), Ok(Some(3)));
    assert_eq!(topology.map(|t| t.stream_max_bytes), Ok(Some(2 << 30)));
    // Unset: streams get the documented default cap, buckets none.
    let defaults = ok(None, None).resolve();
    assert_eq!(
        defaults.as_ref().map(|t| t.stream_max_bytes),
        Ok(Some(DEFAULT_STREAM_MAX_BYTES))
    );
    assert_eq!(defaults.map(|t| t.snapshot_max_bytes), Ok(None));
    // audit_ack_wait_secs -> the durable's ack_wait, or refused.
    for (secs, want) in [
        (None, Ok(None)),
        (Some(3), Ok(Some(Duration::from_secs(3)))),
        (Some(3600), Ok(Some(Duration::from_secs(3600)))),
        (Some(2), Err(())),
        (Some(3601), Err(())),
    ] {
        let got = JetStreamSection {
            audit_ack_wait_secs: secs,
            ..Default::default()
        }
        .resolve()
        .map(|t| t.audit_ack_wait)
        .map_err(|_| ());
        assert_eq!(got, want, "{secs:?}");
    }
}

use super::*;

fn no_env(_: &str) -> Option<String> {
    None
}

#[test]
fn precedence_and_errors() {
    let file = parse_file(
        "[redis]\nurl = \"redis://file:1\"\n[http]\naddr = \"127.0.0.1:9\"",
        "x",
    )
    .unwrap_or_default();
    let s = resolve(
        file,
        EnvOverrides {
            redis_url: Some("redis://env:2".into()),
            ..Default::default()
        },
        &no_env,
    );
    let s = s.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.redis.target, RedisTarget::Url("redis://env:2".into()));
    assert_eq!(s.http_addr.port(), 9);
    assert!(matches!(
        parse_file("[bogus]\nx=1", "x"),
        Err(ManagerConfigError::Parse { .. })
    ));
    let bad = parse_file("[http]\naddr = \"nope\"", "x").unwrap_or_default();
    assert!(matches!(
        resolve(bad, EnvOverrides::default(), &no_env),
        Err(ManagerConfigError::Invalid(_))
    ));
    // A public address without a token is refused; with one it is accepted.
    let public = || parse_file("[http]\naddr = \"0.0.0.0:7600\"", "x").unwrap_or_default();
    assert!(matches!(
        resolve(public(), EnvOverrides::default(), &no_env),
        Err(ManagerConfigError::Invalid(_))
    ));
    let with_token =
        parse_file("[http]\naddr = \"0.0.0.0:7600\"\ntoken_env = \"T\"", "x").unwrap_or_default();
    let env = |k: &str| (k == "T").then(|| "secret".to_string());
    let s = resolve(with_token, EnvOverrides::default(), &env).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.token.as_deref(), Some("secret"));
    assert!(s.auditor_keys.is_empty());
}

#[test]
fn redis_url_or_sentinels() {
    let resolve_text = |text: &str, overrides: EnvOverrides| {
        resolve(
            parse_file(text, "x").unwrap_or_default(),
            overrides,
            &no_env,
        )
        .map(|s| s.redis)
    };
    let sentinel = |names: &[&str], master: &str| RedisTarget::Sentinel {
        sentinels: names.iter().map(|s| s.to_string()).collect(),
        master_name: master.into(),
        password: None,
        sentinel_password: None,
    };
    // Accepted: (file, env) -> target.
    let good: Vec<(&str, EnvOverrides, RedisTarget)> = vec![
        (
            "",
            EnvOverrides::default(),
            RedisTarget::Url(DEFAULT_REDIS_URL.into()),
        ),
        (
            "[redis]\nsentinels = [\"a:26379\", \"b:26379\"]\nmaster_name = \"lg\"",
            EnvOverrides::default(),
            sentinel(&["a:26379", "b:26379"], "lg"),
        ),
        (
            "",
            EnvOverrides {
                redis_sentinels: Some("s1:1, s2:2,".into()),
                redis_master_name: Some("m".into()),
                ..Default::default()
            },
            sentinel(&["s1:1", "s2:2"], "m"),
        ),
    ];
    for (text, overrides, target) in good {
        let got = resolve_text(text, overrides).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(got.target, target, "{text}");
        assert_eq!(got.replica_acks, None);
    }
    // Refused: (file, env) -> the key named.
    let bad: Vec<(&str, EnvOverrides, &str)> = vec![
        (
            "[redis]\nurl = \"redis://x:1\"\nsentinels = [\"a:1\"]\nmaster_name = \"m\"",
            EnvOverrides::default(),
            "redis.sentinels",
        ),
        (
            "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"",
            EnvOverrides {
                redis_url: Some("redis://env:2".into()),
                ..Default::default()
            },
            "redis.sentinels",
        ),
        (
            "[redis]\nsentinels = [\"a:1\"]",
            EnvOverrides::default(),
            "redis.master_name",
        ),
        (
            "[redis]\nsentinels = []\nmaster_name = \"m\"",
            EnvOverrides::default(),
            "redis.sentinels",
        ),
        (
            "[redis]\nsentinels = [\"nohost\"]\nmaster_name = \"m\"",
            EnvOverrides::default(),
            "redis.sentinels",
        ),
        (
            "[redis]\nmaster_name = \"m\"",
            EnvOverrides::default(),
            "redis.master_name",
        ),
        (
            "[redis]\nurl = \"http://x\"",
            EnvOverrides::default(),
            "redis.url",
        ),
        (
            "[redis]\nmin_replicas_acked = 17",
            EnvOverrides::default(),
            "redis.min_replicas_acked",
        ),
        (
            "[redis]\nmin_replicas_acked = 1\nreplica_ack_timeout_ms = 5",
            EnvOverrides::default(),
            "redis.replica_ack_timeout_ms",
        ),
    ];
    for (text, overrides, key) in bad {
        let err = resolve_text(text, overrides).err();
        assert!(
            err.as_ref().is_some_and(|e| e.to_string().contains(key)),
            "{text}: {err:?}"
        );
    }
    let acks = resolve_text(
        "[redis]\nmin_replicas_acked = 1\nreplica_ack_timeout_ms = 250",
        EnvOverrides::default(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        acks.replica_acks,
        Some(ReplicaAcks {
            replicas: 1,
            timeout: Duration::from_millis(250)
        })
    );
    // The data nodes' password comes from the variable `password_env` names.
    let text = "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"\npassword_env = \"LG_RPW\"";
    let env = |k: &str| (k == "LG_RPW").then(|| "pw".to_string());
    let with_password = resolve(
        parse_file(text, "x").unwrap_or_default(),
        EnvOverrides::default(),
        &env,
    )
    .map(|s| s.redis.target);
    assert_eq!(
        with_password.as_ref().ok(),
        Some(&RedisTarget::Sentinel {
            sentinels: vec!["a:1".into()],
            master_name: "m".into(),
            password: Some("pw".into()),
            sentinel_password: None,
        })
    );
    assert!(
        !format!("{with_password:?}").contains("pw\""),
        "{with_password:?}"
    );
    // The sentinels' own password comes from `sentinel_password_env`.
    let both = "[redis]\nsentinels = [\"a:1\"]\nmaster_name = \"m\"\n\
                    password_env = \"LG_RPW\"\nsentinel_password_env = \"LG_SPW\"";
    let env2 = |k: &str| match k {
        "LG_RPW" => Some("pw".to_string()),
        "LG_SPW" => Some("spw".to_string()),
        _ => None,
    };
    let with_both = resolve(
        parse_file(both, "x").unwrap_or_default(),
        EnvOverrides::default(),
        &env2,
    )
    .map(|s| s.redis.target);
    assert_eq!(
        with_both.as_ref().ok(),
        Some(&RedisTarget::Sentinel {
            sentinels: vec!["a:1".into()],
            master_name: "m".into(),
            password: Some("pw".into()),
            sentinel_password: Some("spw".into()),
        })
    );
    assert!(!format!("{with_both:?}").contains("spw"), "{with_both:?}");
    let sentinel_pw_unset = resolve(
        parse_file(both, "x").unwrap_or_default(),
        EnvOverrides::default(),
        &env,
    )
    .err();
    assert!(
        sentinel_pw_unset
            .as_ref()
            .is_some_and(|e| e.to_string().contains("redis.sentinel_password_env")),
        "{sentinel_pw_unset:?}"
    );
    for (text, key) in [
        (text, "redis.password_env"),
        ("[redis]\npassword_env = \"LG_RPW\"", "redis.password_env"),
        (
            "[redis]\nsentinel_password_env = \"LG_SPW\"",
            "redis.sentinel_password_env",
        ),
    ] {
        let err = resolve_text(text, EnvOverrides::default()).err();
        assert!(
            err.as_ref().is_some_and(|e| e.to_string().contains(key)),
            "{text}: {err:?}"
        );
    }
    let off = resolve_text("[redis]\nmin_replicas_acked = 0", EnvOverrides::default())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(off.replica_acks, None);
}

fn public_hex(seed: u8) -> String {
    loopgate_protocol::report::signing::ReportSigningKey::from_seed(&[seed; 32])
        .public_key()
        .to_hex()
}

#[test]
fn auditor_keys_from_the_file_and_the_environment() {
    let (a, b) = (public_hex(7), public_hex(9));
    let text = format!("[manager]\nauditor_keys = [\"{a}\"]\nauditor_keys_env = \"LG_KEYS\"");
    let env = |k: &str| (k == "LG_KEYS").then(|| format!("# pool 2\n{b}\n{a}\n"));
    let s = resolve(
        parse_file(&text, "x").unwrap_or_default(),
        EnvOverrides::default(),
        &env,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let listed: Vec<String> = s.auditor_keys.keys().iter().map(|k| k.to_hex()).collect();
    assert_eq!(listed, vec![a.clone(), b.clone()]);

    let cases: Vec<(String, &str)> = vec![
        (
            "[manager]\nauditor_keys = [\"abc\"]".into(),
            "manager.auditor_keys",
        ),
        (
            "[manager]\nauditor_keys_env = \"UNSET\"".into(),
            "manager.auditor_keys_env",
        ),
        (
            "[manager]\nauditor_keys_env = \"LG_BAD\"".into(),
            "manager.auditor_keys_env",
        ),
    ];
    let env = |k: &str| (k == "LG_BAD").then(|| "not-a-key".to_string());
    for (text, key) in cases {
        let file = parse_file(&text, "x").unwrap_or_default();
        let err = resolve(file, EnvOverrides::default(), &env)
            .err()
            .unwrap_or_else(|| panic!("{text} resolved"));
        assert!(err.to_string().contains(key), "{text}: {err}");
    }
    assert!(matches!(
        parse_file("[manager]\nauditor_key = []", "x"),
        Err(ManagerConfigError::Parse { .. })
    ));
}

#[test]
fn structured_output_key() {
    let profile = |provider: &str, value: &str| {
        format!(
            "[models.mgr]\nprovider = \"{provider}\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
                 model = \"m\"\nstructured_output = {value}\n"
        )
    };
    let settings = |text: &str| {
        parse_file(text, "manager.toml")
            .and_then(|file| resolve(file, EnvOverrides::default(), &no_env))
    };
    let on = settings(&profile("openai", "\"json_schema\"")).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        on.models["mgr"].structured_output,
        loopgate_models::StructuredOutput::JsonSchema
    );
    let absent = settings("[models.mgr]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"m\"\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        absent.models["mgr"].structured_output,
        loopgate_models::StructuredOutput::Off
    );
    // Unknown values and Anthropic profiles are refused with an error naming the key.
    for text in [
        profile("openai", "\"json\""),
        profile("openai", "true"),
        profile("anthropic", "\"json_schema\""),
    ] {
        match settings(&text) {
            Err(e) => assert!(e.to_string().contains("structured_output"), "{text}: {e}"),
            Ok(_) => panic!("accepted: {text}"),
        }
    }
}

/// Without a token `Host` is always checked (loopback names plus `allowed_hosts`); with one
/// only when `allowed_hosts` is set; a name with a scheme, port or path is refused.
#[test]
fn allowed_hosts_follow_the_token() {
    let no_env = |_: &str| -> Option<String> { None };
    let env = |k: &str| (k == "TOKEN").then(|| "t".to_string());
    let settings = |http: &str, env: &dyn Fn(&str) -> Option<String>| {
        let text = format!("[http]\n{http}\n");
        super::parse_file(&text, "manager.toml").and_then(|file| {
            super::resolve(file, super::EnvOverrides::default(), env).map(|s| s.allowed_hosts)
        })
    };
    let ok = |http: &str, env: &dyn Fn(&str) -> Option<String>| {
        settings(http, env).unwrap_or_else(|e| panic!("{http}: {e}"))
    };
    assert_eq!(ok("", &no_env), Some(vec![]));
    let names = "allowed_hosts = [\"Loopgate.Internal.\", \"[::2]\"]";
    let want = Some(vec!["loopgate.internal".to_string(), "[::2]".to_string()]);
    assert_eq!(ok(names, &no_env), want);
    assert_eq!(ok("token_env = \"TOKEN\"", &env), None);
    assert_eq!(ok(&format!("token_env = \"TOKEN\"\n{names}"), &env), want);
    for bad in ["http://a", "a:8080", "a/b", ""] {
        let http = format!("allowed_hosts = [\"{bad}\"]");
        match settings(&http, &no_env) {
            Err(e) => assert!(e.to_string().contains("http.allowed_hosts"), "{bad}: {e}"),
            Ok(hosts) => panic!("{bad}: accepted as {hosts:?}"),
        }
    }
}
