//! What a leaked executor credential can still publish on the results stream, and why it
//! neither stops nor ends a run (issue 38 items 5 and 9), on a stack with the project's
//! per-role NATS users (deploy/nats/loopgate-users.conf) and a signing auditor.
//!
//! - Dedup ids: JetStream drops a second message with the same `Nats-Msg-Id` anywhere on
//!   `LG_RESULTS` for two minutes. Junk published with the executor's credentials under every
//!   id of the auditor's and the manager's that an attacker can predict (the readable
//!   prefixes) drops nothing: the real ids are sealed with a nonce or a per-run secret. The
//!   junk is refused as `foreign_msg_id` security events, and the run completes.
//! - Unsigned executor fields: a forged `exec_result` reporting 10^9 tokens is refused
//!   (`usage_over_ceiling`), never charged; repeated `episode_started` notices never move the
//!   step's deadline (it passes on time while they keep coming); the run completes.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_protocol::dispatch_id::{decide_msg_id, StepKey};
use loopgate_protocol::usage::Usage;
use loopgate_protocol::wire::{
    decode, AuditPurpose, AuditRequest, Envelope, EpisodeRole, EpisodeStarted, ExecOutcome,
    ExecResult, Message,
};
use loopgate_test_support::{Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions, Worker};
use loopgate_transport::Bus;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(90);

fn task(budget: &str) -> String {
    format!(
        r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
description = "python3 hello.py prints the greeting"
check = "test \"$(python3 hello.py)\" = 'hello, loopgate'"
blocking = true
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 5
self_checks = 0
{budget}
"#
    )
}

fn profiles(model: &StandInModel) -> Vec<Profile> {
    vec![
        Profile::new("mgr", &model.base_url(), "standin-manager"),
        Profile::new("exec", &model.base_url(), "standin-executor"),
    ]
}

/// A manager that always routes the step to `cli`, and an executor that writes the right file
/// `episodes` times.
async fn model(episodes: usize) -> anyhow::Result<StandInModel> {
    let episode = [
        Reply::tool_call(
            "write_file",
            json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
        ),
        Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
    ];
    StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .replies(
                "standin-executor",
                std::iter::repeat_n(episode, episodes).flatten(),
            ),
    )
    .await
}

