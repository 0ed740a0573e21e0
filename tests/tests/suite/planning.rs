//! From a one-line goal to a frozen contract (planner → proposer → freeze), approval with
//! `loopgate contract` / `loopgate approve --edit`, and the frozen contract refusing changes.
//! Stand-in models speak the OpenAI wire format; the daemons and the CLI are the real binaries.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

const PROPOSAL: &str = r#"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
"#;

fn planned_task(extra: &str) -> String {
    format!(
        "goal = \"A hello script that prints exactly: hello, loopgate\"\nplan = true\n{extra}\n\
         [roles]\nmanager = \"mgr\"\nexecutor = \"exec\"\n[budget]\nmax_rounds = 4\nmax_failed_rounds = 4\n"
    )
}

fn first_user_message(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string()
}

fn tool_results(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").count())
        .unwrap_or(0)
}

fn write(path: &str, content: &str) -> Reply {
    Reply::tool_call("write_file", json!({"path": path, "content": content}))
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

/// A contract that is satisfied before any work (it only checks the spec exists).
const VACUOUS: &str = "[[acceptance]]\nid = \"has-spec\"\ncheck = \"test -f spec.md\"\n";

/// An executor that plans, proposes and builds; its first planner attempt also writes code,
/// which the plan audit must reject. Proposer attempt n writes `proposals[n]` (the last one
/// from then on).
fn executor(planner_attempts: Arc<AtomicUsize>, proposals: &'static [&'static str]) -> Reply {
    let proposer_attempts = Arc::new(AtomicUsize::new(0));
    Reply::dynamic(move |req: &Value| {
        let prompt = first_user_message(req);
        let done = tool_results(req);
        if prompt.contains("Plan: write spec.md") {
            if done == 0 {
                planner_attempts.fetch_add(1, Ordering::SeqCst);
            }
            let sneaky = planner_attempts.load(Ordering::SeqCst) == 1;
            match (done, sneaky) {
                (0, _) => write("spec.md", "# Spec\nA script that greets.\n"),
                // The file tools refuse paths outside the write scope...
                (1, true) => write("hello.py", "print('hello, loopgate')\n"),
                // ...so it sneaks the code in through the shell; the plan audit catches that.
                (2, true) => Reply::tool_call(
                    "shell",
                    json!({"command": "echo \"print('hello, loopgate')\" > hello.py"}),
                ),
                _ => finish(),
            }
        } else if prompt.contains("Plan: write the acceptance contract") {
            match done {
                0 => {
                    let n = proposer_attempts.fetch_add(1, Ordering::SeqCst);
                    write("contract.toml", proposals[n.min(proposals.len() - 1)])
                }
                _ => finish(),
            }
        } else {
            match done {
                0 => write("hello.py", "print('hello, loopgate')\n"),
                _ => finish(),
            }
        }
    })
}

async fn stack_with(model: &StandInModel) -> anyhow::Result<Stack> {
    Stack::start(StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    ))
    .await
}

