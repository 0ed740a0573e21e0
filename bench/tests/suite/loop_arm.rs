//! A loop arm end to end over the real stack with stand-in models: the bench fetches every
//! round's snapshots through the manager's API and runs the hidden checks on each, so the
//! record's curve follows the run round by round, with the run's own tokens by role.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_bench::long::{load_long_task, Arm, ArmProfiles, HiddenTimeouts, LongBench, LongCaps};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

use super::continuation::{write_task, HIDDEN, TASK};

fn first_turn(req: &Value) -> bool {
    req["messages"]
        .as_array()
        .is_some_and(|m| !m.iter().any(|m| m["role"] == "assistant"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_arm_records_the_hidden_criteria_of_every_round() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let task = load_long_task(&write_task(dir.path(), TASK, HIDDEN)?)?;

    // Episode 1 writes the first line only, episode 2 (the step retried) both.
    let episodes = Arc::new(AtomicUsize::new(0));
    let seen = episodes.clone();
    let executor = Reply::dynamic(move |req: &Value| {
        if !first_turn(req) {
            return Reply::tool_call("finish", json!({"summary": "wrote greet.txt"}));
        }
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let content = if n == 0 { "hello\n" } else { "hello\nbye\n" };
        Reply::tool_call(
            "write_file",
            json!({"path": "greet.txt", "content": content}),
        )
    });
    let manager = Reply::content(
        "Current task state: greet.txt is empty\nNext: cli\nTask: write greet.txt as the goal says",
    );
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", manager)
            .fallback("standin-executor", executor),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
        ],
        1,
    ))
    .await?;
    let bench = LongBench::new(
        &stack,
        &model,
        "standin-episode-manager",
        ArmProfiles {
            manager: "mgr".into(),
            executor: "exec".into(),
            judge: "mgr".into(),
            episode_manager: "mgr".into(),
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
        bench.run_arm(&task, Arm::Loopgate),
    )
    .await??;

    assert_eq!(
        record.terminal_state,
        "completed",
        "{record:#?}\n{}",
        stack.logs()
    );
    assert!(
        record.claimed_done && !record.false_completion,
        "{record:#?}"
    );
    assert_eq!((record.hidden_passed, record.criteria), (2, 2));
    assert_eq!(record.public_passed, Some(2), "{record:#?}");
    let kept: Vec<u32> = record.curve.iter().map(|p| p.kept_passed).collect();
    let candidates: Vec<Option<u32>> = record.curve.iter().map(|p| p.candidate_passed).collect();
    assert_eq!(kept, [0, 1, 2], "{record:#?}");
    assert_eq!(candidates, [None, Some(1), Some(2)], "{record:#?}");
    assert_eq!(record.rounds, 2);
    assert!(record.summary.final_is_best && record.summary.lost_ground.is_empty());
    assert_eq!(record.run_ids.len(), 1);

    // Tokens as the run counts them, split by role.
    let run = stack.run(&record.run_ids[0]).await?;
    assert_eq!(Some(record.tokens), run["total_tokens"].as_u64(), "{run}");
    // Each goal clause has its check, so the clause policy took both steps: no manager call.
    assert_eq!(record.tokens_by_role.manager, 0, "{record:#?}");
    assert!(record.tokens_by_role.executor > 0, "{record:#?}");
    assert_eq!(record.tokens_by_role.total(), record.tokens, "{record:#?}");
    Ok(())
}
