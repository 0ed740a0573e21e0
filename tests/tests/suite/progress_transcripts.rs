//! Time, progress and transcripts (issue 42 parts 2 and 3) in real headless Chromium against a stack with
//! known secrets (per-role NATS users from deploy/nats/, a model API key): while the stand-in
//! executor's `shell` call runs, the run page shows the tool being called and the episode's
//! elapsed time within 2 s of the stand-in making the call, and the time moves on; once the
//! round is done, its transcript (the model's turn, the call with its arguments, the result)
//! is readable on the page beside the diff and from `loopgate log RUN --round 1 --transcript`,
//! with the model API key the agent wrote into its command redacted; `loopgate log` lines
//! carry their time, and the episode's duration; the run (`GET /v1/runs/{id}`, `loopgate
//! status`) keeps the running episode's latest progress. A running audit says the same way
//! which check it runs (n of m) and for how long, on the run, in `status`, on the page and in
//! `log`/`watch`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_test_support::{wait_until, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions, StackSecrets};
use serde_json::json;

use super::console::{assert_no_page_errors, open_console, save_screenshot, wait_js, TOKEN};

const WAIT: Duration = Duration::from_secs(90);
/// How soon the page must show a call the stand-in made.
const SHOWN_WITHIN: Duration = Duration::from_secs(2);

const TASK: &str = r#"name = "operator-view"
goal = "Create hello.py that prints exactly: hello, loopgate"

[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 2
self_checks = 0
clause_steps = false
"#;

async fn cli(stack: &Stack, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let bin = loopgate_test_support::workspace_bin("loopgate")?;
    Ok(tokio::process::Command::new(bin)
        .args(["--server", &stack.http, "--token", TOKEN])
        .args(args)
        .output()
        .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_episode_shows_its_call_and_its_transcript_reads_redacted() -> anyhow::Result<()>
{
    let secrets = StackSecrets::random();
    let key = secrets.model_key.clone();
    // The stand-in's executor: after a second (the progress throttle's interval has passed),
    // a `shell` call that runs for a while, its command quoting the model API key; then the
    // file and `finish`. `called` is when the call left the stand-in.
    let called: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let mark = called.clone();
    let command = format!("sleep 6; echo 'key was {key}'");
    let shell = Reply::dynamic(move |_| {
        if let Ok(mut at) = mark.lock() {
            *at = Some(Instant::now());
        }
        Reply::tool_call("shell", json!({ "command": command }))
    });
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content(
                    "Current task state: nothing yet\nNext: cli\nTask: create hello.py that prints hello, loopgate",
                )],
            )
            .replies(
                "standin-executor",
                [
                    Reply::delayed(Duration::from_millis(1500), shell),
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
                ],
            ),
    )
    .await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.token = Some(TOKEN.to_string());
    opts.secrets = Some(secrets);
    let stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();

    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;
    wait_until(WAIT, || async {
        called.lock().map(|at| at.is_some()).unwrap_or(false)
    })
    .await
    .context("the stand-in never made the shell call")?;
    let at = called.lock().ok().and_then(|at| *at).context("call time")?;
    let progress = "document.querySelector('#timeline li.round[data-round=\"1\"] p.progress[data-tool=\"shell\"]')";
    let text = wait_js(
        &mut s,
        &format!("{progress} && {progress}.textContent"),
        "the running call on the page",
    )
    .await?;
    let shown_after = at.elapsed();
    let text = text.as_str().unwrap_or_default().to_string();
    eprintln!("the running call showed {shown_after:?} after the stand-in made it: {text}");
    assert!(
        shown_after <= SHOWN_WITHIN,
        "the call showed {shown_after:?} after the stand-in made it: {text}"
    );
    assert!(text.contains("calling shell"), "{text}");
    assert!(text.contains("s elapsed"), "{text}");
    save_screenshot(&mut s, "live-episode.png").await?;
    // The run keeps the episode's latest progress, and `loopgate status` says it.
    let run = stack.run(&id).await?;
    assert_eq!(run["episode_progress"][0]["tool"], "shell", "{run}");
    let out = cli(&stack, &["status", &id]).await?;
    let status = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        status.contains("running: executor exec-1 turn 1, calling shell"),
        "{status}"
    );
    // The elapsed time moves on while the call runs.
    wait_js(
        &mut s,
        &format!(
            "{progress} && {progress}.textContent !== {}",
            serde_json::to_string(&text)?
        ),
        "the elapsed time to move on",
    )
    .await?;

    wait_js(
        &mut s,
        "document.querySelector('#run-head [data-state=completed]')",
        "the run to complete",
    )
    .await?;
    // The round's transcript beside its diff.
    wait_js(
        &mut s,
        "(() => { const d = document.querySelector('#timeline li.round[data-round=\"1\"] details.transcript'); if (!d) return false; if (!d.open) d.open = true; return true; })()",
        "the transcript panel",
    )
    .await?;
    let panel = wait_js(
        &mut s,
        "(() => { const d = document.querySelector('#timeline li.round[data-round=\"1\"] details.transcript'); return d && d.querySelector('.tx-list li[data-kind=\"tool_result\"]') && d.querySelector('.tx-diff .diff-file') ? d.textContent : ''; })()",
        "the transcript and the diff on the page",
    )
    .await?;
    let panel = panel.as_str().unwrap_or_default().to_string();
    assert!(panel.contains("call shell"), "{panel}");
    assert!(panel.contains("sleep 6; echo 'key was ***'"), "{panel}");
    assert!(panel.contains("key was ***"), "{panel}");
    assert!(panel.contains("hello.py"), "{panel}");
    assert!(!panel.contains(&key), "the model key on the page: {panel}");
    save_screenshot(&mut s, "transcript.png").await?;
    let page = s.page_text().await.unwrap_or_default();
    assert!(!page.contains(&key), "the model key on the page");
    assert_no_page_errors(&s);

    // The same transcript from the CLI.
    let out = cli(&stack, &["log", &id, "--round", "1", "--transcript"]).await?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("turn 1: call shell"), "{stdout}");
    assert!(stdout.contains("key was ***"), "{stdout}");
    assert!(stdout.contains("turn 2: call write_file"), "{stdout}");
    assert!(
        !stdout.contains(&key),
        "the model key in the transcript: {stdout}"
    );
    // The log's lines carry their time and the episode's duration; its progress is there.
    let out = cli(&stack, &["log", &id]).await?;
    let log = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "{log}");
    assert!(
        log.lines()
            .all(|l| l.len() > 9 && l.as_bytes()[2] == b':' && l.as_bytes()[5] == b':'),
        "a line without its time: {log}"
    );
    assert!(log.contains("working: turn 1, calling shell"), "{log}");
    assert!(log.contains("[took "), "{log}");
    Ok(())
}

