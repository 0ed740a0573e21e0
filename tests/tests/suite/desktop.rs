//! The gui route's desktop backend end to end over the real stack, a real Xvfb and AT-SPI bus:
//! the manager offers `gui` to a `[gui] backend = "desktop"` task only while a live executor
//! announces the desktop backend; a stand-in executor launches the desktop-notes example,
//! snapshots the tree, gets an error for a bad ref, types, clicks Save by its ref, screenshots
//! and finishes; the auditor's `loopgate desktop-check` passes with the click (and fails
//! without it), its screenshot stored as evidence. A hostile launched program finds no worker
//! secret and no other episode's display. Without Xvfb each test prints a SKIP line (an error
//! under `CI`).

use std::path::PathBuf;
use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions, StackSecrets};
use serde_json::{json, Value};

use super::gui::{assistant_turns, manager_reply, probe_offers_gui, ASK_GOAL};
use super::secrets::{snapshot_files, COPY_EVERYTHING};

/// The example app, as the tasks below ship it.
fn notes_py() -> anyhow::Result<String> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/desktop-notes/workspace/notes.py");
    Ok(std::fs::read_to_string(path)?)
}

const LAUNCH: &str = "/usr/bin/python3 notes.py";

const TASK: &str = r#"
goal = "Check the notes app saves a typed note when Save is clicked, and keep a screenshot"

[[acceptance]]
id = "saves-on-click"
description = "typing a note and clicking Save shows it as saved"
check = "loopgate desktop-check --launch '/usr/bin/python3 notes.py' --type 'Note=milk' --click Save --expect-text 'Saved: milk' --screenshot shots/audit.png"
blocking = true

[[acceptance]]
id = "not-without-click"
description = "without the click the note is not saved"
check = "! loopgate desktop-check --launch '/usr/bin/python3 notes.py' --type 'Note=milk' --expect-text 'Saved: milk' --timeout-secs 2"
blocking = true

[[acceptance]]
id = "screenshot-kept"
description = "the executor saved a screenshot"
check = "test -s shots/notes.png"
blocking = true

[gui]
backend = "desktop"

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 3
max_steps = 10
self_checks = 0
"#;

/// A probe run of a desktop task (its one decision asks a question).
fn desktop_probe() -> String {
    format!(
        r#"
goal = "{ASK_GOAL}"

[[acceptance]]
id = "hello"
check = "true"
blocking = true

[gui]
backend = "desktop"

[roles]
manager = "mgr"
executor = "exec"

[budget]
clause_steps = false
"#
    )
}

/// The same probe for a browser task.
fn browser_probe() -> String {
    desktop_probe().replace("backend = \"desktop\"", "backend = \"browser\"")
}

/// The ref on the line of the latest tool result holding a snapshot that contains `needle`.
fn ref_in_snapshot(req: &Value, needle: &str) -> Option<String> {
    let messages = req["messages"].as_array()?;
    let snapshot = messages
        .iter()
        .rev()
        .filter(|m| m["role"] == "tool")
        .filter_map(|m| m["content"].as_str())
        .find(|c| c.contains("[ref="))?;
    let line = snapshot.lines().find(|l| l.contains(needle))?;
    let start = line.find("[ref=")? + 5;
    let end = line[start..].find(']')? + start;
    Some(line[start..end].to_string())
}

/// One gui executor (`exec`) serving `backends`, beside the stand-in manager.
fn desktop_options(model: &StandInModel, exec: Profile, backends: &str) -> StackOptions {
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            exec,
        ],
        1,
    );
    opts.capabilities = vec!["cli", "gui"];
    opts.executor_extra = format!("capability_ttl_secs = 2\ngui_backends = {backends}");
    opts
}

/// Probe until a desktop task is offered `gui`.
async fn wait_until_desktop_offered(stack: &Stack, model: &StandInModel) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !probe_offers_gui(stack, model, &desktop_probe()).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "desktop gui never offered\n{}",
            stack.logs()
        );
    }
    Ok(())
}

