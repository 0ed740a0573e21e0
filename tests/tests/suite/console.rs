//! The operator console (issue 18 item 2) in real headless Chromium against the real stack
//! with a bearer token: the page asks for the token; the form's executor and auditor pickers
//! list the profile names the live workers announce; a run submitted from the console's form
//! appears in the list and moves through its rounds live on its page (over the SSE stream);
//! the manager's question is answered from the console and the answer reaches the manager's
//! next prompt (the stand-in's request log); the completed run shows its certificate, its
//! files and the diff between its rounds; a waiting run is cancelled from the console; a blob
//! overwritten in the snapshot store shows as an integrity violation on the run page; the list,
//! the Files view and the Diff view fit a phone's width; no page reports an error.
//!
//! With `LOOPGATE_CONSOLE_SCREENSHOTS=DIR` (relative to the workspace root, e.g.
//! `docs/console`) the test saves `list.png`, `run.png`, `diff.png` and `phone.png` there.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_browser::{find_by_label, LaunchSettings, Session, TargetPolicy};
use loopgate_test_support::{wait_until, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(90);
pub(super) const TOKEN: &str = "console-test-token";
const ANSWER: &str = "Yes: end it with a newline";

const TASK: &str = r#"name = "console-hello"
goal = "Create hello.py that prints exactly: hello, loopgate"

[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true

[roles]
manager = "nobody"
executor = "nobody"

[budget]
max_rounds = 4
self_checks = 0
# The manager asks its question after the failed round (no retry first), and decides the
# first step too (not the goal's one clause).
step_retries = 0
clause_steps = false
"#;

fn write_hello(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "hello.py", "content": content}),
    )
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "wrote hello.py"}))
}

/// A one-file ustar archive (the starting workspace the console uploads).
fn tar_of(path: &str, content: &[u8]) -> Vec<u8> {
    let mut header = [0u8; 512];
    header[..path.len()].copy_from_slice(path.as_bytes());
    let fields: [(usize, String); 5] = [
        (100, "0000644\0".into()),
        (108, "0000000\0".into()),
        (116, "0000000\0".into()),
        (124, format!("{:011o}\0", content.len())),
        (136, "00000000000\0".into()),
    ];
    for (at, text) in fields {
        header[at..at + text.len()].copy_from_slice(text.as_bytes());
    }
    header[156] = b'0';
    header[257..263].copy_from_slice(b"ustar\0");
    header[263..265].copy_from_slice(b"00");
    header[148..156].copy_from_slice(b"        ");
    let sum: u32 = header.iter().map(|b| u32::from(*b)).sum();
    header[148..156].copy_from_slice(format!("{sum:06o}\0 ").as_bytes());
    let mut out = header.to_vec();
    out.extend_from_slice(content);
    out.resize(out.len().div_ceil(512) * 512 + 1024, 0);
    out
}

fn screenshots_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("LOOPGATE_CONSOLE_SCREENSHOTS").filter(|d| !d.is_empty())?;
    let dir = PathBuf::from(dir);
    Some(if dir.is_absolute() {
        dir
    } else {
        PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("..")
            .join(dir)
    })
}

pub(super) async fn save_screenshot(session: &mut Session, name: &str) -> anyhow::Result<()> {
    if let Some(dir) = screenshots_dir() {
        std::fs::create_dir_all(&dir)?;
        let png = session.screenshot_full_png().await?;
        std::fs::write(dir.join(name), png)?;
    }
    Ok(())
}

