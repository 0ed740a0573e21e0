//! The gui route end to end over the real stack and real headless Chromium: the manager sends
//! a `gui` step; a stand-in executor opens the workspace page, reads the snapshot, clicks the
//! button by its ref (a bad ref first gets a clear tool error), saves a screenshot and
//! finishes; the auditor's `loopgate browse` check passes only by clicking the same button, and
//! a file check sees the screenshot frozen into the snapshot. The executor's profile has
//! `vision = true`: the screenshot reaches the model as an `image_url` part (checked and
//! decoded by the stand-in) on the turn after it, and on no earlier turn. The browse check's
//! own screenshot is its evidence: stored as a blob and named by digest in its record.

use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions, StackSecrets};
use serde_json::{json, Value};

use super::secrets::{snapshot_files, COPY_EVERYTHING};

const PAGE: &str = r#"<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Greeter</h1>
<button onclick="document.getElementById('out').textContent='Hello, loopgate!'">Greet</button>
<p id="out"></p>
</body></html>"#;

const TASK: &str = r#"
name = "greeter"
goal = "Check the greeter page greets when its button is clicked, and keep a screenshot"

[[acceptance]]
id = "greets-on-click"
description = "clicking Greet shows the greeting"
check = "loopgate browse --url index.html --click Greet --expect-text 'Hello, loopgate!' --screenshot shots/audit.png"
blocking = true

[[acceptance]]
id = "screenshot-kept"
description = "the executor saved a screenshot"
check = "test -s shots/greet.png"
blocking = true

[gui]

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 3
max_steps = 10
self_checks = 0
"#;