fn executor_script() -> Reply {
    Reply::dynamic(|req: &Value| {
        let missing =
            |what: &str| Reply::tool_call("finish", json!({"summary": format!("no {what} ref")}));
        match assistant_turns(req) {
            0 => Reply::tool_call("desktop_launch", json!({"command": LAUNCH})),
            1 => Reply::tool_call("desktop_snapshot", json!({})),
            2 => Reply::tool_call("desktop_click", json!({"ref": "e999"})),
            3 => match ref_in_snapshot(req, "text \"Note\"") {
                Some(r) => Reply::tool_call("desktop_type", json!({"ref": r, "text": "milk"})),
                None => missing("Note"),
            },
            4 => match ref_in_snapshot(req, "push button \"Save\"") {
                Some(r) => Reply::tool_call("desktop_click", json!({"ref": r})),
                None => missing("Save"),
            },
            5 => Reply::tool_call("desktop_wait_for", json!({"text": "Saved: milk"})),
            6 => Reply::tool_call("desktop_screenshot", json!({"path": "shots/notes.png"})),
            _ => Reply::tool_call("finish", json!({"summary": "saved a note"})),
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_step_clicks_by_ref_and_the_desktop_check_passes() -> anyhow::Result<()> {
    if !loopgate_test_support::desktop_tools_or_skip("e2e desktop step")? {
        return Ok(());
    }
    let manager = manager_reply(
        "Next: gui\nTask: launch the notes app, type milk, click Save, save shots/notes.png",
    );
    let script = Script::new()
        .fallback("standin-manager", manager)
        .fallback("standin-executor", executor_script());
    let model = StandInModel::start(script).await?;
    let opts = desktop_options(
        &model,
        Profile::new("exec", &model.base_url(), "standin-executor").with_vision(),
        r#"["browser", "desktop"]"#,
    );
    let mut stack = Stack::start(opts).await?;
    wait_until_desktop_offered(&stack, &model).await?;
    let notes = notes_py()?;
    let id = stack.submit(TASK, &[("notes.py", notes.as_str())]).await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(180)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    let requests = model.requests("standin-executor");
    assert!(requests.len() >= 8, "{} executor turns", requests.len());
    // The desktop episode offers the desktop tools beside the text tools, not the browser's.
    let tools: Vec<String> = requests[0]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default();
    for name in [
        "desktop_launch",
        "desktop_snapshot",
        "desktop_click",
        "desktop_type",
        "desktop_press_key",
        "desktop_wait_for",
        "desktop_screenshot",
        "shell",
    ] {
        assert!(tools.iter().any(|t| t == name), "{name} missing: {tools:?}");
    }
    assert!(
        !tools.iter().any(|t| t.starts_with("browser_")),
        "{tools:?}"
    );
    let result = |i: usize| last_message_content(&requests[i], "tool").unwrap_or_default();
    assert!(
        result(1).contains("window \"Notes\" is up"),
        "launch: {}",
        result(1)
    );
    assert!(
        result(2).starts_with("Windows: \"Notes\""),
        "snapshot: {}",
        result(2)
    );
    assert!(
        result(2).contains("push button \"Save\" [ref="),
        "snapshot: {}",
        result(2)
    );
    assert!(
        result(3).starts_with("error: unknown ref \"e999\""),
        "bad ref: {}",
        result(3)
    );
    assert!(
        result(4).starts_with("typed 4 characters"),
        "type: {}",
        result(4)
    );
    assert!(result(5).starts_with("clicked e"), "click: {}", result(5));
    assert!(
        result(6).contains("is on the desktop"),
        "wait: {}",
        result(6)
    );
    assert!(result(7).contains("PNG"), "screenshot: {}", result(7));
    // Vision: the screenshot goes with its tool result as an image part.
    let images = model.images("standin-executor");
    assert_eq!(images[7].len(), 1, "{:?}", images[7]);
    assert!(images[7][0].bytes.starts_with(b"\x89PNG\r\n\x1a\n"));

    let history = stack.get(&format!("/v1/runs/{id}/evidence")).await?;
    let evidence = history["evidence"].as_array().cloned().unwrap_or_default();
    for criterion in ["saves-on-click", "not-without-click", "screenshot-kept"] {
        assert!(
            evidence
                .iter()
                .any(|e| e["check_id"] == criterion && e["verdict"] == "pass"),
            "{criterion}: {history}"
        );
    }
    // The desktop check's own screenshot is its evidence.
    let check = evidence
        .iter()
        .find(|e| e["check_id"] == "saves-on-click" && e["verdict"] == "pass")
        .cloned()
        .unwrap_or_default();
    let shots = check["screenshots"].as_array().cloned().unwrap_or_default();
    assert_eq!(shots.len(), 1, "{check}");
    assert_eq!(shots[0]["path"], "shots/audit.png", "{check}");
    let digest = shots[0]["digest"].as_str().unwrap_or_default();
    let png = reqwest::get(format!("{}/v1/blobs/{digest}", stack.any_http()))
        .await?
        .error_for_status()?
        .bytes()
        .await?;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "blob {digest}");

    // The last desktop worker dies without withdrawing: the route stops being offered.
    stack.executors[0].kill();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(6);
    while probe_offers_gui(&stack, &model, &desktop_probe()).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "desktop gui still offered after the last desktop worker died"
        );
    }
    Ok(())
}

/// A gui worker serving only the browser: a browser task is offered `gui`, a desktop task
/// never is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_desktop_task_is_not_offered_gui_by_a_browser_only_worker() -> anyhow::Result<()> {
    let script = Script::new().fallback("standin-manager", manager_reply("Next: cli\nTask: x"));
    let model = StandInModel::start(script).await?;
    let opts = desktop_options(
        &model,
        Profile::new("exec", &model.base_url(), "standin-executor"),
        r#"["browser"]"#,
    );
    let stack = Stack::start(opts).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !probe_offers_gui(&stack, &model, &browser_probe()).await? {
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "browser gui never offered\n{}",
            stack.logs()
        );
    }
    // The worker's heartbeat is in: a desktop task still gets no gui route.
    for _ in 0..2 {
        assert!(!probe_offers_gui(&stack, &model, &desktop_probe()).await?);
    }
    Ok(())
}

