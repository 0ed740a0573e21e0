//! The long suite as the bench runs it, with stand-in models instead of the real one: on each
//! real task of `examples/long`, a stand-in executor writes the task's reference solution, so
//! every arm ends with every hidden criterion passing, through the real task files, stacks
//! (the web task's with a gui executor) and hidden scripts. A check of the bench itself before
//! hours with the real model; not part of `make test` (about six minutes on 2 cores, the web
//! task's browser checks most of it):
//! `cargo test -p loopgate-bench --test bench -- --ignored` (`LONG_DRY_RUN_TASKS=a,b` picks
//! tasks). The stand-in judge's answers are not a judge's, so the `loopgate` arm here shows the
//! plumbing, not the judge.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_bench::long::{
    load_long_suite, long_suite_dir, read_workspace, Arm, ArmProfiles, HiddenTimeouts, LongBench,
    LongCaps, FAILING_HEADER,
};
use loopgate_test_support::{workspace_bin, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

/// The stand-in executor: one `write_file` per file of `reference/`, then `finish`. While
/// `hold_back` is set, an episode whose goal lists no failing check finishes at once, writing
/// nothing (so a continuation needs its second episode, with the failing checks in its goal).
fn write_reference(dir: &Path, hold_back: Arc<AtomicBool>) -> anyhow::Result<Reply> {
    let files: Vec<(String, String)> = read_workspace(dir)?
        .into_iter()
        .map(|f| (f.path, String::from_utf8_lossy(&f.bytes).into_owned()))
        .collect();
    Ok(Reply::dynamic(move |req: &Value| {
        let messages = req["messages"].as_array().cloned().unwrap_or_default();
        let turns = messages.iter().filter(|m| m["role"] == "assistant").count();
        let prompt = messages
            .iter()
            .find(|m| m["role"] == "user")
            .and_then(|m| m["content"].as_str())
            .unwrap_or_default();
        if hold_back.load(Ordering::SeqCst) && !prompt.contains(FAILING_HEADER) {
            return Reply::tool_call("finish", json!({"summary": "nothing yet"}));
        }
        match files.get(turns) {
            Some((path, content)) => {
                Reply::tool_call("write_file", json!({"path": path, "content": content}))
            }
            None => Reply::tool_call("finish", json!({"summary": "wrote the reference"})),
        }
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "minutes: cargo test -p loopgate-bench --test bench -- --ignored"]
async fn every_arm_reaches_every_hidden_criterion_with_the_reference_solution() -> anyhow::Result<()>
{
    let only: Vec<String> = std::env::var("LONG_DRY_RUN_TASKS")
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let cli = workspace_bin("loopgate")?;
    let path = format!(
        "{}:{}",
        cli.parent()
            .map(|p| p.display().to_string())
            .unwrap_or_default(),
        std::env::var("PATH").unwrap_or_default()
    );
    let env = vec![
        ("PATH".to_string(), path),
        ("LOOPGATE_BIN".to_string(), cli.display().to_string()),
    ];
    let hold_back = Arc::new(AtomicBool::new(false));
    for task in load_long_suite(&long_suite_dir(), &only)? {
        let reference = long_suite_dir().join(&task.name).join("reference");
        let manager = Reply::content(
            "Current task state: nothing yet\nNext: cli\nTask: do what the goal says",
        );
        let model =
            StandInModel::start(Script::new().fallback("standin-manager", manager).fallback(
                "standin-executor",
                write_reference(&reference, hold_back.clone())?,
            ))
            .await?;
        let mut options = StackOptions::new(
            vec![
                Profile::new("mgr", &model.base_url(), "standin-manager"),
                Profile::new("episode-mgr", &model.base_url(), "standin-episode-manager"),
                Profile::new("exec", &model.base_url(), "standin-executor"),
            ],
            1,
        );
        if task.is_gui() {
            options.capabilities = vec!["cli", "gui"];
        }
        let stack = Stack::start(options).await?;
        let bench = LongBench::new(
            &stack,
            &model,
            "standin-episode-manager",
            ArmProfiles {
                manager: "mgr".into(),
                executor: "exec".into(),
                judge: "mgr".into(),
                episode_manager: "episode-mgr".into(),
            },
            LongCaps {
                token_budget: 2_000_000,
                episode_secs: 120,
                single_wall_secs: 300,
                loop_wall_secs: 600,
            },
            env.clone(),
            HiddenTimeouts::default(),
        );
        for arm in [
            Arm::SingleShot,
            Arm::Continuation,
            Arm::Loopgate,
            Arm::NoJudge,
        ] {
            hold_back.store(arm == Arm::Continuation, Ordering::SeqCst);
            let record =
                tokio::time::timeout(Duration::from_secs(900), bench.run_arm(&task, arm)).await??;
            eprintln!("{}", record.line());
            assert_eq!(
                record.hidden_passed,
                record.criteria,
                "{record:#?}\n{}",
                stack.logs()
            );
            assert!(
                record.claimed_done && !record.false_completion,
                "{record:#?}"
            );
            assert_eq!(record.curve.first().map(|p| p.kept_passed), Some(0));
            if arm == Arm::Continuation {
                let kept: Vec<u32> = record.curve.iter().map(|p| p.kept_passed).collect();
                assert_eq!(kept, [0, 0, record.criteria], "{record:#?}");
            }
        }
    }
    Ok(())
}
