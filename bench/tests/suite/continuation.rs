//! The `continuation` arm end to end: a two-clause task, a stand-in executor that gets the
//! first clause right only until the goal names the failing check, the real stack in between.
//! The first episode leaves one public check failing; the bench runs the checks, puts the
//! failing one (its command and output) under the goal, uploads the episode's snapshot as the
//! next workspace; the second episode passes and the loop stops. Tokens are the two runs'.

use std::path::{Path, PathBuf};
use std::time::Duration;

use loopgate_bench::long::{
    load_long_task, Arm, ArmProfiles, HiddenTimeouts, LongBench, LongCaps, FAILING_HEADER,
};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

pub(super) const TASK: &str = r#"# kind: two lines of a greeting
name = "greeting"
goal = """
greet.txt holds `hello` on its first line.
greet.txt holds `bye` on its second line.
"""

[[acceptance]]
id = "hello"
description = "line 1 is hello"
clause = "greet.txt holds `hello` on its first line."
check = '''test "$(sed -n 1p greet.txt)" = hello'''

[[acceptance]]
id = "bye"
description = "line 2 is bye"
clause = "greet.txt holds `bye` on its second line."
check = '''test "$(sed -n 2p greet.txt)" = bye || { echo "want bye on line 2, got '$(sed -n 2p greet.txt)'"; exit 1; }'''

[roles]
manager = "local"
executor = "local"

[budget]
max_rounds = 4
"#;

pub(super) const HIDDEN: &str = r#"for pair in 1:hello 2:bye; do
  if [ "$(sed -n "${pair%%:*}p" greet.txt)" = "${pair#*:}" ]; then echo "PASS ${pair#*:}"; else echo "FAIL ${pair#*:}"; fi
done
"#;

const BYE_CHECK: &str = r#"test "$(sed -n 2p greet.txt)" = bye"#;

/// A long task under `dir/greeting`: `task.toml`, an empty `workspace/greet.txt` and
/// `hidden/check.sh`.
pub(super) fn write_task(dir: &Path, task: &str, hidden: &str) -> anyhow::Result<PathBuf> {
    let task_dir = dir.join("greeting");
    std::fs::create_dir_all(task_dir.join("workspace"))?;
    std::fs::create_dir_all(task_dir.join("hidden"))?;
    std::fs::write(task_dir.join("task.toml"), task)?;
    std::fs::write(task_dir.join("workspace/greet.txt"), "")?;
    std::fs::write(task_dir.join("hidden/check.sh"), hidden)?;
    Ok(task_dir)
}

/// The first user message: the episode's prompt (goal, checks, workspace, step).
fn prompt(req: &Value) -> String {
    req["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

fn assistant_turns(req: &Value) -> usize {
    req["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continuation_feeds_the_failing_check_back_until_it_passes() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let task = load_long_task(&write_task(dir.path(), TASK, HIDDEN)?)?;

    // The executor writes one line until its goal lists a failing check, then both.
    let executor = Reply::dynamic(|req: &Value| {
        if assistant_turns(req) > 0 {
            return Reply::tool_call("finish", json!({"summary": "wrote greet.txt"}));
        }
        let content = if prompt(req).contains(FAILING_HEADER) {
            "hello\nbye\n"
        } else {
            "hello\n"
        };
        Reply::tool_call(
            "write_file",
            json!({"path": "greet.txt", "content": content}),
        )
    });
    let model = StandInModel::start(Script::new().fallback("standin-executor", executor)).await?;
    let stack = Stack::start(StackOptions::new(
        vec![
            Profile::new("episode-mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    ))
    .await?;
    let bench = LongBench::new(
        &stack,
        &model,
        "standin-manager",
        ArmProfiles {
            manager: "episode-mgr".into(),
            executor: "exec".into(),
            judge: "episode-mgr".into(),
            episode_manager: "episode-mgr".into(),
        },
        LongCaps {
            token_budget: 200_000,
            episode_secs: 30,
            single_wall_secs: 60,
            loop_wall_secs: 120,
        },
        Vec::new(),
        HiddenTimeouts::default(),
    );
    let record = tokio::time::timeout(
        Duration::from_secs(150),
        bench.run_arm(&task, Arm::Continuation),
    )
    .await??;
    let logs = || stack.logs();

    // Two episodes: the loop stopped because the public checks pass, and the hidden criteria
    // agree.
    assert_eq!(record.rounds, 2, "{record:#?}\n{}", logs());
    assert_eq!(
        record.stop_reason.as_deref(),
        Some("checks_pass"),
        "{record:#?}"
    );
    assert!(
        record.claimed_done && !record.false_completion,
        "{record:#?}"
    );
    assert_eq!(
        (record.hidden_passed, record.criteria),
        (2, 2),
        "{record:#?}"
    );
    let curve: Vec<u32> = record.curve.iter().map(|p| p.kept_passed).collect();
    assert_eq!(curve, [0, 1, 2], "{record:#?}");
    assert!(record.summary.final_is_best && record.summary.best_held == 2);
    assert_eq!(record.run_ids.len(), 2);

    // The second episode's goal is the goal's own words plus the failing check: its command
    // and its output; the first episode had the goal alone.
    let requests = model.requests("standin-executor");
    let prompts: Vec<String> = requests
        .iter()
        .filter(|r| assistant_turns(r) == 0)
        .map(prompt)
        .collect();
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    assert!(!prompts[0].contains(FAILING_HEADER), "{}", prompts[0]);
    let second = &prompts[1];
    for want in [
        "greet.txt holds `hello` on its first line.",
        FAILING_HEADER,
        BYE_CHECK,
        "exits 1",
        "want bye on line 2, got ''",
    ] {
        assert!(second.contains(want), "{want:?} not in:\n{second}");
    }
    // Only the failing check is listed under the header (up to the contract's checks).
    let from_header = &second[second.find(FAILING_HEADER).unwrap_or(0)..];
    let failing_part = &from_header[..from_header.find("Acceptance checks").unwrap_or(0)];
    assert!(failing_part.contains("sed -n 2p"), "{failing_part}");
    assert!(!failing_part.contains("sed -n 1p"), "{failing_part}");

    // The second run started from the first run's candidate (uploaded as its workspace).
    let first_run = stack.run(&record.run_ids[0]).await?;
    let second_rounds = stack
        .get(&format!("/v1/runs/{}/rounds", record.run_ids[1]))
        .await?;
    let tree = tempfile::tempdir()?;
    let base = second_rounds["rounds"][0]["base_snapshot"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    stack.checkout(&base, tree.path()).await?;
    assert_eq!(
        std::fs::read_to_string(tree.path().join("greet.txt"))?,
        "hello\n"
    );

    // Tokens are counted as the runs count them: the two runs' totals, all the executor's.
    let second_run = stack.run(&record.run_ids[1]).await?;
    let total = |v: &Value| v["total_tokens"].as_u64().unwrap_or(0);
    assert!(total(&first_run) > 0 && total(&second_run) > 0);
    assert_eq!(record.tokens, total(&first_run) + total(&second_run));
    assert_eq!(record.tokens_by_role.manager, 0, "{record:#?}");
    assert_eq!(record.tokens_by_role.executor, record.tokens, "{record:#?}");
    Ok(())
}