/// Reports every X display socket it can connect to besides its own (by path in its `/tmp`,
/// or in the abstract namespace, which a shared network namespace would share).
const PROBE_DISPLAYS: &str = r#"import os, socket
own = os.environ.get("DISPLAY", "")
lines = ["own " + own]
for n in range(0, 64):
    if ":%d" % n == own:
        continue
    for addr in ("/tmp/.X11-unix/X%d" % n, "\0/tmp/.X11-unix/X%d" % n):
        s = socket.socket(socket.AF_UNIX)
        try:
            s.connect(addr)
            lines.append("reachable %r" % addr)
        except OSError:
            pass
        finally:
            s.close()
open("displays.txt", "w").write("\n".join(lines) + "\n")
"#;

/// A hostile program launched on the desktop (with the agent's network on, so it shares the
/// host's network namespace) copies every environment, `/proc` entry and config file it can
/// reach, and tries every X display socket. Another episode's desktop is running on the same
/// host meanwhile. The frozen snapshot holds no secret, no daemon in sight, and no display but
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hostile_desktop_program_finds_no_secret_and_no_other_display() -> anyhow::Result<()> {
    if !loopgate_test_support::desktop_tools_or_skip("e2e hostile desktop program")? {
        return Ok(());
    }
    // The other episode's desktop, on this host.
    let other_dir = tempfile::tempdir()?;
    let mut other_settings = loopgate_desktop::LaunchSettings::detect();
    other_settings.dir = Some(other_dir.path().to_path_buf());
    let mut other = loopgate_desktop::Session::new(other_settings);
    other.start().await?;
    let other_display = other.display().unwrap_or_default().to_string();

    let hostile = format!("{COPY_EVERYTHING}; /usr/bin/python3 probe.py; exec {LAUNCH}");
    let executor = Reply::dynamic(move |req: &Value| match assistant_turns(req) {
        0 => Reply::tool_call("desktop_launch", json!({"command": hostile})),
        _ => Reply::tool_call("finish", json!({"summary": "probed"})),
    });
    let manager = manager_reply("Next: gui\nTask: launch the notes app");
    let script = Script::new()
        .fallback("standin-manager", manager)
        .fallback("standin-executor", executor);
    let model = StandInModel::start(script).await?;
    let secrets = StackSecrets::random();
    let mut opts = desktop_options(
        &model,
        Profile::new("exec", &model.base_url(), "standin-executor"),
        r#"["desktop"]"#,
    );
    opts.executor_extra.push_str("\nagent_network = \"on\"");
    opts.secrets = Some(secrets.clone());
    let stack = Stack::start(opts).await?;
    wait_until_desktop_offered(&stack, &model).await?;
    let task = TASK
        .split("[[acceptance]]")
        .next()
        .unwrap_or_default()
        .to_string()
        + "[[acceptance]]\nid = \"probed\"\ncheck = \"test -s displays.txt\"\nblocking = true\n\n[gui]\nbackend = \"desktop\"\n\n[roles]\nmanager = \"mgr\"\nexecutor = \"exec\"\n\n[budget]\nmax_rounds = 2\nmax_steps = 6\nself_checks = 0\n";
    let notes = notes_py()?;
    let id = stack
        .submit(
            &task,
            &[("notes.py", notes.as_str()), ("probe.py", PROBE_DISPLAYS)],
        )
        .await?["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(180)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let requests = model.requests("standin-executor");
    let launched = last_message_content(&requests[1], "tool").unwrap_or_default();
    assert!(launched.contains("window \"Notes\" is up"), "{launched}");

    let files = snapshot_files(&stack, done["snapshot"].as_str().unwrap_or_default()).await?;
    let file = |name: &str| {
        files
            .iter()
            .find(|(p, _)| p == name)
            .map(|(_, text)| text.clone())
            .unwrap_or_default()
    };
    // Its own display only: the other episode's (and any other) is out of reach.
    let displays = file("displays.txt");
    assert!(displays.starts_with("own :"), "{displays}");
    assert!(
        !displays.contains("reachable"),
        "the other episode's display is {other_display}; reached:\n{displays}"
    );
    // The copies ran, with the shell's environment and the desktop's variables only...
    let env = file("env.txt");
    assert!(env.contains("PATH=") && env.contains("DISPLAY=:"), "{env}");
    for worker_var in ["LOOPGATE", "NATS", "REDIS", "RUST_LOG", "OTEL"] {
        assert!(!env.contains(worker_var), "{worker_var} in the env:\n{env}");
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
    other.close();
    Ok(())
}
