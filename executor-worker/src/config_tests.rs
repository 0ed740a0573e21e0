#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use loopgate_checks::SandboxMode;

fn inputs() -> ExternalInputs {
    ExternalInputs {
        hostname: Some("box".into()),
        pid: 42,
        temp_dir: PathBuf::from("/tmp"),
        ..Default::default()
    }
}

const FULL: &str = r#"
[nats]
url = "nats://127.0.0.1:14222"
[executor]
worker_id = "exec-1"
capabilities = ["cli", "gui", "cli"]
work_dir = ".loopgate/work"
shell_timeout_secs = 60
output_cap_bytes = 4096
ack_wait_secs = 10
max_deliver = 3
cache_bytes = 1000
concurrency = 4
[models.local]
provider = "openai"
base_url = "http://127.0.0.1:8080/v1"
model = "qwen"
api_key_env = "LOOPGATE_API_KEY"
[agents.codex]
kind = "codex"
command = "/opt/bin/codex"
model = "qwen2.5-coder"
args = ["-c", "model_provider=\"local\""]
env = ["CODEX_KEY", "UNSET_VAR"]
"#;

#[test]
fn full_file_resolves() {
    let mut inp = inputs();
    inp.env.insert("LOOPGATE_API_KEY".into(), "sk-test".into());
    inp.env.insert("CODEX_KEY".into(), "ck".into());
    inp.env.insert("PATH".into(), "/bin".into());
    let s = ExecutorFile::parse(FULL, "x")
        .unwrap()
        .resolve(&inp)
        .unwrap();
    assert_eq!(s.worker_id, "exec-1");
    assert_eq!(s.capabilities, vec![Capability::Cli, Capability::Gui]);
    assert_eq!(s.work_dir, PathBuf::from(".loopgate/work"));
    assert_eq!(s.tools.shell_timeout, Duration::from_secs(60));
    assert_eq!(s.tools.output_cap_bytes, 4096);
    assert_eq!(s.tools.shell_env.path, "/bin");
    assert_eq!(s.tools.shell_env.lang, DEFAULT_SHELL_LANG);
    assert_eq!(s.ack_wait, Duration::from_secs(10));
    assert_eq!(s.max_deliver, 3);
    assert_eq!((s.cache_bytes, s.concurrency), (1000, 4));
    assert_eq!(
        s.models["local"].api_key.as_ref().unwrap().expose(),
        "sk-test"
    );
    assert_eq!(s.nats.url, "nats://127.0.0.1:14222");
    let codex = &s.agents["codex"];
    assert_eq!(codex.kind, crate::agents::config::AgentKind::Codex);
    assert_eq!(codex.command, PathBuf::from("/opt/bin/codex"));
    assert_eq!(codex.env, vec![("CODEX_KEY".to_string(), "ck".to_string())]);
    // What `main` removes from its environment once read: the model key, what the CLI agent
    // gets passed through, and the NATS URL (it may carry a password).
    assert_eq!(
        s.secret_vars,
        [
            "CODEX_KEY",
            "LOOPGATE_API_KEY",
            "LOOPGATE_NATS_URL",
            "UNSET_VAR"
        ]
        .map(String::from)
    );
}

#[test]
fn agent_and_model_names_must_differ() {
    let text = "[models.x]\nbase_url = \"http://h\"\nmodel = \"m\"\n[agents.x]\nkind = \"codex\"";
    let file = ExecutorFile::parse(text, "x").unwrap();
    assert!(matches!(
        file.resolve(&inputs()),
        Err(SettingsError::Invalid(_))
    ));
}

#[test]
fn defaults_and_overrides() {
    let mut inp = inputs();
    let s = ExecutorFile::parse("", "x").unwrap().resolve(&inp).unwrap();
    assert_eq!(s.worker_id, "box-42");
    assert_eq!(s.capabilities, vec![Capability::Cli]);
    assert_eq!(s.work_dir, PathBuf::from("/tmp/loopgate-executor"));
    assert_eq!(
        s.tools.shell_timeout,
        Duration::from_secs(DEFAULT_SHELL_TIMEOUT_SECS)
    );
    assert_eq!(s.tools.output_cap_bytes, DEFAULT_OUTPUT_CAP_BYTES);
    assert_eq!(s.ack_wait, Duration::from_secs(DEFAULT_ACK_WAIT_SECS));
    assert_eq!(s.max_deliver, DEFAULT_MAX_DELIVER);
    assert_eq!(
        (s.cache_bytes, s.concurrency),
        (DEFAULT_CACHE_BYTES, EPISODES_PER_LOOP)
    );

    inp.worker_id_flag = Some("flag-id".into());
    inp.capability_flags = vec![Capability::Gui];
    inp.env
        .insert("LOOPGATE_NATS_URL".into(), "nats://env:1".into());
    let s = ExecutorFile::parse(FULL, "x");
    // FULL needs the API key; without it resolution fails with a model error.
    assert!(matches!(
        s.unwrap().resolve(&inp),
        Err(SettingsError::Model(_))
    ));
    let s = ExecutorFile::parse("[executor]\nworker_id = \"file-id\"", "x")
        .unwrap()
        .resolve(&inp)
        .unwrap();
    assert_eq!(s.worker_id, "flag-id");
    assert_eq!(s.capabilities, vec![Capability::Gui]);
    assert_eq!(s.nats.url, "nats://env:1");
}

