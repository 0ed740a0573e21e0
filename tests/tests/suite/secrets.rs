//! Secrets the agent cannot read, and no secret in any output (issue 15 items 4-6): a stack
//! with known secret values (per-role NATS users from deploy/nats/, a Redis password carried in
//! the manager's Redis URL, a model API key) and a stand-in executor model whose `shell` copies
//! every environment and secret file it can reach into the workspace: its own `env`,
//! `/proc/$PPID/environ`, `/proc/1/environ`, all of `/proc/*/environ` and `cmdline`, and the
//! daemons' config files under /tmp. The run completes; the frozen snapshot holds none of the
//! secrets (while proving the copies ran), the record says the agent ran sandboxed and every
//! check isolated, and no secret appears in any daemon's log, OTel span, the run log, the
//! event stream or any API answer.
//!
//! The control (`sandbox = "off"`): the same shell without the sandbox, run as root, does read
//! the executor's secrets, so the grep can fail (as another user it cannot: the executor is
//! non-dumpable); the record says the agent ran unsandboxed.

use std::process::Command;
use std::time::Duration;

use loopgate_test_support::{cache_dir, free_port, ChildGuard};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions, StackSecrets};
use serde_json::{json, Value};

const TASK: &str = r#"
goal = "Collect the environment into env.txt"
[[acceptance]]
id = "env-collected"
check = "test -s env.txt"
blocking = true
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 2
self_checks = 0
"#;

/// Everything a hostile agent would try to copy out.
pub(crate) const COPY_EVERYTHING: &str = "env > env.txt; \
    cat /proc/$PPID/environ > ppid-environ.txt 2>&1; \
    cat /proc/1/environ > pid1-environ.txt 2>&1; \
    for f in /proc/[0-9]*/environ /proc/self/environ; do echo \"== $f\"; cat \"$f\"; echo; done > all-environ.txt 2>&1; \
    for f in /proc/[0-9]*/cmdline; do echo \"== $f\"; cat \"$f\"; echo; done > all-cmdline.txt 2>&1; \
    for f in /tmp/*/*.toml /tmp/.*/*.toml /tmp/*/*.conf /tmp/.*/*.conf; do echo \"== $f\"; cat \"$f\"; done > configs.txt 2>&1; \
    ls -la /proc > proc-list.txt 2>&1; true";

fn script() -> Script {
    Script::new()
        .replies(
            "standin-manager",
            [Reply::content(
                "Current task state: nothing yet\nNext: cli\nTask: collect the environment into env.txt",
            )],
        )
        .replies(
            "standin-executor",
            [
                Reply::tool_call("shell", json!({"command": COPY_EVERYTHING})),
                Reply::tool_call("finish", json!({"summary": "collected"})),
            ],
        )
}

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

/// Every file of `snapshot`, as (path, lossy text).
pub(crate) async fn snapshot_files(
    stack: &Stack,
    snapshot: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    let out = tempfile::tempdir()?;
    let mut files = Vec::new();
    for path in stack.checkout(snapshot, out.path()).await? {
        let rel = path.strip_prefix(out.path())?.display().to_string();
        files.push((
            rel,
            String::from_utf8_lossy(&std::fs::read(&path)?).into_owned(),
        ));
    }
    Ok(files)
}