fn manager() -> Reply {
    Reply::content(
        "Current task state: the contract is frozen, nothing built yet\nNext: cli\nTask: create hello.py that prints hello, loopgate",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goal_only_task_is_planned_frozen_by_hash_and_completed() -> anyhow::Result<()> {
    let attempts = Arc::new(AtomicUsize::new(0));
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager())
            .fallback(
                "standin-executor",
                executor(attempts.clone(), &[VACUOUS, PROPOSAL]),
            ),
    )
    .await?;
    let stack = stack_with(&model).await?;
    let run = stack.submit(&planned_task(""), &[]).await?;
    let id = run["id"].as_str().unwrap().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());

    // The story: a rejected planner attempt (it wrote code), the spec, a proposal refused
    // because its checks already pass before any work, the real proposal, the freeze, then
    // ordinary rounds.
    let types = stack.log_types(&id).await?;
    let order = [
        "candidate_rejected",
        "spec_written",
        "contract_invalid",
        "candidate_rejected",
        "contract_proposed",
        "contract_frozen",
        "decision",
        "terminal",
    ];
    // Each expected entry appears after the previous one.
    let mut from = 0;
    for kind in order {
        let at = types[from..].iter().position(|t| t == kind);
        assert!(at.is_some(), "{kind} missing after #{from}: {types:?}");
        from += at.unwrap_or(0) + 1;
    }
    assert_eq!(attempts.load(Ordering::SeqCst), 2);
    // The refused write came back to the model as a tool error naming the scope.
    let refused = model.requests("standin-executor").iter().any(|r| {
        r["messages"].as_array().is_some_and(|m| {
            m.iter().any(|m| {
                m["role"] == "tool"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("may only change"))
            })
        })
    });
    assert!(refused);

    // The contract is frozen, hashed, and the run names that hash.
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    assert_eq!(contract["status"], "frozen");
    assert_eq!(contract["spec_hash"], done["spec_hash"]);
    let criteria = contract["contract"]["criteria"].as_array().unwrap();
    assert_eq!(criteria.len(), 1);
    assert_eq!(criteria[0]["id"], "prints-greeting");
    let protected = contract["contract"]["protected_paths"].to_string();
    assert!(protected.contains("spec.md") && protected.contains("contract.toml"));
    let short = &done["spec_hash"].as_str().unwrap()[..12];
    let build_prompts: Vec<String> = model
        .requests("standin-executor")
        .iter()
        .map(first_user_message)
        .filter(|p| !p.contains("Plan:"))
        .collect();
    assert!(!build_prompts.is_empty());
    assert!(build_prompts.iter().all(|p| p.contains(short)));

    // Progress is evidence, not time.
    let progress = done["progress"].as_str().unwrap();
    assert!(
        progress.starts_with("acceptance 1/1 passing on snapshot"),
        "{progress}"
    );
    assert!(progress.contains(&done["snapshot"].as_str().unwrap()[..12]));

    // The frozen contract cannot change.
    let (status, body) = stack
        .post_raw(&format!("/v1/runs/{id}/approve"), &json!({}))
        .await?;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "contract_frozen");

    let out = tempfile::tempdir()?;
    stack
        .checkout(done["snapshot"].as_str().unwrap(), out.path())
        .await?;
    assert!(out.path().join("spec.md").exists());
    assert!(out.path().join("contract.toml").exists());
    Ok(())
}

async fn wait_for_state(stack: &Stack, id: &str, state: &str) -> anyhow::Result<Value> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let v = stack.run(id).await?;
        if v["state"] == state {
            return Ok(v);
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "run {id} never reached {state}: {v}\n{}",
            stack.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn cli(stack: &Stack, args: &[&str]) -> anyhow::Result<std::process::Output> {
    let bin = loopgate_test_support::workspace_bin("loopgate")?;
    Ok(tokio::process::Command::new(bin)
        .args(["--server", &stack.http])
        .args(args)
        .output()
        .await?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_approval_waits_for_approve_and_an_edited_contract_replaces_the_proposal(
) -> anyhow::Result<()> {
    let attempts = Arc::new(AtomicUsize::new(1)); // no sneaky first attempt here
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager())
            .fallback("standin-executor", executor(attempts, &[PROPOSAL])),
    )
    .await?;
    let stack = stack_with(&model).await?;
    let run = stack
        .submit(&planned_task("require_approval = true"), &[])
        .await?;
    let id = run["id"].as_str().unwrap().to_string();
    let waiting = wait_for_state(&stack, &id, "waiting_for_input").await?;
    assert_eq!(waiting["planning"], "approval");
    assert!(waiting["progress"]
        .as_str()
        .unwrap()
        .contains("waiting for approval"));
    // Nothing is built before approval.
    assert_eq!(waiting["round"], 2, "planner + proposer only");

    let shown = cli(&stack, &["contract", &id]).await?;
    let text = String::from_utf8_lossy(&shown.stdout).to_string();
    assert!(shown.status.success(), "{text}");
    assert!(
        text.contains("proposed") && text.contains("prints-greeting"),
        "{text}"
    );

    // An edited contract that is not valid is refused with the field named; nothing changes.
    let work = tempfile::tempdir()?;
    let bad = work.path().join("bad.toml");
    std::fs::write(&bad, "[[acceptance]]\nid = \"greets\"\n")?;
    let refused = cli(&stack, &["approve", &id, "--edit", bad.to_str().unwrap()]).await?;
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("acceptance[0].check"));
    assert_eq!(stack.run(&id).await?["planning"], "approval");

    // A valid edit replaces the proposal and the run goes on.
    let good = work.path().join("good.toml");
    std::fs::write(
        &good,
        "[[acceptance]]\nid = \"greets\"\ncheck = \"python3 hello.py | grep -q 'hello, loopgate'\"\n",
    )?;
    let approved = cli(&stack, &["approve", &id, "--edit", good.to_str().unwrap()]).await?;
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["evidence"][0]["check_id"], "greets");
    // Approving again is refused: the contract is frozen.
    let again = cli(&stack, &["approve", &id]).await?;
    assert!(!again.status.success());
    Ok(())
}