#[test]
fn parse_errors() {
    let cases = [
        "[executor]\nbogus = 1",
        "[redis]\nurl = \"redis://x\"",
        "[executor]\ncapabilities = [\"tpu\"]",
        "[models.local]\nbase_url = \"http://x\"\nmodel = \"m\"\nextra = 1",
        "[agents.a]\nkind = \"cursor\"",
        "[agents.a]\nkind = \"codex\"\nextra = 1",
    ];
    for text in cases {
        assert!(
            matches!(
                ExecutorFile::parse(text, "x"),
                Err(SettingsError::Parse { .. })
            ),
            "{text}"
        );
    }
}

#[test]
fn invalid_values() {
    let cases = [
        "[executor]\nshell_timeout_secs = 0",
        "[executor]\noutput_cap_bytes = 10",
        "[executor]\nack_wait_secs = 1",
        "[executor]\nmax_deliver = 0",
        "[executor]\nconcurrency = 0",
        "[executor]\nconcurrency = 65",
        "[executor]\ncapabilities = []",
        "[executor]\nworker_id = \"a b\"",
        "[nats]\nurl = \"http://x\"",
        "[agents.a]\nkind = \"codex\"\nenv = [\"HOME\"]",
    ];
    for text in cases {
        let file = ExecutorFile::parse(text, "x").unwrap();
        assert!(
            matches!(file.resolve(&inputs()), Err(SettingsError::Invalid(_))),
            "{text}"
        );
    }
}