/// Poll a JavaScript expression until it is truthy.
pub(super) async fn wait_js(
    session: &mut Session,
    expr: &str,
    what: &str,
) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let v = session.evaluate(expr).await?;
        if !(v.is_null() || v == json!(false) || v == json!("") || v == json!(0)) {
            return Ok(v);
        }
        if tokio::time::Instant::now() > deadline {
            let text = session.page_text().await.unwrap_or_default();
            bail!("timed out waiting for {what} ({expr})\npage:\n{text}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The ref of the element with this accessible label (buttons and links first, or fields).
async fn find(session: &mut Session, label: &str, roles: &[&str]) -> anyhow::Result<String> {
    let rendered = session.snapshot_raw().await?;
    let node = find_by_label(&rendered.nodes, label, roles)
        .with_context(|| format!("no {roles:?} labelled {label:?} in\n{}", rendered.text))?;
    Ok(node.reference.clone())
}

/// Live updates re-render parts of a page, so a ref can go stale between the snapshot that
/// found it and the action: find it again (a few times) when that happens.
const STALE_RETRIES: usize = 5;

pub(super) async fn click(session: &mut Session, label: &str) -> anyhow::Result<()> {
    let mut tries = 0;
    loop {
        let r = find(session, label, &["button", "link"]).await?;
        match session.click(&r).await {
            Ok(_) => return Ok(()),
            Err(loopgate_browser::BrowserError::StaleRef { .. }) if tries < STALE_RETRIES => {
                tries += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Type into a labelled field without submitting (see [`click`] on stale refs).
async fn type_into(session: &mut Session, label: &str, text: &str) -> anyhow::Result<()> {
    let mut tries = 0;
    loop {
        let r = find(session, label, &["textbox"]).await?;
        match session.type_text(&r, text, false).await {
            Ok(_) => return Ok(()),
            Err(loopgate_browser::BrowserError::StaleRef { .. }) if tries < STALE_RETRIES => {
                tries += 1;
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Type into a labelled field, then press Enter (the keyboard submits the form).
async fn type_and_enter(session: &mut Session, label: &str, text: &str) -> anyhow::Result<()> {
    let r = find(session, label, &["textbox", "searchbox"]).await?;
    session.type_text(&r, text, true).await?;
    Ok(())
}

/// Go to a console page in the same document (a hash change, as its links do).
async fn go(session: &mut Session, hash: &str) -> anyhow::Result<()> {
    session
        .evaluate(&format!(
            "(location.hash = {}, true)",
            serde_json::to_string(hash)?
        ))
        .await?;
    Ok(())
}

/// A stack behind the console's `TOKEN`, with the stand-in's manager (`mgr`) and executor
/// (`exec`) profiles and one executor.
pub(super) async fn token_stack(model: &StandInModel) -> anyhow::Result<Stack> {
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.token = Some(TOKEN.to_string());
    Stack::start(opts).await
}

/// A headless Chromium on the console at `{http}/{hash}`, past its token prompt.
pub(super) async fn open_console(http: &str, hash: &str) -> anyhow::Result<Session> {
    let policy = TargetPolicy {
        workspace: None,
        base_url: None,
        allow_network: false,
    };
    let mut s = Session::new(LaunchSettings::detect()?, policy);
    s.navigate(&format!("{http}/{hash}")).await?;
    // The page asks for the token once.
    wait_js(
        &mut s,
        "document.getElementById('token-dialog').open",
        "the token prompt",
    )
    .await?;
    type_and_enter(&mut s, "Token", TOKEN).await?;
    Ok(s)
}

pub(super) fn assert_no_page_errors(session: &Session) {
    let errors = session.page_errors();
    assert!(
        errors.is_empty(),
        "the console reported errors: {errors:#?}"
    );
}

/// The page at a phone's width (390 px): nothing wider than the screen, and no page error;
/// then back to the desktop width.
async fn fits_a_phone(session: &mut Session, what: &str) -> anyhow::Result<()> {
    session.set_viewport(390, 844, true).await?;
    wait_js(
        session,
        "document.documentElement.scrollWidth <= window.innerWidth",
        &format!("{what} to fit a phone"),
    )
    .await?;
    session.set_viewport(1280, 800, false).await?;
    assert_no_page_errors(session);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_follows_steers_and_checks_runs() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Current task state: nothing yet\nNext: cli\nTask: create hello.py that prints hello, loopgate"),
                    Reply::content("Current task state: hello.py prints the wrong text\nNext: ask\nTask: Should the greeting end with a newline?"),
                    Reply::content("Current task state: answered\nNext: cli\nTask: make hello.py print exactly: hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [write_hello("print('hello')\n"), finish(), write_hello("print('hello, loopgate')\n"), finish()],
            )
            .replies(
                "standin-asker",
                [Reply::content("Next: ask\nTask: Which greeting do you want?")],
            ),
    )
    .await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
            Profile::new("asker", &model.base_url(), "standin-asker"),
        ],
        1,
    );
    opts.token = Some(TOKEN.to_string());
    let stack = Stack::start(opts).await?;
    // The API really wants the token (the stack's own client sends it).
    let anonymous = reqwest::get(format!("{}/v1/runs", stack.http)).await?;
    assert_eq!(anonymous.status().as_u16(), 401);

    // The page asks for the token once; the list loads with it.
    let mut s = open_console(&stack.http, "").await?;
    wait_js(
        &mut s,
        "document.querySelector('#state-counts strong')",
        "the run counts",
    )
    .await?;

    // Submit from the console's form: the task's TOML, a model profile per role. The
    // executor's picker lists what the live executor announces on its heartbeat, once the
    // manager has heard it.
    wait_until(WAIT, || async {
        stack.get("/v1/models").await.is_ok_and(|models| {
            ["executor", "auditor"].iter().all(|role| {
                models["roles"][role]
                    .as_array()
                    .is_some_and(|names| !names.is_empty())
            })
        })
    })
    .await
    .context("the workers' profiles never reached GET /v1/models")?;
    click(&mut s, "New run").await?;
    wait_js(
        &mut s,
        "document.querySelector('#role-manager option[value=mgr]')",
        "the model profiles",
    )
    .await?;
    wait_js(
        &mut s,
        "document.querySelector('#role-executor option[value=exec]')",
        "the executor's announced profile in its picker",
    )
    .await?;
    // The auditor's picker lists what the live auditor announces.
    wait_js(
        &mut s,
        "document.querySelector('#role-auditor option[value=mgr]')",
        "the auditor's announced profile in its picker",
    )
    .await?;
    // The starting workspace as a tar upload (a File put into the file input).
    let tar = tar_of("notes.txt", b"starting notes\n");
    s.evaluate(&format!(
        "(() => {{ document.getElementById('task-toml').value = {}; \
         document.getElementById('role-manager').value = 'mgr'; \
         document.getElementById('role-executor').value = 'exec'; \
         const dt = new DataTransfer(); \
         dt.items.add(new File([new Uint8Array({})], 'workspace.tar')); \
         document.getElementById('workspace-file').files = dt.files; return true; }})()",
        serde_json::to_string(TASK)?,
        serde_json::to_string(&tar)?
    ))
    .await?;
    click(&mut s, "Submit run").await?;
    let id = wait_js(
        &mut s,
        "(location.hash.match(/^#\\/runs\\/([0-9a-f-]{36})$/) || [])[1]",
        "the new run's page",
    )
    .await?;
    let id = id.as_str().context("run id")?.to_string();

    // Round 1 fails its gate, live on the run page (no reload).
    wait_js(
        &mut s,
        "document.querySelector('#timeline li.round[data-round=\"1\"] .gate.bad')",
        "round 1's failed gate",
    )
    .await?;
    // The round's tokens are on its timeline entry.
    let tokens = wait_js(
        &mut s,
        "document.querySelector('#timeline li.round[data-round=\"1\"] .tokens')?.textContent",
        "round 1's tokens",
    )
    .await?;
    assert!(
        tokens
            .as_str()
            .is_some_and(|t| t.ends_with(" tokens") && !t.contains(" 0 tokens")),
        "{tokens}"
    );
    // The manager asks; the answer typed in the console reaches its next prompt.
    wait_js(
        &mut s,
        "document.getElementById('question')",
        "the manager's question",
    )
    .await?;
    assert!(s
        .page_text()
        .await?
        .contains("Should the greeting end with a newline?"));
    type_and_enter(&mut s, "Answer", ANSWER).await?;
    wait_js(
        &mut s,
        "document.querySelector('#run-head [data-state=completed]')",
        "the run to complete",
    )
    .await?;
    wait_js(
        &mut s,
        "document.querySelector('#timeline li.round[data-round=\"2\"] .gate.ok')",
        "round 2's passed gate",
    )
    .await?;
    let prompts = model.requests("standin-manager");
    assert!(prompts.len() >= 3, "{prompts:?}");
    assert!(prompts[2].to_string().contains(ANSWER), "{}", prompts[2]);
    let done = stack.run(&id).await?;
    assert_eq!(done["state"], "completed", "{done}");
    let base = stack
        .get(&format!(
            "/v1/snapshots/{}",
            done["base_snapshot"].as_str().unwrap_or_default()
        ))
        .await?;
    let uploaded = base["entries"]
        .as_array()
        .is_some_and(|e| e.iter().any(|e| e["path"] == "notes.txt"));
    assert!(uploaded, "the uploaded workspace: {base}");

    // The run page: frozen contract with its spec hash, evidence, certificate, budgets.
    wait_js(
        &mut s,
        "!document.getElementById('certificate').hidden",
        "the certificate",
    )
    .await?;
    let spec = s
        .evaluate("document.getElementById('spec-hash').textContent")
        .await?;
    assert_eq!(spec, done["spec_hash"]);
    let evidence = s
        .evaluate("document.querySelector('#evidence li[data-check=\"prints-greeting\"] .badge').textContent")
        .await?;
    assert_eq!(evidence, "pass");
    wait_js(
        &mut s,
        "document.getElementById('integrity-ok')",
        "the integrity report",
    )
    .await?;
    save_screenshot(&mut s, "run.png").await?;

    // Files: the final hello.py.
    click(&mut s, "Files").await?;
    wait_js(
        &mut s,
        "document.querySelector('#file-tree a[data-path=\"hello.py\"]')",
        "the file tree",
    )
    .await?;
    click(&mut s, "hello.py").await?;
    let text = wait_js(
        &mut s,
        "document.getElementById('file-text')?.textContent",
        "hello.py's text",
    )
    .await?;
    assert_eq!(text, "print('hello, loopgate')\n");
    fits_a_phone(&mut s, "the Files view").await?;

    // The diff between round 1's candidate and round 2's.
    let rounds = stack.get(&format!("/v1/runs/{id}/rounds")).await?;
    let (r1, r2) = (
        rounds["rounds"][0]["candidate"]
            .as_str()
            .context("round 1 candidate")?,
        rounds["rounds"][1]["candidate"]
            .as_str()
            .context("round 2 candidate")?,
    );
    go(&mut s, &format!("#/runs/{id}/diff?from={r1}&to={r2}")).await?;
    let diff = wait_js(
        &mut s,
        "document.querySelector('#diff .diff-file[data-path=\"hello.py\"] pre')?.textContent",
        "the diff",
    )
    .await?;
    let diff = diff.as_str().unwrap_or_default();
    assert!(
        diff.contains("-print('hello')") && diff.contains("+print('hello, loopgate')"),
        "{diff}"
    );
    save_screenshot(&mut s, "diff.png").await?;
    fits_a_phone(&mut s, "the Diff view").await?;

    // A run waiting for an answer is cancelled from the console (the button asks twice).
    let waiting_task = TASK
        .replace("console-hello", "waiting-run")
        .replace("manager = \"nobody\"", "manager = \"asker\"")
        .replace("executor = \"nobody\"", "executor = \"exec\"");
    let waiting = stack.submit(&waiting_task, &[]).await?;
    let waiting_id = waiting["id"].as_str().context("id")?.to_string();
    go(&mut s, &format!("#/runs/{waiting_id}")).await?;
    wait_js(
        &mut s,
        "document.getElementById('question')",
        "the second run's question",
    )
    .await?;
    click(&mut s, "Cancel run").await?;
    click(&mut s, "Press again to cancel").await?;
    wait_js(
        &mut s,
        "document.querySelector('#run-head [data-state=cancelled]')",
        "the cancelled state",
    )
    .await?;
    assert_eq!(stack.run(&waiting_id).await?["state"], "cancelled");

    // The list: both runs, counts by state, the state filter, "/" focuses the search box.
    go(&mut s, "#/").await?;
    wait_js(
        &mut s,
        &format!("document.querySelector('#run-rows tr[data-run=\"{id}\"][data-state=completed]')"),
        "the completed run in the list",
    )
    .await?;
    wait_js(&mut s, &format!("document.querySelector('#run-rows tr[data-run=\"{waiting_id}\"][data-state=cancelled]')"), "the cancelled run in the list").await?;
    let completed = s
        .evaluate(
            "document.querySelector('#state-counts a[data-count=completed] strong').textContent",
        )
        .await?;
    assert_eq!(completed, "1");
    s.press_key("/").await?;
    assert_eq!(s.evaluate("document.activeElement.id").await?, "run-search");
    s.press_key("w").await?;
    s.press_key("a").await?;
    s.press_key("i").await?;
    wait_js(
        &mut s,
        "document.querySelectorAll('#run-rows tr').length === 1",
        "the search to filter",
    )
    .await?;
    s.evaluate("(() => { const f = document.getElementById('run-search'); f.value=''; f.dispatchEvent(new Event('input')); return true; })()").await?;
    save_screenshot(&mut s, "list.png").await?;

    // A phone's width: nothing wider than the screen.
    s.set_viewport(390, 844, true).await?;
    wait_js(
        &mut s,
        "document.documentElement.scrollWidth <= window.innerWidth",
        "the list to fit a phone",
    )
    .await?;
    save_screenshot(&mut s, "phone.png").await?;
    s.set_viewport(1280, 800, false).await?;
    assert_no_page_errors(&s);

    // A blob overwritten in the snapshot store: the run page shows an integrity violation.
    let manifest = stack
        .get(&format!(
            "/v1/snapshots/{}",
            done["snapshot"].as_str().unwrap_or_default()
        ))
        .await?;
    let sha = manifest["entries"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["path"] == "hello.py"))
        .and_then(|e| e["sha256"].as_str())
        .context("hello.py in the manifest")?
        .to_string();
    let nats = async_nats::connect(stack.nats.url()).await?;
    let bucket = async_nats::jetstream::new(nats)
        .get_object_store(loopgate_protocol::subjects::SNAPSHOT_BUCKET)
        .await?;
    let mut tampered: &[u8] = b"print('hello, l00pgate')\n";
    bucket
        .put(format!("blob/{sha}").as_str(), &mut tampered)
        .await?;
    // A full reload (the token stays in the tab's sessionStorage).
    s.navigate(&format!("{}/?reload#/runs/{id}", stack.http))
        .await?;
    wait_js(
        &mut s,
        "document.getElementById('integrity-violation')",
        "the integrity violation",
    )
    .await?;
    let alert = s
        .evaluate("document.getElementById('integrity-violation').textContent")
        .await?;
    assert!(
        alert.as_str().unwrap_or_default().contains("hello.py"),
        "{alert}"
    );
    assert_no_page_errors(&s);
    Ok(())
}

/// Steering from the console: an instruction typed on the run page reaches the manager's next
/// prompt (and no executor request); Pause lets the episode in flight finish and holds the next
/// step (no manager call while paused); Unpause takes the held step and the run completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_instructs_pauses_and_unpauses_a_live_run() -> anyhow::Result<()> {
    const INSTRUCTION: &str = "INSTR-42: keep the greeting on one line";
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [
                    Reply::content("Current task state: nothing yet\nNext: cli\nTask: create hello.py that prints hello, loopgate"),
                    Reply::content("Current task state: hello.py prints the wrong text\nNext: cli\nTask: make hello.py print exactly: hello, loopgate"),
                ],
            )
            .replies(
                "standin-executor",
                [
                    // Round 1's episode takes a while: the console steers while it runs.
                    Reply::delayed(Duration::from_secs(6), write_hello("print('hello')\n")),
                    finish(),
                    write_hello("print('hello, loopgate')\n"),
                    finish(),
                ],
            ),
    )
    .await?;
    let stack = token_stack(&model).await?;
    let task = TASK
        .replace("console-hello", "steered")
        .replace("manager = \"nobody\"", "manager = \"mgr\"")
        .replace("executor = \"nobody\"", "executor = \"exec\"");
    let id = stack.submit(&task, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();

    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;
    // Round 1's episode is in flight.
    wait_js(
        &mut s,
        "document.querySelector('#timeline li.round[data-round=\"1\"]')",
        "round 1 on the timeline",
    )
    .await?;

    type_into(&mut s, "Instruction to the manager", INSTRUCTION).await?;
    click(&mut s, "Send instruction").await?;
    wait_until(WAIT, || async {
        stack.run(&id).await.is_ok_and(|run| {
            run["instructions"]
                .as_array()
                .is_some_and(|i| !i.is_empty())
        })
    })
    .await
    .context("the instruction never reached the run")?;
    click(&mut s, "Pause").await?;
    wait_js(
        &mut s,
        "document.querySelector('#run-head [data-state=paused]')",
        "the paused state",
    )
    .await?;

    // The episode in flight finishes and is audited; the next step is held, not taken.
    wait_until(WAIT, || async {
        stack
            .run(&id)
            .await
            .is_ok_and(|run| run["phase"] == "paused")
    })
    .await
    .context("the paused run never held its next step")?;
    assert_eq!(stack.run(&id).await?["state"], "paused");
    assert_eq!(
        model.requests("standin-manager").len(),
        1,
        "no manager call while paused"
    );

    click(&mut s, "Unpause").await?;
    wait_js(
        &mut s,
        "document.querySelector('#run-head [data-state=completed]')",
        "the run to complete",
    )
    .await?;
    let prompts = model.requests("standin-manager");
    assert!(prompts.len() >= 2, "{prompts:?}");
    assert!(
        prompts[1].to_string().contains("INSTR-42"),
        "the instruction is in the manager's next prompt: {}",
        prompts[1]
    );
    for request in model.requests("standin-executor") {
        assert!(
            !request.to_string().contains("INSTR-42"),
            "an executor saw the operator's text: {request}"
        );
    }
    assert_eq!(stack.run(&id).await?["state"], "completed");
    assert_no_page_errors(&s);
    Ok(())
}

const GREETER: &str = r#"<!doctype html><html><head><title>Greeter</title></head><body>
<h1>Greeter</h1>
<button onclick="document.getElementById('out').textContent='Hello, loopgate!'">Greet</button>
<p id="out"></p>
</body></html>"#;

const BROWSE_TASK: &str = r#"name = "greeter"
goal = "Create index.html: a page whose Greet button shows Hello, loopgate!"

[[acceptance]]
id = "greets-on-click"
description = "clicking Greet shows the greeting"
check = "loopgate browse --url index.html --click Greet --expect-text 'Hello, loopgate!' --screenshot shots/audit.png"
blocking = true

[roles]
manager = "mgr"
executor = "exec"

[budget]
max_rounds = 3
self_checks = 0
"#;

/// A browser check's evidence on the run page: the screenshot `loopgate browse` took in the
/// auditor's check (its evidence record's `screenshots`, by digest) is shown as an image,
/// fetched with the token from `GET /v1/runs/{id}/screenshots/{sha256}`; once its blob is
/// overwritten in the evidence bucket the page shows an integrity alert in its place.
///
/// With `LOOPGATE_CONSOLE_SCREENSHOTS` it saves `evidence.png`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_a_browser_checks_screenshots() -> anyhow::Result<()> {
    let model = StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Current task state: nothing yet\nNext: cli\nTask: write index.html with a Greet button"),
            )
            .replies(
                "standin-executor",
                [
                    Reply::tool_call(
                        "write_file",
                        json!({"path": "index.html", "content": GREETER}),
                    ),
                    Reply::tool_call("finish", json!({"summary": "wrote index.html"})),
                ],
            ),
    )
    .await?;
    let stack = token_stack(&model).await?;
    let id = stack.submit(BROWSE_TASK, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let shot = done["evidence"]
        .as_array()
        .and_then(|e| e.iter().find(|e| e["check_id"] == "greets-on-click"))
        .and_then(|e| e["screenshots"].as_array())
        .and_then(|s| s.first())
        .cloned()
        .with_context(|| format!("no screenshot in the browse check's evidence: {done}"))?;
    let digest = shot["digest"].as_str().context("digest")?.to_string();
    assert_eq!(shot["path"], "shots/audit.png", "{shot}");

    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;
    let img = "document.querySelector('#evidence li[data-check=\"greets-on-click\"] img.shot')";
    // The image is the check's own PNG, decoded by the browser (not a broken image).
    let size = wait_js(
        &mut s,
        &format!("(() => {{ const i = {img}; return i && i.complete && i.naturalWidth > 0 && [i.naturalWidth, i.naturalHeight]; }})()"),
        "the browse check's screenshot",
    )
    .await?;
    assert!(
        size.as_array()
            .is_some_and(|wh| wh.iter().all(|v| v.as_u64().is_some_and(|n| n > 10))),
        "{size}"
    );
    let shown = s
        .evaluate(&format!(
            "(() => {{ const i = {img}; return [i.closest('figure').dataset.digest, i.alt, i.src.startsWith('blob:')]; }})()"
        ))
        .await?;
    assert_eq!(
        shown,
        json!([
            digest,
            "screenshot shots/audit.png of greets-on-click",
            true
        ])
    );
    save_screenshot(&mut s, "evidence.png").await?;
    // The run page, screenshot included, fits a phone's width too.
    s.set_viewport(390, 844, true).await?;
    wait_js(
        &mut s,
        "document.documentElement.scrollWidth <= window.innerWidth",
        "the run page to fit a phone",
    )
    .await?;
    s.set_viewport(1280, 800, false).await?;
    assert_no_page_errors(&s);

    // The blob overwritten in the evidence bucket: the page says so instead of showing it.
    let nats = async_nats::connect(stack.nats.url()).await?;
    let bucket = async_nats::jetstream::new(nats)
        .get_object_store(loopgate_protocol::subjects::EVIDENCE_BUCKET)
        .await?;
    let mut swapped: &[u8] = b"\x89PNG\r\n\x1a\nnot the check's screenshot";
    bucket
        .put(format!("blob/{digest}").as_str(), &mut swapped)
        .await?;
    s.navigate(&format!("{}/?reload#/runs/{id}", stack.http))
        .await?;
    let alert = wait_js(
        &mut s,
        "document.querySelector('#evidence li[data-check=\"greets-on-click\"] figure [role=alert]')?.textContent",
        "the screenshot's integrity alert",
    )
    .await?;
    assert!(
        alert.as_str().is_some_and(|a| a.contains("(integrity)")),
        "{alert}"
    );
    // The refused fetch is logged by Chromium as a failed resource load (a 500); nothing else
    // went wrong.
    let errors = s.page_errors();
    assert!(
        errors.iter().all(|e| e.contains("500")),
        "the console reported errors: {errors:#?}"
    );
    Ok(())
}