/// The audit request the manager queued for `run` (the auditor is down, so it waits there).
async fn pending_audit(manager: &Bus, run: &str) -> anyhow::Result<AuditRequest> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let subject = manager.subjects().audit_request();
    loop {
        let stream = manager.jetstream().get_stream("LG_AUDIT").await?;
        if let Ok(raw) = stream.get_last_raw_message_by_subject(&subject).await {
            if let Ok(Message::AuditRequest(req)) = decode(&raw.payload) {
                if req.run_id == run {
                    return Ok(req);
                }
            }
        }
        if tokio::time::Instant::now() > deadline {
            bail!("no audit request for run {run} after {WAIT:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// `loopgate_security_refused_messages_total` by `(kind, reason)` on the manager's /metrics.
async fn refusals(stack: &Stack) -> anyhow::Result<BTreeMap<(String, String), f64>> {
    let page = reqwest::get(format!("{}/metrics", stack.http))
        .await?
        .text()
        .await?;
    let name = "loopgate_security_refused_messages_total{";
    let mut out = BTreeMap::new();
    for line in page.lines().filter(|l| l.starts_with(name)) {
        let label = |key: &str| {
            let start = line.find(&format!("{key}=\""))? + key.len() + 2;
            let len = line[start..].find('"')?;
            Some(line[start..start + len].to_string())
        };
        let value: f64 = line.rsplit(' ').next().unwrap_or("0").parse()?;
        if let (Some(kind), Some(reason)) = (label("kind"), label("reason")) {
            *out.entry((kind, reason)).or_default() += value;
        }
    }
    Ok(out)
}

/// Wait until `(kind, reason)` was refused at least `n` times.
async fn wait_refused(stack: &Stack, kind: &str, reason: &str, n: f64) -> anyhow::Result<f64> {
    let deadline = tokio::time::Instant::now() + WAIT;
    let key = (kind.to_string(), reason.to_string());
    loop {
        let counted = refusals(stack).await?;
        let got = counted.get(&key).copied().unwrap_or(0.0);
        if got >= n {
            return Ok(got);
        }
        if tokio::time::Instant::now() > deadline {
            bail!(
                "{got} refusals of {key:?} after {WAIT:?}, not {n}: {counted:?}\n{}",
                stack.logs()
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Wait until the run's log holds an entry of `kind`.
async fn wait_logged(stack: &Stack, id: &str, kind: &str) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + WAIT;
    while !stack.log_types(id).await?.iter().any(|t| t == kind) {
        if tokio::time::Instant::now() > deadline {
            bail!("no {kind} in run {id} after {WAIT:?}\n{}", stack.logs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

async fn publish(bus: &Bus, subject: &str, message: &Message, id: &str) -> anyhow::Result<()> {
    bus.publish_json(subject, &Envelope::new(message), id, &[])
        .await
        .with_context(|| format!("publishing {} on {subject}", message.kind()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn junk_under_the_auditors_next_report_id_does_not_stop_the_honest_report(
) -> anyhow::Result<()> {
    let model = model(1).await?;
    let mut stack = Stack::start(StackOptions::new(profiles(&model), 1).hardened()).await?;
    // The auditor comes back only once the junk is in the stream, before it reports.
    stack.auditor.kill();
    let run = stack.submit(&task(""), &[]).await?;
    let id = run["id"].as_str().context("run id")?.to_string();
    let manager = stack.connect_as("manager").await?;
    let req = pending_audit(&manager, &id).await?;

    // Every id of the auditor's and the manager's an executor can predict: reports and start
    // notices of this round and the next, of every purpose and the first attempts, and the
    // next decision requests. Junk under each, on both subjects the executor may publish to.
    let executor = stack.connect_as("executor").await?;
    let s = executor.subjects().clone();
    let mut squatted = Vec::new();
    for round in [req.round, req.round + 1] {
        let step = StepKey {
            run_id: &id,
            generation: req.generation,
            round,
        };
        for purpose in [AuditPurpose::Round, AuditPurpose::Final] {
            for attempt in 1..=3 {
                squatted.push(step.audit_report_msg_id(purpose, attempt));
                squatted.push(step.audit_started_msg_id(purpose, attempt));
            }
        }
    }
    // (The first decision request went out with the run.)
    for seq in 2..=4 {
        squatted.push(decide_msg_id(&id, req.generation, seq));
    }
    for (i, msg_id) in squatted.iter().enumerate() {
        let subject = if i % 2 == 0 {
            s.exec_result(&id)
        } else {
            s.exec_started(&id)
        };
        executor
            .publish_bytes(&subject, b"squatted".to_vec(), msg_id, &[])
            .await
            .with_context(|| format!("publishing junk under {msg_id}"))?;
    }
    let refused = wait_refused(
        &stack,
        "undecodable",
        "foreign_msg_id",
        squatted.len() as f64,
    )
    .await?;
    assert_eq!(refused, squatted.len() as f64);
    let log = stack.manager_log();
    assert!(
        log.contains("foreign_msg_id") && log.contains("message_refused"),
        "each squat is a security event in the log:\n{log}"
    );

    // The honest auditor reports, and nothing it or the manager publishes is dropped.
    stack.restart_worker(Worker::Auditor(0))?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_usage_and_repeated_starts_neither_end_nor_stall_the_run() -> anyhow::Result<()> {
    // Two executor episodes: the restarted executor first runs the step the deadline took
    // away (its result is ignored), then the next one.
    let model = model(2).await?;
    let mut options = StackOptions::new(profiles(&model), 1).hardened();
    options.executor_extra = "concurrency = 1\n".into();
    let mut stack = Stack::start(options).await?;
    // No honest executor until the forgeries are in: they reach the run first.
    stack.executors[0].kill();
    // One episode may spend at most (8 + 1) s x 100k tokens/s = 900k tokens; the run 10^8.
    let budget = "max_total_tokens = 100000000\nexecutor_episode_secs = 8\nepisode_grace_secs = 1";
    let run = stack.submit(&task(budget), &[]).await?;
    let id = run["id"].as_str().context("run id")?.to_string();
    wait_logged(&stack, &id, "exec_dispatched").await?;
    let executor = stack.connect_as("executor").await?;
    let s = executor.subjects().clone();

    // A forged result that claims 10^9 tokens: refused, never charged.
    let forged = Message::ExecResult(ExecResult {
        transcript: None,
        attempt: 1,
        run_id: id.clone(),
        generation: 1,
        round: 1,
        delivery_attempt: 1,
        worker: "forger".into(),
        outcome: ExecOutcome::Failed {
            error: "forged".into(),
        },
        usage: Usage::tokens(1_000_000_000, 0),
        duration_ms: 1,
        agent_isolation: None,
    });
    publish(&executor, &s.exec_result(&id), &forged, "forged-result").await?;
    let key = ("exec_result".to_string(), "usage_over_ceiling".to_string());
    let deadline = tokio::time::Instant::now() + WAIT;
    while !refusals(&stack).await?.contains_key(&key) {
        let now = stack.run(&id).await?;
        assert_eq!(
            now["state"], "running",
            "the forged usage ended the run: {now}"
        );
        if tokio::time::Instant::now() > deadline {
            bail!("the forged result was not refused\n{}", stack.logs());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let now = stack.run(&id).await?;
    assert_eq!(now["state"], "running", "{now}");
    assert_eq!(now["usage"]["executor"]["input_tokens"], 0, "{now}");

    // A start, then ten more, 1.5 s apart: the first sets the step's deadline (9 s), the
    // repeats never move it, so it passes while they still come.
    let start = |i: usize| {
        Message::EpisodeStarted(EpisodeStarted {
            attempt: 1,
            run_id: id.clone(),
            generation: 1,
            round: 1,
            role: EpisodeRole::Executor,
            delivery_attempt: 1,
            worker: format!("forger-{i}"),
        })
    };
    publish(&executor, &s.exec_started(&id), &start(0), "forged-start-0").await?;
    // The forged executor start (the auditor's start of the starting workspace's checks came
    // before round 1).
    let deadline = tokio::time::Instant::now() + WAIT;
    while !stack
        .log_entries(&id, "episode_started")
        .await?
        .iter()
        .any(|e| e["role"] == "executor")
    {
        if tokio::time::Instant::now() > deadline {
            bail!("the forged start was not logged\n{}", stack.logs());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for i in 1..=10 {
        tokio::time::sleep(Duration::from_millis(1500)).await;
        publish(
            &executor,
            &s.exec_started(&id),
            &start(i),
            &format!("forged-start-{i}"),
        )
        .await?;
    }
    let missed = stack.log_entries(&id, "deadline_missed").await?;
    assert_eq!(
        missed.len(),
        1,
        "the step's deadline passed while the starts kept coming: {missed:?}\n{}",
        stack.logs()
    );
    let repeats = refusals(&stack)
        .await?
        .get(&("episode_started".into(), "repeated_episode_start".into()))
        .copied()
        .unwrap_or(0.0);
    assert!(
        repeats >= 3.0,
        "repeats before the deadline are refused: {repeats}"
    );

    // The run went on by itself: the honest executor takes the next step and it completes.
    stack.restart_worker(Worker::Executor(0))?;
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    let tokens = done["usage"]["executor"]["input_tokens"]
        .as_u64()
        .context("executor usage")?;
    assert!(tokens < 900_000, "only honest usage is charged: {done}");
    Ok(())
}