/// The ref on the snapshot line that contains `needle`.
fn ref_on_line(snapshot: &str, needle: &str) -> Option<String> {
    let line = snapshot.lines().find(|l| l.contains(needle))?;
    let start = line.find("[ref=")? + 5;
    let end = line[start..].find(']')? + start;
    Some(line[start..end].to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gui_step_clicks_by_ref_and_the_browse_check_passes() -> anyhow::Result<()> {
    let executor = Reply::dynamic(|req: &Value| {
        let turns = assistant_turns(req);
        let last = last_message_content(req, "tool").unwrap_or_default();
        match turns {
            0 => Reply::tool_call("browser_navigate", json!({"url": "index.html"})),
            1 => Reply::tool_call("browser_snapshot", json!({})),
            2 => Reply::tool_call("browser_click", json!({"ref": "e999"})),
            3 => {
                // The snapshot is two results back; the bad-ref error is the last one.
                let snapshot = req["messages"]
                    .as_array()
                    .and_then(|m| {
                        m.iter()
                            .filter(|m| m["role"] == "tool")
                            .filter_map(|m| m["content"].as_str())
                            .find(|c| c.contains("[ref="))
                            .map(str::to_string)
                    })
                    .unwrap_or_default();
                match ref_on_line(&snapshot, "button \"Greet\"") {
                    Some(r) => Reply::tool_call("browser_click", json!({"ref": r})),
                    None => Reply::tool_call(
                        "finish",
                        json!({"summary": format!("no Greet ref in: {snapshot}")}),
                    ),
                }
            }
            4 => Reply::tool_call("browser_snapshot", json!({})),
            5 => Reply::tool_call("browser_screenshot", json!({"path": "shots/greet.png"})),
            _ => Reply::tool_call(
                "finish",
                json!({"summary": format!("clicked Greet; last: {}", last.lines().next().unwrap_or_default())}),
            ),
        }
    });
    let step = "Next: gui\nTask: open index.html, click Greet, save shots/greet.png";
    let (model, opts) = gui_model_and_options(step, executor, true).await?;
    let stack = Stack::start(opts).await?;
    wait_until_gui_offered(&stack, &model).await?;
    let id = stack.submit(TASK, &[("index.html", PAGE)]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    let requests = model.requests("standin-executor");
    assert!(requests.len() >= 7, "{} executor turns", requests.len());
    // The gui episode offers the browser tools beside the text tools.
    let tools: Vec<String> = requests[0]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for name in [
        "browser_navigate",
        "browser_snapshot",
        "browser_click",
        "shell",
        "write_file",
    ] {
        assert!(
            tools.iter().any(|t| t == name),
            "{name} missing from {tools:?}"
        );
    }
    let result = |i: usize| last_message_content(&requests[i], "tool").unwrap_or_default();
    assert!(
        result(2).contains("button \"Greet\" [ref="),
        "snapshot: {}",
        result(2)
    );
    assert!(
        result(3).starts_with("error: unknown ref \"e999\""),
        "bad ref: {}",
        result(3)
    );
    assert!(result(4).starts_with("clicked "), "click: {}", result(4));
    assert!(
        result(5).contains("Hello, loopgate!"),
        "after the click: {}",
        result(5)
    );
    assert!(result(6).contains("PNG"), "screenshot: {}", result(6));
    // Vision: the screenshot goes with its tool result as an image part, from then on.
    let images = model.images("standin-executor");
    assert!(
        images[..6].iter().all(Vec::is_empty),
        "images before the screenshot: {:?}",
        &images[..6]
    );
    assert_eq!(images[6].len(), 1, "{:?}", images[6]);
    assert_eq!(images[6][0].media_type, "image/png");
    assert_eq!(images[6][0].role, "user");
    assert!(images[6][0].bytes.starts_with(b"\x89PNG\r\n\x1a\n"));
    // The manager's profile is text-only and never sees one.
    assert!(model.images("standin-manager").iter().all(Vec::is_empty));

    let execs = stack.log_entries(&id, "exec_result").await?;
    assert_eq!(execs.len(), 1, "{execs:?}");
    let history = stack.get(&format!("/v1/runs/{id}/evidence")).await?;
    let evidence = history["evidence"].as_array().cloned().unwrap_or_default();
    for criterion in ["greets-on-click", "screenshot-kept"] {
        assert!(
            evidence
                .iter()
                .any(|e| e["check_id"] == criterion && e["verdict"] == "pass"),
            "{criterion}: {history}"
        );
    }
    // The browse check's own screenshot is its evidence (the file check has none).
    let browse = evidence
        .iter()
        .find(|e| e["check_id"] == "greets-on-click" && e["verdict"] == "pass")
        .cloned()
        .unwrap_or_default();
    let shots = browse["screenshots"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(shots.len(), 1, "{browse}");
    assert_eq!(shots[0]["path"], "shots/audit.png", "{browse}");
    assert_eq!(shots[0]["media_type"], "image/png", "{browse}");
    let digest = shots[0]["digest"].as_str().unwrap_or_default();
    let png = reqwest::get(format!("{}/v1/blobs/{digest}", stack.any_http()))
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "blob {digest}");
    assert_eq!(Some(png.len() as u64), shots[0]["size_bytes"].as_u64());
    assert!(
        evidence
            .iter()
            .filter(|e| e["check_id"] == "screenshot-kept")
            .all(|e| e.get("screenshots").is_none()),
        "{history}"
    );
    Ok(())
}

/// A `cli` step of a `[gui]` task (the manager's choice; the clause steps after it keep it)
/// writes the page with the file tools, and its `finish` self-check runs the task's browser
/// check in the agent's sandbox with `[gui]`'s `serve` and `url`, as the audit does: the
/// check passes there, so `finish` is taken at once. Without `[gui]` the check's `/` is the
/// workspace's own directory (no server), the self-check fails and `finish` is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cli_steps_self_check_runs_the_browser_check_with_the_gui_table() -> anyhow::Result<()> {
    let executor = Reply::dynamic(|req: &Value| match assistant_turns(req) {
        0 => Reply::tool_call(
            "write_file",
            json!({"path": "site/index.html", "content": "<!doctype html><h1>Hello, page</h1>"}),
        ),
        _ => Reply::tool_call("finish", json!({"summary": "wrote index.html"})),
    });
    let step = "Next: cli\nTask: write site/index.html with the heading Hello, page";
    let (model, opts) = gui_model_and_options(step, executor, false).await?;
    let stack = Stack::start(opts).await?;
    let task = r#"
goal = "Write site/index.html with the heading Hello, page"

[[acceptance]]
id = "heading"
check = "loopgate browse --url / --expect-text 'Hello, page'"
blocking = true

[gui]
serve = "cd site && exec python3 -m http.server 8791 --bind 127.0.0.1"
url = "http://127.0.0.1:8791"

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 2
max_steps = 6
self_checks = 1
"#;
    let id = stack.submit(task, &[]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let requests = model.requests("standin-executor");
    let refusals: Vec<String> = requests
        .iter()
        .filter_map(|r| last_message_content(r, "tool"))
        .filter(|t| t.starts_with("finish refused"))
        .collect();
    assert!(refusals.is_empty(), "the self-check failed: {refusals:?}");
    assert_eq!(requests.len(), 2, "write, then finish taken at once");
    let dispatched = stack.log_entries(&id, "exec_dispatched").await?;
    assert_eq!(dispatched[0]["capability"], "cli", "{dispatched:?}");
    Ok(())
}

/// The task's `serve` command runs what the agent writes, so it is treated like the agent: a
/// hostile one (the secrets test's `COPY_EVERYTHING`: every environment, `/proc` entry and
/// daemon config file it can reach, copied into the workspace) runs in the agent's sandbox
/// with the browser, and the browser reaches the app on the sandbox's own loopback. The stack
/// carries known secrets; the run completes, the page the browser showed came from the serve
/// command, the copies ran, and the frozen snapshot holds none of the secrets and no sight of
/// the worker's processes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serve_command_and_the_browser_run_in_the_agents_sandbox() -> anyhow::Result<()> {
    let executor = Reply::dynamic(|req: &Value| {
        let turns = assistant_turns(req);
        match turns {
            0 => Reply::tool_call("browser_navigate", json!({"url": "/"})),
            1 => Reply::tool_call("browser_snapshot", json!({})),
            _ => Reply::tool_call("finish", json!({"summary": "looked at the served page"})),
        }
    });
    let step = "Next: gui\nTask: open the served page and look at it";
    let (model, mut opts) = gui_model_and_options(step, executor, false).await?;
    let secrets = StackSecrets::random();
    opts.secrets = Some(secrets.clone());
    let stack = Stack::start(opts).await?;
    wait_until_gui_offered(&stack, &model).await?;
    let task = format!(
        r#"
goal = "Serve the greeter page and look at it"

[[acceptance]]
id = "serve-ran"
check = "test -s env.txt"
blocking = true

[gui]
serve = '''{COPY_EVERYTHING}; exec python3 -m http.server 8765 --bind 127.0.0.1'''
url = "http://127.0.0.1:8765/"

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 2
max_steps = 6
self_checks = 0
"#
    );
    let id = stack.submit(&task, &[("index.html", PAGE)]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(120)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    let requests = model.requests("standin-executor");
    assert!(requests.len() >= 3, "{} executor turns", requests.len());
    let result = |i: usize| last_message_content(&requests[i], "tool").unwrap_or_default();
    assert!(
        result(1).starts_with("navigated to http://127.0.0.1:8765/"),
        "navigate: {}",
        result(1)
    );
    assert!(
        result(2).contains("button \"Greet\""),
        "the served page: {}",
        result(2)
    );
    let files = snapshot_files(&stack, done["snapshot"].as_str().unwrap_or_default()).await?;
    let file = |name: &str| {
        files
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, text)| text.clone())
            .unwrap_or_default()
    };
    // The copies ran, with the shell's environment only...
    let env = file("env.txt");
    assert!(env.contains("PATH=") && env.contains("HOME="), "{env}");
    for worker_var in ["LOOPGATE", "NATS", "REDIS", "RUST_LOG", "OTEL"] {
        assert!(
            !env.contains(worker_var),
            "{worker_var} in the serve env:\n{env}"
        );
    }
    // ... in their own pid namespace: no daemon of the stack in sight ...
    let cmdlines = file("all-cmdline.txt");
    assert!(cmdlines.contains("== /proc/"), "{cmdlines}");
    for daemon in [
        "loopgate-executor",
        "loopgate-manager",
        "nats-server",
        "redis-server",
    ] {
        assert!(!cmdlines.contains(daemon), "{daemon} visible:\n{cmdlines}");
    }
    // ... and took no secret.
    for (path, text) in &files {
        let found = secrets.found_in(text);
        assert!(found.is_empty(), "{path} holds {found:?}:\n{text}");
    }
    Ok(())
}

/// How many turns the model has answered in this request's conversation.
pub(super) fn assistant_turns(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

/// The stand-in model (the manager answers `step`, the executor `executor`; with `vision` the
/// executor's profile takes images) and the stack options of [`gui_options`] around it.
async fn gui_model_and_options(
    step: &'static str,
    executor: Reply,
    vision: bool,
) -> anyhow::Result<(StandInModel, StackOptions)> {
    let script = Script::new()
        .fallback("standin-manager", manager_reply(step))
        .fallback("standin-executor", executor);
    let model = StandInModel::start(script).await?;
    let mut exec = Profile::new("exec", &model.base_url(), "standin-executor");
    if vision {
        exec = exec.with_vision();
    }
    let opts = gui_options(&model, exec);
    Ok((model, opts))
}

/// One gui executor (`exec`) beside the stand-in manager, announcing `gui` with a 3 s TTL.
fn gui_options(model: &StandInModel, exec: Profile) -> StackOptions {
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            exec,
        ],
        1,
    );
    opts.capabilities = vec!["cli", "gui"];
    opts.executor_extra = "capability_ttl_secs = 3".into();
    opts
}

