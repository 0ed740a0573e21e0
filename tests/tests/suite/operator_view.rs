//! The operator's view (issue 42): the run list pages past its first 50 runs and says so, in
//! the API and in `loopgate runs`; every command that takes a RUN takes the short id `loopgate
//! runs` shows (an unknown or ambiguous prefix exits 7); a completed run's console page states
//! no model's claim as fact and offers only the actions the API accepts; the console's list pages
//! as the CLI does and shows the same short ids.

use std::process::Output;
use std::time::Duration;

use anyhow::Context;
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{ControlPlane, Profile, Stack, StackOptions};
use serde_json::{json, Value};

async fn cli(server: &str, args: &[&str]) -> anyhow::Result<Output> {
    let bin = loopgate_test_support::workspace_bin("loopgate")?;
    Ok(tokio::process::Command::new(bin)
        .args(["--server", server])
        .args(args)
        .env_remove("LOOPGATE_TRUSTED_KEYS")
        .env("XDG_CONFIG_HOME", "/nonexistent/loopgate-tests")
        .output()
        .await?)
}

fn text(out: &Output) -> String {
    format!(
        "exit {:?}\n{}\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The ID column of `loopgate runs` (the short ids it shows), newest first.
fn listed_ids(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .filter(|l| !l.starts_with("runs "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

async fn get(http: &str, path: &str) -> anyhow::Result<Value> {
    let r = reqwest::get(format!("{http}{path}")).await?;
    let status = r.status();
    let v: Value = r.json().await?;
    anyhow::ensure!(status.is_success(), "GET {path}: {status} {v}");
    Ok(v)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_list_pages_past_fifty_and_short_ids_resolve() -> anyhow::Result<()> {
    use super::console::{assert_no_page_errors, click, wait_js};
    let plane = ControlPlane::start(&[], None).await?;
    let mut ids = Vec::new();
    for i in 0..55 {
        let run = plane
            .submit(&json!({"task": {"name": format!("run-{i}"), "goal": format!("Goal number {i}: {}", "a long goal ".repeat(12)), "acceptance": [{"id": "a", "check": "true"}], "budget": {"manager": false}}}))
            .await?;
        ids.push(run["id"].as_str().context("id")?.to_string());
    }
    let first = get(&plane.http, "/v1/runs").await?;
    assert_eq!(first["runs"].as_array().map(Vec::len), Some(50), "{first}");
    assert_eq!(
        (first["has_more"].clone(), first["next_offset"].clone()),
        (json!(true), json!(50))
    );
    let rest = get(&plane.http, "/v1/runs?offset=50").await?;
    assert_eq!(rest["runs"].as_array().map(Vec::len), Some(5));
    assert_eq!(
        (rest["has_more"].clone(), rest["next_offset"].clone()),
        (json!(false), Value::Null)
    );
    let mut seen: Vec<String> = first["runs"]
        .as_array()
        .into_iter()
        .chain(rest["runs"].as_array())
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_string))
        .collect();
    seen.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(seen, want, "every run once over the two pages");

    // The CLI: a page says more exist and how to get them; names, ages, whole goals.
    let page = cli(&plane.http, &["runs"]).await?;
    let out = text(&page);
    assert!(page.status.success(), "{out}");
    assert!(
        out.contains("runs 1-50 shown; more exist: loopgate runs --offset 50"),
        "{out}"
    );
    assert!(out.contains("run-54") && out.contains("AGE"), "{out}");
    assert!(
        out.contains(&format!(
            "Goal number 54: {}",
            "a long goal ".repeat(12).trim()
        )),
        "{out}"
    );
    let shown = listed_ids(&page);
    assert_eq!(shown.len(), 50, "{out}");
    let last = cli(&plane.http, &["runs", "--offset", "50", "--limit", "50"]).await?;
    assert!(!text(&last).contains("more exist"), "{}", text(&last));
    assert_eq!(listed_ids(&last).len(), 5, "{}", text(&last));

    // A short id from the list resolves; an unknown or ambiguous prefix exits 7.
    let short = &shown[0];
    assert!(
        short.len() >= 12 && ids[54].starts_with(short.as_str()),
        "{short}"
    );
    let status = cli(&plane.http, &["status", short]).await?;
    assert!(
        status.status.success() && text(&status).contains(&ids[54]),
        "{}",
        text(&status)
    );
    let cases = [
        ("0", "ambiguous"),
        ("ffffffff", "no run id starts with 'ffffffff'"),
    ];
    for (prefix, want) in cases {
        let out = cli(&plane.http, &["status", prefix]).await?;
        assert_eq!(out.status.code(), Some(7), "{}", text(&out));
        assert!(text(&out).contains(want), "{}", text(&out));
    }
    let by_prefix = get(&plane.http, &format!("/v1/runs?id_prefix={short}")).await?;
    assert_eq!(by_prefix["runs"][0]["id"], ids[54].as_str(), "{by_prefix}");

    // The console's list pages the same way and shows the ids the CLI shows (and accepts).
    let policy = loopgate_browser::TargetPolicy {
        workspace: None,
        base_url: None,
        allow_network: false,
    };
    let mut s = loopgate_browser::Session::new(loopgate_browser::LaunchSettings::detect()?, policy);
    s.navigate(&format!("{}/#/", plane.http)).await?;
    wait_js(
        &mut s,
        "document.querySelectorAll('#run-rows tr').length === 50 && !document.getElementById('runs-next').disabled",
        "the first page of 50 with a next page",
    )
    .await?;
    let console_ids = s
        .evaluate("[...document.querySelectorAll('#run-rows [data-short-id]')].map((e) => e.dataset.shortId)")
        .await?;
    assert_eq!(
        console_ids,
        json!(shown),
        "the console shows the CLI's short ids"
    );
    click(&mut s, "Older").await?;
    wait_js(
        &mut s,
        "document.querySelectorAll('#run-rows tr').length === 5 && document.getElementById('runs-next').disabled && location.hash.includes('offset=50')",
        "the last page of 5",
    )
    .await?;
    assert_no_page_errors(&s);
    Ok(())
}

const TASK: &str = r#"
name = "short-ids"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 3
"#;

/// Every command that takes a RUN, given the 12-character id `loopgate runs` shows, reaches
/// that run: it succeeds, or the manager refuses it for the run's state (which it can say only
/// of a run it found).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_run_command_takes_a_short_id() -> anyhow::Result<()> {
    let model = StandInModel::start(Script::new().replies(
        "standin-executor",
        [
            Reply::tool_call(
                "write_file",
                json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
            ),
            Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
        ],
    ))
    .await?;
    let mut opts = StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    );
    opts.signed = true;
    let stack = Stack::start(opts).await?;
    let id = stack.submit(TASK, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let listed = cli(&stack.http, &["runs"]).await?;
    let short = listed_ids(&listed)
        .first()
        .cloned()
        .context("a listed run")?;
    assert_eq!(short.len(), 12, "{}", text(&listed));
    assert!(id.starts_with(&short));

    let work = tempfile::tempdir()?;
    let dir = work.path().join("co");
    let dir = dir.to_str().context("path")?;
    let keys = stack.auditor_keys_file.clone().context("a signed stack")?;
    let keys = keys.to_str().context("path")?;
    // (arguments, Ok(()) for success or Err(the manager's refusal code))
    let cases: Vec<(Vec<&str>, Result<(), &str>)> = vec![
        (vec!["status", &short], Ok(())),
        (vec!["log", &short], Ok(())),
        (vec!["watch", &short], Ok(())),
        (vec!["contract", &short], Ok(())),
        (vec!["diff", &short], Ok(())),
        (vec!["checkout", &short, dir], Ok(())),
        (vec!["verify", &short, "--key", keys], Ok(())),
        (vec!["answer", &short, "yes"], Err("not_waiting_for_input")),
        (vec!["approve", &short], Err("contract_frozen")),
        (vec!["resume", &short], Err("not_resumable")),
        (vec!["instruct", &short, "go on"], Err("not_instructable")),
        (vec!["pause", &short], Err("not_pausable")),
        (vec!["unpause", &short], Err("not_paused")),
        (vec!["cancel", &short], Err("not_cancellable")),
        (
            vec!["apply", &short, "--key", keys, "--repo", dir],
            Err("did not start from a git"),
        ),
        (vec!["continue", &short, "--goal", "Also print bye"], Ok(())),
    ];
    for (args, want) in cases {
        let out = cli(&stack.http, &args).await?;
        let all = text(&out);
        assert_ne!(out.status.code(), Some(7), "{args:?}: {all}");
        assert!(!all.contains("not_found"), "{args:?}: {all}");
        match want {
            Ok(()) => assert!(out.status.success(), "{args:?}: {all}"),
            Err(code) => assert!(
                !out.status.success() && all.contains(code),
                "{args:?}: {all}"
            ),
        }
    }
    Ok(())
}

const CLAIMS_TASK: &str = r#"
name = "claims"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 4
self_checks = 0
step_retries = 0
clause_steps = false
"#;

/// Each action's control on the run page.
const ACTION_CONTROLS: [(&str, &str); 8] = [
    ("cancel", "#cancel"),
    ("answer", "form#answer"),
    ("approve", "#approve"),
    ("resume", "form#resume"),
    ("instruct", "form#instruct"),
    ("pause", "#pause"),
    ("unpause", "#unpause"),
    ("continue", "form#continue"),
];

/// A completed run whose manager kept saying "working." and whose executor said "All checks
/// pass." of a round the audit failed: its page (headless Chromium) states where it stands
/// from the gate, shows both models' words only as their claims beside the evidence, and
/// offers exactly the actions the API accepts (every other one is refused by its route). Then
/// the rest of the console's fixes: the Files view shows a text file without a stray `null`, a
/// short id in the URL opens its run, the submit form's example names profiles the stack
/// serves and submits as it stands, and an unknown run id gets a page saying so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_runs_page_states_no_claim_as_fact_and_offers_only_accepted_actions(
) -> anyhow::Result<()> {
    use super::console::{assert_no_page_errors, click, open_console, token_stack, wait_js};
    let step = |task: &str| {
        Reply::content(format!(
            "Current task state: working.\nNext: cli\nTask: {task}"
        ))
    };
    let write = |content: &str| {
        Reply::tool_call(
            "write_file",
            json!({"path": "hello.py", "content": content}),
        )
    };
    let model = StandInModel::start(
        Script::new()
            .replies(
                "standin-manager",
                [step("write hello.py"), step("fix hello.py")],
            )
            .replies(
                "standin-executor",
                [
                    write("print('hello')\n"),
                    Reply::tool_call("finish", json!({"summary": "All checks pass."})),
                    write("print('hello, loopgate')\n"),
                    Reply::tool_call("finish", json!({"summary": "Fixed the greeting."})),
                ],
            ),
    )
    .await?;
    let stack = token_stack(&model).await?;
    let id = stack.submit(CLAIMS_TASK, &[]).await?["id"]
        .as_str()
        .context("id")?
        .to_string();
    let done = stack.wait_terminal(&id, Duration::from_secs(90)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["task_state"], "working.", "{done}");
    let accepted: Vec<String> = done["actions"]
        .as_array()
        .context("actions")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect();
    assert_eq!(accepted, ["continue"], "{done}");

    let mut s = open_console(&stack.http, &format!("#/runs/{id}")).await?;
    let standing = wait_js(
        &mut s,
        "(document.getElementById('run-standing') || {}).textContent",
        "the standing",
    )
    .await?;
    assert!(
        standing
            .as_str()
            .unwrap_or("")
            .starts_with("completed; gate open on snapshot"),
        "{standing}"
    );
    wait_js(
        &mut s,
        "document.querySelectorAll('#timeline li.round .gate').length === 2",
        "both rounds' gates",
    )
    .await?;
    let page = s.page_text().await?;
    assert!(!page.contains("Task state"), "{page}");
    // The manager's words only under its label, as a claim.
    let note = s
        .evaluate("(() => { const n = document.getElementById('manager-note'); return n && n.previousElementSibling.textContent + ' | ' + n.textContent; })()")
        .await?;
    let note = note.as_str().unwrap_or("");
    assert!(
        note.starts_with("Manager's note (claim) | working."),
        "{note}"
    );
    // The executor's "All checks pass." only as its claim, beside the audit that failed it.
    let round1 = s
        .evaluate("(() => { const r = document.querySelector('#timeline li.round'); return [r.querySelector('.exec .claim').textContent, r.querySelector('.exec strong').textContent, !!r.querySelector('.refuted'), r.querySelector('.gate').textContent]; })()")
        .await?;
    assert_eq!(round1[0], "All checks pass.", "{round1}");
    assert_eq!(round1[1], "Executor's summary (claim): ", "{round1}");
    assert_eq!(round1[2], true, "{round1}");
    assert!(
        round1[3].as_str().unwrap_or("").starts_with("Gate: closed"),
        "{round1}"
    );
    // Every text that is the executor's summary sits inside a claim.
    let bare = s
        .evaluate("[...document.querySelectorAll('#run-head dd, #timeline h3, #timeline p')].filter((e) => /All checks pass\\.|working\\./.test(e.textContent) && !e.querySelector('.claim') && !e.classList.contains('claim')).length")
        .await?;
    assert_eq!(bare, json!(0));

    // The controls offered are exactly the accepted actions; the API refuses every other.
    wait_js(
        &mut s,
        "document.querySelector('form#continue')",
        "the continue form",
    )
    .await?;
    for (action, selector) in ACTION_CONTROLS {
        let shown = s
            .evaluate(&format!("!!document.querySelector('#actions {selector}')"))
            .await?;
        assert_eq!(
            shown,
            json!(accepted.iter().any(|a| a == action)),
            "{action}"
        );
        if accepted.iter().any(|a| a == action) {
            continue;
        }
        let path = match action {
            "instruct" => format!("/v1/runs/{id}/instructions"),
            other => format!("/v1/runs/{id}/{other}"),
        };
        let body = match action {
            "answer" | "instruct" => json!({"text": "x"}),
            _ => json!({}),
        };
        let (status, v) = stack.post_raw(&path, &body).await?;
        assert_eq!(status, 409, "{action}: {v}");
    }

    // The Files view shows a text file's text and nothing more (no "null" under it).
    go(&mut s, &format!("#/runs/{id}/files?path=hello.py")).await?;
    let view = wait_js(
        &mut s,
        "document.getElementById('file-text') && document.getElementById('file-view').textContent",
        "the file's text",
    )
    .await?;
    let view = view.as_str().unwrap_or("");
    assert!(view.contains("print('hello, loopgate')"), "{view}");
    assert!(!view.contains("null"), "{view}");

    // A short id goes to its run.
    go(&mut s, &format!("#/runs/{}", &id[..12])).await?;
    wait_js(
        &mut s,
        &format!("location.hash === '#/runs/{id}' && document.getElementById('run-standing')"),
        "the short id to open its run",
    )
    .await?;
    // The submit form's example names profiles this stack serves, and submits as it stands.
    go(&mut s, "#/submit").await?;
    let example = wait_js(
        &mut s,
        "document.querySelector('#role-executor option[value=exec]') && document.getElementById('task-toml').value",
        "the example filled from /v1/models",
    )
    .await?;
    let example = example.as_str().unwrap_or("");
    assert!(example.contains("executor = \"exec\""), "{example}");
    click(&mut s, "Submit run").await?;
    let submitted = wait_js(
        &mut s,
        &format!("/^#\\/runs\\/[0-9a-f-]{{36}}$/.test(location.hash) && location.hash !== '#/runs/{id}' && location.hash"),
        "the example run's page",
    )
    .await?;
    let text = s.page_text().await?;
    assert!(!text.contains("no model profile"), "{submitted}: {text}");
    assert_no_page_errors(&s);

    // An unknown id: the page says so (the browser logs the manager's 404s for it, nothing else).
    go(&mut s, "#/runs/ffffffff-ffff-7fff-bfff-ffffffffffff").await?;
    let missing = wait_js(
        &mut s,
        "(document.getElementById('run-missing') || {}).textContent",
        "the unknown run's page",
    )
    .await?;
    assert!(
        missing
            .as_str()
            .unwrap_or("")
            .starts_with("No run has the id ffffffff"),
        "{missing}"
    );

    let errors: Vec<String> = s
        .page_errors()
        .into_iter()
        .filter(|e| !e.contains("404 (Not Found) (http") || !e.contains("/v1/runs/ffffffff-"))
        .collect();
    assert!(errors.is_empty(), "{errors:#?}");
    Ok(())
}

/// Go to a console page in the same document (a hash change, as its links do).
async fn go(session: &mut loopgate_browser::Session, hash: &str) -> anyhow::Result<()> {
    session
        .evaluate(&format!(
            "(location.hash = {}, true)",
            serde_json::to_string(hash)?
        ))
        .await?;
    Ok(())
}