/// Everything the API says about run `id`: the run, its log, evidence, rounds, contract and
/// the whole event stream (it ends once the run is terminal).
async fn api_text(stack: &Stack, id: &str) -> anyhow::Result<String> {
    let mut text = String::new();
    for path in ["", "/log", "/evidence", "/rounds", "/contract"] {
        text.push_str(
            &stack
                .get(&format!("/v1/runs/{id}{path}"))
                .await?
                .to_string(),
        );
    }
    text.push_str(&stack.get("/v1/runs").await?.to_string());
    let events = reqwest::Client::new()
        .get(format!("{}/v1/runs/{id}/events", stack.http))
        .timeout(Duration::from_secs(30))
        .send()
        .await?
        .text()
        .await?;
    anyhow::ensure!(events.contains("event: end"), "event stream: {events}");
    text.push_str(&events);
    Ok(text)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_shell_freezes_no_secret_and_no_output_carries_one() -> anyhow::Result<()> {
    let oteltap = cache_dir().join("venv/bin/oteltap");
    anyhow::ensure!(
        oteltap.exists(),
        "{} is missing: run scripts/install-deps.sh services",
        oteltap.display()
    );
    let port = free_port()?;
    let mut cmd = Command::new(&oteltap);
    cmd.args(["--port", &port.to_string()]);
    let receiver = ChildGuard::spawn("oteltap", cmd)?;
    let model = StandInModel::start(script()).await?;
    let secrets = StackSecrets::random();
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.secrets = Some(secrets.clone());
    // The default `auto`: bubblewrap must work here (install-deps.sh installs it), or the
    // executor refuses to start and this test fails.
    opts.env = vec![
        (
            "OTEL_EXPORTER_OTLP_ENDPOINT".into(),
            format!("http://127.0.0.1:{port}"),
        ),
        ("OTEL_EXPORTER_OTLP_PROTOCOL".into(), "http/protobuf".into()),
        ("OTEL_BSP_SCHEDULE_DELAY".into(), "100".into()),
    ];
    let mut stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    // The snapshot: the copies ran, and hold none of the secrets.
    let snapshot = done["snapshot"].as_str().unwrap_or_default();
    let files = snapshot_files(&stack, snapshot).await?;
    let names: Vec<&str> = files.iter().map(|(p, _)| p.as_str()).collect();
    for want in [
        "env.txt",
        "ppid-environ.txt",
        "pid1-environ.txt",
        "all-environ.txt",
        "configs.txt",
    ] {
        assert!(names.contains(&want), "{want} missing from {names:?}");
    }
    let env = &files.iter().find(|(p, _)| p == "env.txt").unwrap().1;
    assert!(env.contains("PATH=") && env.contains("HOME="), "{env}");
    for (path, text) in &files {
        let found = secrets.found_in(text);
        assert!(found.is_empty(), "{path} holds {found:?}:\n{text}");
    }

    // The record: the agent ran sandboxed, every check isolated.
    let results = stack.log_entries(&id, "exec_result").await?;
    assert!(!results.is_empty());
    for entry in &results {
        assert_eq!(entry["agent_isolation"]["sandboxed"], true, "{entry}");
        // Unset `agent_network`: the built-in shell runs offline.
        assert_eq!(entry["agent_isolation"]["network"], false, "{entry}");
    }
    let evidence = done["evidence"].as_array().cloned().unwrap_or_default();
    assert!(!evidence.is_empty(), "{done}");
    for item in &evidence {
        assert_eq!(item["isolated"], true, "{item}");
    }

    // No output carries a secret: the API (run, log, evidence, rounds, events), every daemon's
    // log, and every OTel span and attribute.
    let api = api_text(&stack, &id).await?;
    assert!(api.contains(snapshot));
    let found = secrets.found_in(&api);
    assert!(found.is_empty(), "the API shows {found:?}");
    stack.stop_gracefully(Duration::from_secs(10)).await;
    let mut daemons = stack.manager_log();
    for executor in &stack.executors {
        daemons.push_str(&executor.log_text());
    }
    daemons.push_str(&stack.auditor.log_text());
    assert!(daemons.contains("starting"), "no daemon logs captured");
    let found = secrets.found_in(&daemons);
    assert!(found.is_empty(), "the daemon logs show {found:?}");
    // The spans of the run reached the receiver before the grep.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let spans = loop {
        let text = receiver.log_text();
        if text.contains(&id) || tokio::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(
        spans.contains(&id),
        "no span of run {id} reached the receiver"
    );
    let found = secrets.found_in(&spans);
    assert!(found.is_empty(), "OTel spans show {found:?}");
    Ok(())
}

/// The control: with `sandbox = "off"` the same shell reads the executor's own secrets (so the
/// grep above can fail), and every episode's record says the agent ran unsandboxed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_sandbox_the_record_says_so_and_the_secrets_are_within_reach(
) -> anyhow::Result<()> {
    let model = StandInModel::start(script()).await?;
    let secrets = StackSecrets::random();
    let mut opts = StackOptions::new(profiles(&model), 1);
    opts.secrets = Some(secrets.clone());
    opts.executor_extra = "sandbox = \"off\"".into();
    let stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let results = stack.log_entries(&id, "exec_result").await?;
    assert!(!results.is_empty());
    for entry in &results {
        let isolation: &Value = &entry["agent_isolation"];
        assert_eq!(isolation["sandboxed"], false, "{entry}");
        assert!(
            isolation["note"]
                .as_str()
                .is_some_and(|n| n.contains("sandbox = \"off\"")),
            "{entry}"
        );
    }
    let snapshot = done["snapshot"].as_str().unwrap_or_default();
    let files = snapshot_files(&stack, snapshot).await?;
    let all: String = files.iter().map(|(_, t)| t.as_str()).collect();
    let found = secrets.found_in(&all);
    let root = std::fs::metadata("/proc/self").is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid() == 0
    });
    if root {
        // A root shell has CAP_SYS_PTRACE: the executor's sealing (non-dumpable) cannot stop
        // it reading `/proc/$PPID/environ`.
        assert!(
            found.contains(&"NATS executor password") && found.contains(&"model API key"),
            "unsandboxed, a root shell should reach the executor's environment: {found:?}"
        );
    } else {
        // Of its own user, it cannot: the executor sealed itself (issue 38 item 2).
        assert!(found.is_empty(), "the shell read {found:?}");
    }
    Ok(())
}