/// The manager: the probe runs (`ASK_TASK`) get a question, so they stop at their first
/// decision; every other run gets `step`.
pub(super) fn manager_reply(step: &'static str) -> Reply {
    Reply::dynamic(move |req: &Value| {
        let user = last_message_content(req, "user").unwrap_or_default();
        if user.contains(ASK_GOAL) {
            Reply::content("Current task state: nothing yet\nNext: ask\nTask: which greeting?")
        } else {
            Reply::content(step)
        }
    })
}

/// Probe runs until a decision offers `gui` (the gui worker's heartbeat has reached the
/// manager).
async fn wait_until_gui_offered(stack: &Stack, model: &StandInModel) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !next_decision_offers_gui(stack, model).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "gui never offered\n{}",
            stack.logs()
        );
    }
    Ok(())
}

pub(super) const ASK_GOAL: &str = "Say hello to the probe";

const ASK_TASK: &str = r#"
goal = "Say hello to the probe"

[[acceptance]]
id = "hello"
check = "true"
blocking = true

[roles]
manager = "mgr"
executor = "exec"

[budget]
# The probe is the manager's decision (not the goal's one clause as the first step).
clause_steps = false
"#;

/// Submit a run (its one manager decision asks a question, so the run stops there) and say
/// whether that decision offered `gui`.
async fn next_decision_offers_gui(stack: &Stack, model: &StandInModel) -> anyhow::Result<bool> {
    probe_offers_gui(stack, model, ASK_TASK).await
}

