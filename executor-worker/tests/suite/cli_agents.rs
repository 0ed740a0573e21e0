//! CLI-agent episodes against a real nats-server (snapshot store) with stand-in agent
//! executables that speak each agent's documented output format: success, failure, and a hang
//! past the time budget.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use loopgate_executor::run_episode_transcribed;
use loopgate_executor::ToolLimits;
use loopgate_executor::{run_episode, AgentIsolationEnv, EpisodeEnd, EpisodeEnv, SelfCheckEnv};
use loopgate_protocol::transcript::{Transcript, TranscriptEntry};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::ExecOutcome;
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::NatsServer;
use loopgate_transport::{Bus, BusOptions};
use support::{agent_profile, request, script};

/// The CLI agent's output lines in `transcript`, joined.
fn output_text(transcript: &Option<Transcript>) -> String {
    let entries = transcript
        .as_ref()
        .map(|t| t.entries.as_slice())
        .unwrap_or_default();
    entries
        .iter()
        .filter_map(|e| match e {
            TranscriptEntry::Output { text, .. } => Some(text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

struct Harness {
    _nats: NatsServer,
    store: SnapshotStore,
    scratch: tempfile::TempDir,
    env: EpisodeEnv,
}

impl Harness {
    async fn start() -> anyhow::Result<Harness> {
        let nats = NatsServer::start().await?;
        let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
        bus.ensure_topology().await?;
        let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let scratch = tempfile::tempdir()?;
        for dir in ["work", "bin", "report"] {
            std::fs::create_dir_all(scratch.path().join(dir))?;
        }
        let env = EpisodeEnv {
            store: store.clone(),
            work_dir: scratch.path().join("work"),
            tools: ToolLimits::default(),
            models: BTreeMap::new(),
            agents: BTreeMap::new(),
            self_check: SelfCheckEnv::unisolated("test"),
            agent: AgentIsolationEnv::unsandboxed("test"),
            workspaces: None,
            overlays: false,
        };
        Ok(Harness {
            _nats: nats,
            store,
            scratch,
            env,
        })
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.scratch.path().join(rel)
    }

    fn add_agent(&mut self, name: &str, kind: &str, body: &str) -> anyhow::Result<()> {
        let command = script(&self.path("bin"), name, body)?;
        let set_env = [
            ("REPORT_DIR", self.path("report").display().to_string()),
            ("MARKER", self.path("report/marker").display().to_string()),
        ];
        let profile = agent_profile(name, kind, &command, &set_env)?;
        self.env.agents.insert(name.to_string(), profile);
        Ok(())
    }

    async fn base(&self) -> anyhow::Result<String> {
        let files = vec![("README.md".to_string(), 0o644, b"# project\n".to_vec())];
        Ok(self.store.freeze_files(files).await?.id)
    }

    async fn file_in(&self, id: &str, path: &str) -> anyhow::Result<Option<String>> {
        let manifest = self.store.manifest(id).await?;
        match manifest.get(path) {
            Some(entry) => Ok(Some(String::from_utf8(
                self.store.blob(&entry.sha256).await?,
            )?)),
            None => Ok(None),
        }
    }

    /// Every object of the snapshot store, as lossy text.
    async fn stored_texts(&self) -> anyhow::Result<Vec<(String, String)>> {
        let mut texts = Vec::new();
        for object in self.store.list_objects().await? {
            let bytes = match object.name.strip_prefix("blob/") {
                Some(sha) => self.store.get_bytes(sha).await?,
                None => continue,
            };
            texts.push((object.name, String::from_utf8_lossy(&bytes).to_string()));
        }
        Ok(texts)
    }

    fn work_dir_is_empty(&self) -> bool {
        std::fs::read_dir(&self.env.work_dir)
            .map(|mut d| d.next().is_none())
            .unwrap_or(false)
    }
}

#[tokio::test]
async fn claude_code_success_is_frozen_with_usage_cost_and_transcript() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    h.add_agent("claude", "claude_code", support::CLAUDE_SUCCESS)?;
    let base = h.base().await?;
    let (end, transcript) = run_episode_transcribed(
        &request("run-claude", &base, "claude", 30),
        1,
        &h.env,
        Vec::new(),
    )
    .await;
    let EpisodeEnd::Outcome { outcome, usage } = end else {
        panic!("{end:?}")
    };
    let ExecOutcome::Frozen {
        candidate,
        summary,
        claimed_done,
        steps,
        tool_calls,
        files_changed,
        self_check_refusals,
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert!(claimed_done);
    // CLI agents run their own loop: no self-check, and the result says so.
    assert_eq!(self_check_refusals, 0);
    assert_eq!(summary, "Created hello.txt");
    assert_eq!((steps, tool_calls, files_changed), (2, 1, 1));
    assert_eq!(
        usage,
        Usage {
            input_tokens: 1500,
            output_tokens: 80,
            cost_micros: 4200,
            cached_prompt_tokens: 300,
        }
    );
    assert_eq!(
        h.file_in(&candidate, "hello.txt").await?.as_deref(),
        Some("hello\n")
    );
    // The agent's own state directory does not enter the snapshot.
    assert!(h
        .store
        .manifest(&candidate)
        .await?
        .get(".claude/settings.local.json")
        .is_none());

    let transcript = output_text(&transcript);
    assert!(transcript.contains("\"subtype\":\"init\""), "{transcript}");
    assert!(transcript.contains("a line that is not JSON"));
    assert!(transcript.contains("\"type\":\"loopgate.agent_end\""));

    // The template: print mode, stream-json, the prompt last.
    let args = std::fs::read_to_string(h.path("report/args"))?;
    let args: Vec<&str> = args.lines().collect();
    assert_eq!(
        &args[..4],
        &["-p", "--output-format", "stream-json", "--verbose"]
    );
    assert!(
        args.iter()
            .any(|a| a.contains("Your step: create hello.txt")),
        "{args:?}"
    );
    // Scrubbed environment: PATH, LANG, its own HOME, the passed-through variable and set_env.
    let env = std::fs::read_to_string(h.path("report/env"))?;
    for var in env.lines() {
        assert!(
            [
                "HOME",
                "LANG",
                "PATH",
                "PWD",
                "OLDPWD",
                "SHLVL",
                "_",
                "PASSED_THROUGH",
                "REPORT_DIR",
                "MARKER"
            ]
            .contains(&var),
            "unexpected variable {var}"
        );
    }
    let home = std::fs::read_to_string(h.path("report/home"))?;
    let pwd = std::fs::read_to_string(h.path("report/pwd"))?;
    assert_ne!(home.trim(), pwd.trim(), "HOME must not be the workspace");
    assert!(h.work_dir_is_empty(), "episode and home dirs are removed");
    Ok(())
}

#[tokio::test]
async fn codex_failure_without_changes_fails_with_its_error_and_transcript() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    h.add_agent("codex", "codex", support::CODEX_FAILURE)?;
    let base = h.base().await?;
    let (end, transcript) = run_episode_transcribed(
        &request("run-codex", &base, "codex", 30),
        1,
        &h.env,
        Vec::new(),
    )
    .await;
    let EpisodeEnd::Outcome {
        outcome: ExecOutcome::Failed { error },
        ..
    } = end
    else {
        panic!("{end:?}")
    };
    assert!(
        error.starts_with("agent codex failed (exit code 1): unexpected status 401 Unauthorized"),
        "{error}"
    );
    let transcript = output_text(&transcript);
    assert!(
        transcript.contains("turn.failed") && transcript.contains("codex: giving up"),
        "{transcript}"
    );
    Ok(())
}

/// A secret the worker knows (a model API key) and one passed through to the agent, both
/// printed by the agent in its messages, a non-JSON line, its stderr and its final result:
/// neither is in the result's summary, in the transcript, or in any object of the snapshot
/// store (which `GET /v1/blobs/{sha256}` serves), while the transcript keeps the lines.
#[tokio::test]
async fn an_agent_printing_secrets_leaves_them_nowhere() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    let worker_secret = "sk-worker-key-6f1d2c9a8b7e";
    let passed = "pt-agent-key-41c0ffee77aa";
    h.add_agent(
        "claude",
        "claude_code",
        &support::claude_leaking(worker_secret),
    )?;
    let profile = h.env.agents.get_mut("claude").expect("the profile");
    profile.env = vec![("PASSED_THROUGH".into(), passed.into())];
    let base = h.base().await?;
    let (end, transcript) = run_episode_transcribed(
        &request("run-leak", &base, "claude", 30),
        1,
        &h.env,
        vec![worker_secret.to_string()],
    )
    .await;
    let EpisodeEnd::Outcome { outcome, .. } = end else {
        panic!("{end:?}")
    };
    let ExecOutcome::Frozen { summary, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    let stored = h.stored_texts().await?;
    assert!(!stored.is_empty());
    let json = serde_json::to_string(&transcript)?;
    for secret in [worker_secret, passed] {
        for (name, text) in &stored {
            assert!(!text.contains(secret), "{name} holds {secret}: {text}");
        }
        assert!(
            !json.contains(secret),
            "the transcript holds {secret}: {json}"
        );
        assert!(!summary.contains(secret), "{summary}");
    }
    assert_eq!(summary, "Done; the keys were *** and ***");
    let lines = output_text(&transcript);
    assert!(lines.contains("not JSON, key ***"), "{lines}");
    assert!(lines.contains("stderr: *** ***"), "{lines}");
    assert!(lines.contains("loopgate.agent_end"), "{lines}");
    Ok(())
}

#[tokio::test]
async fn opencode_past_its_budget_is_killed_with_its_children() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    h.add_agent("opencode", "opencode", support::OPENCODE_HANG)?;
    let base = h.base().await?;
    let started = Instant::now();
    let end = run_episode(&request("run-hang", &base, "opencode", 1), 1, &h.env).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    let EpisodeEnd::Outcome { outcome, .. } = end else {
        panic!("{end:?}")
    };
    // It changed a file before hanging: the partial work is frozen, not claimed done.
    let ExecOutcome::Frozen {
        candidate,
        summary,
        claimed_done,
        ..
    } = outcome
    else {
        panic!("{outcome:?}")
    };
    assert!(!claimed_done);
    assert!(
        summary.contains("ran past its time budget of 1s"),
        "{summary}"
    );
    assert!(
        summary.contains("Its last message: Working on it"),
        "{summary}"
    );
    assert_eq!(
        h.file_in(&candidate, "partial.txt").await?.as_deref(),
        Some("partial\n")
    );
    // The background child died with the group: no marker two seconds later.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !h.path("report/marker").exists(),
        "a child of the agent survived"
    );
    Ok(())
}

#[tokio::test]
async fn missing_agent_command_fails_cleanly() -> anyhow::Result<()> {
    let mut h = Harness::start().await?;
    let missing = h.path("bin/no-such-agent");
    let profile = agent_profile("ghost", "codex", &missing, &[])?;
    h.env.agents.insert("ghost".into(), profile);
    let base = h.base().await?;
    let end = run_episode(&request("run-ghost", &base, "ghost", 5), 1, &h.env).await;
    let EpisodeEnd::Outcome {
        outcome: ExecOutcome::Failed { error },
        ..
    } = end
    else {
        panic!("{end:?}")
    };
    assert!(error.starts_with("cannot start agent"), "{error}");
    assert!(h.work_dir_is_empty());
    Ok(())
}

/// A stand-in agent that records every environment it can read and tries a hidden file.
const ENV_SNOOP: &str = r#"
env | cut -d= -f1 | sort > env-names.txt
for f in /proc/[0-9]*/environ; do tr '\0' '\n' < "$f" | cut -d= -f1; done | sort -u > proc-env-names.txt
cat "$SECRET_FILE" > secret-copy.txt 2>/dev/null
ls "$REPORT_DIR" > report-listing.txt 2>&1
echo '{"type":"result","subtype":"success","is_error":false,"result":"snooped","num_turns":1,"total_cost_usd":0,"usage":{"input_tokens":1,"output_tokens":1}}'
"#;

/// In the agent sandbox a CLI agent's whole environment, and every environment it can read
/// under /proc, is exactly PATH, LANG, its HOME and the profile's variables; a hidden file
/// reads as empty; the worker's other directories are out of sight.
#[tokio::test]
#[allow(clippy::print_stderr)] // the SKIP line
async fn sandboxed_cli_agent_sees_only_its_own_environment() -> anyhow::Result<()> {
    use loopgate_checks::{hidden_paths, probe_agent_sandbox, SandboxSettings};
    use loopgate_executor::AgentNetworkPolicy;
    use std::os::unix::fs::PermissionsExt;
    use std::sync::Arc;

    let mut h = Harness::start().await?;
    // The check user (when the tests run as root) must be able to reach the work dir.
    std::fs::set_permissions(h.scratch.path(), std::fs::Permissions::from_mode(0o711))?;
    let secret = h.path("report/worker-secret.txt");
    std::fs::write(&secret, "worker-secret-value-123")?;
    let hidden = hidden_paths(std::slice::from_ref(&secret), h.scratch.path());
    let sandbox =
        match probe_agent_sandbox(&SandboxSettings::default(), &h.env.work_dir, hidden).await {
            Ok(sandbox) => sandbox,
            Err(err) => {
                eprintln!("SKIP sandboxed CLI agent test: {err}");
                return Ok(());
            }
        };
    h.env.agent = AgentIsolationEnv {
        sandbox: Arc::new(sandbox),
        network: AgentNetworkPolicy::default(),
    };
    let command = script(&h.path("bin"), "snoop", ENV_SNOOP)?;
    let set_env = [
        ("REPORT_DIR", h.path("report").display().to_string()),
        ("SECRET_FILE", secret.display().to_string()),
    ];
    let profile = agent_profile("snoop", "claude_code", &command, &set_env)?;
    h.env.agents.insert("snoop".to_string(), profile);
    let base = h.base().await?;
    let end = run_episode(&request("run-snoop", &base, "snoop", 30), 1, &h.env).await;
    let EpisodeEnd::Outcome {
        outcome: ExecOutcome::Frozen { candidate, .. },
        ..
    } = end
    else {
        panic!("{end:?}")
    };
    let allowed = [
        "HOME",
        "LANG",
        "PATH",
        "PWD",
        "OLDPWD",
        "SHLVL",
        "_",
        "PASSED_THROUGH",
        "REPORT_DIR",
        "SECRET_FILE",
    ];
    for file in ["env-names.txt", "proc-env-names.txt"] {
        let names = h.file_in(&candidate, file).await?.unwrap_or_default();
        assert!(names.contains("PATH"), "{file}: {names}");
        for name in names.lines().filter(|l| !l.is_empty()) {
            assert!(
                allowed.contains(&name),
                "{file}: unexpected variable {name}"
            );
        }
    }
    assert_eq!(
        h.file_in(&candidate, "secret-copy.txt").await?.as_deref(),
        Some("")
    );
    // The hidden file's directory is visible (it is not hidden), the file itself is empty.
    let listing = h
        .file_in(&candidate, "report-listing.txt")
        .await?
        .unwrap_or_default();
    assert!(listing.contains("worker-secret.txt"), "{listing}");
    assert_eq!(
        h.env.agent_isolation_for("snoop"),
        loopgate_protocol::wire::AgentIsolation {
            sandboxed: true,
            network: true,
            note: String::new(),
        }
    );
    Ok(())
}