const AUDITED_TASK: &str = r#"name = "audit-progress"
goal = "Create hello.py that prints exactly: hello, loopgate"

[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true

[[acceptance]]
id = "slow-check"
check = "sleep 5; test -f hello.py"
blocking = true
timeout_secs = 60

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 2
self_checks = 0
clause_steps = false
"#;

/// While the round's audit runs its second, slow check, the run (`GET /v1/runs/{id}`,
/// `loopgate status`) and the console say which check runs, n of m, with its elapsed time;
/// the log (`loopgate log`, `loopgate watch`) keeps one line per check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_audit_shows_its_check_n_of_m() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [Reply::content(
                    "Current task state: nothing yet\nNext: cli\nTask: create hello.py that prints hello, loopgate",
                )],
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
                ],
            ),
    )
    .await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.token = Some(TOKEN.to_string());
    // Per-role NATS users: the auditor's may publish its progress.
    opts.secrets = Some(StackSecrets::random());
    let stack = Stack::start(opts).await?;
    let id = stack.submit(AUDITED_TASK, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();
    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;

    // The run: the audit's latest notice names the slow check, the second of two.
    let seen: Arc<Mutex<serde_json::Value>> = Arc::default();
    wait_until(WAIT, || {
        let (stack, id, seen) = (&stack, &id, seen.clone());
        async move {
            let run = stack.run(id).await.unwrap_or_default();
            let found = run["audit_progress"]["check"] == "slow-check";
            if found {
                if let Ok(mut seen) = seen.lock() {
                    *seen = run["audit_progress"].clone();
                }
            }
            found
        }
    })
    .await
    .context("the run never said the slow check runs")?;
    let seen = seen.lock().map(|s| s.clone()).unwrap_or_default();
    assert_eq!(seen["stage"], "checks", "{seen}");
    assert_eq!(seen["check_index"], 2, "{seen}");
    assert_eq!(seen["checks_total"], 2, "{seen}");
    assert_eq!(seen["worker"], "audit-1", "{seen}");
    let out = cli(&stack, &["status", &id]).await?;
    let status = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        status.contains("running: auditor audit-1 auditing: running check slow-check (2 of 2)"),
        "{status}"
    );
    // The console: the round says so, and its elapsed time moves on.
    let line = "document.querySelector('#timeline li.round[data-round=\"1\"] p.audit-progress[data-check=\"slow-check\"]')";
    let text = wait_js(
        &mut s,
        &format!("{line} && {line}.textContent"),
        "the running check on the page",
    )
    .await?;
    let text = text.as_str().unwrap_or_default().to_string();
    assert!(
        text.contains("running check slow-check (2 of 2)") && text.contains("s elapsed"),
        "{text}"
    );
    save_screenshot(&mut s, "live-audit.png").await?;
    wait_js(
        &mut s,
        &format!(
            "{line} && {line}.textContent !== {}",
            serde_json::to_string(&text)?
        ),
        "the audit's elapsed time to move on",
    )
    .await?;

    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}");
    assert!(done["audit_progress"].is_null(), "{done}");
    assert_no_page_errors(&s);
    // The log and watch: one line per check, each with its time.
    for verb in ["log", "watch"] {
        let out = cli(&stack, &[verb, &id]).await?;
        let log = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "{verb}: {log}");
        assert!(
            log.contains("auditor audit-1 auditing: running check slow-check (2 of 2)"),
            "{verb}: {log}"
        );
    }
    Ok(())
}