#[test]
fn check_keys_are_the_auditors() {
    let defaults = ExecutorFile::parse("", "x")
        .unwrap()
        .resolve(&inputs())
        .unwrap();
    assert_eq!(defaults.sandbox, SandboxSettings::default());
    assert_eq!(defaults.check_path, loopgate_checks::DEFAULT_CHECK_PATH);
    let mut inp = inputs();
    inp.env.insert("PATH".into(), "/opt/bin:/bin".into());
    let set = ExecutorFile::parse(
        "[executor]\nsandbox = \"required\"\ncheck_user = \"65534:65534\"\nbwrap = \"/opt/bwrap\"",
        "x",
    )
    .unwrap()
    .resolve(&inp)
    .unwrap();
    assert_eq!(
        set.sandbox,
        SandboxSettings {
            mode: SandboxMode::Required,
            check_user: Some("65534:65534".into()),
            bwrap: Some(PathBuf::from("/opt/bwrap")),
        }
    );
    assert_eq!(set.check_path, "/opt/bin:/bin");
    for (text, parses) in [
        ("[executor]\nsandbox = \"maybe\"", false),
        ("[executor]\ncheck_user = \"a b\"", true),
        ("[executor]\ncheck_user = \"\"", true),
    ] {
        match ExecutorFile::parse(text, "x") {
            Err(SettingsError::Parse { .. }) => assert!(!parses, "{text}"),
            Ok(file) => {
                assert!(parses, "{text}");
                let err = file.resolve(&inputs()).unwrap_err();
                assert!(
                    matches!(&err, SettingsError::Invalid(ConfigError::Invalid { key, .. }) if key == "executor.check_user"),
                    "{text}: {err:?}"
                );
            }
            Err(other) => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
fn agent_sandbox_keys() {
    let mut inp = inputs();
    inp.config_path = Some(PathBuf::from("/etc/loopgate/executor.toml"));
    inp.env.insert("HOME".into(), "/home/exec".into());
    let defaults = ExecutorFile::parse("", "x").unwrap().resolve(&inp).unwrap();
    // Unset: CLI agents reach their model API, the built-in shell stays offline.
    assert_eq!(
        defaults.agent_network,
        AgentNetworkPolicy {
            shell: false,
            cli_agents: true
        }
    );
    for want in [
        "/etc/loopgate/executor.toml",
        "/run/secrets",
        "/home/exec/.cache/loopgate",
    ] {
        assert!(
            defaults.agent_hidden.contains(&PathBuf::from(want)),
            "{want}: {:?}",
            defaults.agent_hidden
        );
    }
    let keys = tempfile::tempdir().unwrap();
    let key_file = keys.path().join("m");
    std::fs::write(&key_file, "sk-file").unwrap();
    let text = format!(
        "[executor]\nagent_network = \"on\"\nagent_hidden_paths = [\"/srv/creds\", \"rel/dir\"]\n\
        [models.m]\nbase_url = \"http://h\"\nmodel = \"m\"\napi_key_file = \"{}\"",
        key_file.display()
    );
    let set = ExecutorFile::parse(&text, "x")
        .unwrap()
        .resolve(&inp)
        .unwrap();
    assert_eq!(
        set.agent_network,
        AgentNetworkPolicy {
            shell: true,
            cli_agents: true
        }
    );
    for want in [
        PathBuf::from("/srv/creds"),
        PathBuf::from("rel/dir"),
        key_file,
    ] {
        assert!(set.agent_hidden.contains(&want), "{want:?}");
    }
    let off = ExecutorFile::parse("[executor]\nagent_network = \"off\"", "x")
        .unwrap()
        .resolve(&inp)
        .unwrap();
    assert_eq!(
        off.agent_network,
        AgentNetworkPolicy {
            shell: false,
            cli_agents: false
        }
    );
    for bad in [
        "[executor]\nagent_network = \"maybe\"",
        "[executor]\nagent_network = true",
        "[executor]\nagent_hidden_paths = \"/x\"",
    ] {
        assert!(
            matches!(
                ExecutorFile::parse(bad, "x"),
                Err(SettingsError::Parse { .. })
            ),
            "{bad}"
        );
    }
    let empty = ExecutorFile::parse("[executor]\nagent_hidden_paths = [\"\"]", "x").unwrap();
    assert!(matches!(
        empty.resolve(&inp),
        Err(SettingsError::Invalid(ConfigError::Invalid { key, .. })) if key == "executor.agent_hidden_paths"
    ));
}

#[test]
fn snapshot_table_is_shared_and_checked() {
    let parse = |text: &str| ExecutorFile::parse(text, "x").and_then(|f| f.resolve(&inputs()));
    let defaults = parse("").unwrap();
    assert_eq!(defaults.snapshot, SnapshotLimits::default());
    let set = parse("[snapshot]\nmax_manifest_entries = 5000\nmax_tree_bytes = 1048576\n").unwrap();
    assert_eq!(
        set.snapshot,
        SnapshotLimits {
            max_manifest_entries: 5000,
            max_tree_bytes: 1 << 20
        }
    );
    assert!(parse("[snapshot]\nmax_tree_bytes = 0\n").is_err());
    assert!(parse("[snapshot]\nmax_bytes = 1\n").is_err());
}

#[test]
fn gui_backends_table() {
    use loopgate_protocol::gui::GuiBackend::{Browser, Desktop};
    // (the [executor] lines, the backends served, or the key refused)
    let cases: &[(&str, Result<&[loopgate_protocol::gui::GuiBackend], &str>)] = &[
        ("capabilities = [\"gui\"]", Ok(&[Browser])),
        (
            "capabilities = [\"gui\"]\ngui_backends = [\"desktop\", \"browser\", \"desktop\"]",
            Ok(&[Browser, Desktop]),
        ),
        (
            "capabilities = [\"gui\"]\ngui_backends = [\"desktop\"]",
            Ok(&[Desktop]),
        ),
        // Without gui, no backend is served.
        (
            "capabilities = [\"cli\"]\ngui_backends = [\"desktop\"]",
            Ok(&[]),
        ),
        (
            "capabilities = [\"gui\"]\ngui_backends = []",
            Err("executor.gui_backends"),
        ),
    ];
    for (lines, want) in cases {
        let text = format!("[executor]\n{lines}\n");
        let got = ExecutorFile::parse(&text, "x").unwrap().resolve(&inputs());
        match want {
            Ok(backends) => assert_eq!(got.unwrap().gui_backends, *backends, "{lines}"),
            Err(key) => {
                let err = got.unwrap_err().to_string();
                assert!(err.contains(key), "{lines}: {err}");
            }
        }
    }
    // An unknown backend is refused when the file is read.
    assert!(ExecutorFile::parse("[executor]\ngui_backends = [\"x11\"]\n", "x").is_err());
}