/// Submit `probe` (a task with goal [`ASK_GOAL`], so its one manager decision asks a question
/// and the run stops there) and say whether that decision offered `gui`.
pub(super) async fn probe_offers_gui(
    stack: &Stack,
    model: &StandInModel,
    probe: &str,
) -> anyhow::Result<bool> {
    let before = model.request_count("standin-manager");
    stack.submit(probe, &[]).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while model.request_count("standin-manager") == before {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "no manager decision\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let requests = model.requests("standin-manager");
    let system = requests
        .last()
        .and_then(|r| last_message_content(r, "system"))
        .unwrap_or_default();
    anyhow::ensure!(
        system.contains("Next: <"),
        "not a decision prompt: {system}"
    );
    Ok(system.contains("cli|gui|done"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gui_is_offered_only_while_a_gui_worker_is_live() -> anyhow::Result<()> {
    const TTL_SECS: u64 = 2;
    let script = Script::new().fallback("standin-manager", manager_reply("Next: cli\nTask: x"));
    let model = StandInModel::start(script).await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.capabilities = vec!["cli", "gui"];
    opts.executor_extra = format!("capability_ttl_secs = {TTL_SECS}");
    let mut stack = Stack::start(opts).await?;

    // Offered once the gui worker's first heartbeat is in.
    wait_until_gui_offered(&stack, &model).await?;

    // The last gui worker dies without withdrawing (SIGKILL): within the TTL (plus the
    // heartbeat's delivery), the manager stops offering gui.
    stack.executors[0].kill();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(TTL_SECS + 3);
    while next_decision_offers_gui(&stack, &model).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "gui still offered {}s after the last gui worker died",
            TTL_SECS + 3
        );
    }
    Ok(())
}
