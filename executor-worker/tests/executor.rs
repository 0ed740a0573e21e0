//! The executor worker against a real nats-server and a stand-in OpenAI-compatible model:
//! requests in on `loopgate.exec.cli`, results out on `loopgate.result.exec.<run>`, candidate
//! snapshots in the object store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{bail, Context};
use loopgate_executor::{prepare, run_workers};
use loopgate_executor::{ExecutorFile, ExternalInputs};
use loopgate_protocol::subjects::Capability;
use loopgate_protocol::wire::{decode, encode, ExecOutcome, ExecRequest, ExecResult, Message};
use loopgate_snapshot::SnapshotStore;
use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_test_support::{wait_until, ChildGuard, NatsServer};
use loopgate_transport::{Bus, BusOptions, ConsumerOptions, Work, WorkConsumer};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const MODEL: &str = "standin-executor";
const WAIT: Duration = Duration::from_secs(30);

fn config_toml(nats_url: &str, model_url: &str, work_dir: &Path, ack_wait_secs: u64) -> String {
    config_toml_with(nats_url, model_url, work_dir, ack_wait_secs, "")
}

/// The test config with `extra` lines in its `[executor]` section.
fn config_toml_with(
    nats_url: &str,
    model_url: &str,
    work_dir: &Path,
    ack_wait_secs: u64,
    extra: &str,
) -> String {
    format!(
        r#"
[nats]
url = "{nats_url}"
[executor]
worker_id = "exec-test"
capabilities = ["cli"]
work_dir = "{}"
shell_timeout_secs = 10
ack_wait_secs = {ack_wait_secs}
shutdown_grace_secs = 1
{extra}
[models.standin]
base_url = "{model_url}"
model = "{MODEL}"
timeout_secs = 10
"#,
        work_dir.display()
    )
}

struct Harness {
    nats: NatsServer,
    model: StandInModel,
    bus: Bus,
    store: SnapshotStore,
    results: WorkConsumer,
    /// Holds `work/` (the worker's work dir) and room around it to detect escapes.
    scratch: tempfile::TempDir,
    cancel: CancellationToken,
    workers: Option<JoinHandle<()>>,
    /// Extra `[executor]` lines for the in-process workers.
    extra_config: String,
}

impl Harness {
    /// NATS + stand-in model + (optionally) the worker loops running in this process.
    async fn start(script: Script, in_process: bool) -> anyhow::Result<Harness> {
        Self::start_with(script, in_process, 6).await
    }

    async fn start_with(
        script: Script,
        in_process: bool,
        ack_wait_secs: u64,
    ) -> anyhow::Result<Harness> {
        Self::start_configured(script, in_process, ack_wait_secs, "").await
    }

    async fn start_configured(
        script: Script,
        in_process: bool,
        ack_wait_secs: u64,
        extra_config: &str,
    ) -> anyhow::Result<Harness> {
        let nats = NatsServer::start().await?;
        let model = StandInModel::start(script).await?;
        let scratch = tempfile::tempdir()?;
        let bus = Bus::connect(&nats.url(), "loopgate", BusOptions::default()).await?;
        bus.ensure_topology().await?;
        let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
        let results = bus
            .work_consumer(Work::Results, ConsumerOptions::default())
            .await?;
        let cancel = CancellationToken::new();
        let mut harness = Harness {
            nats,
            model,
            bus,
            store,
            results,
            scratch,
            cancel,
            workers: None,
            extra_config: extra_config.to_string(),
        };
        if in_process {
            harness.spawn_workers(ack_wait_secs).await?;
        }
        Ok(harness)
    }

    /// Start the worker loops in this process (again, after `stop_workers`).
    async fn spawn_workers(&mut self, ack_wait_secs: u64) -> anyhow::Result<()> {
        let text = config_toml_with(
            &self.nats.url(),
            &self.model.base_url(),
            &self.work_dir(),
            ack_wait_secs,
            &self.extra_config,
        );
        let settings = ExecutorFile::parse(&text, "test")?.resolve(&ExternalInputs {
            pid: 1,
            temp_dir: std::env::temp_dir(),
            ..ExternalInputs::default()
        })?;
        self.cancel = CancellationToken::new();
        let ctx = prepare(&settings, &self.cancel)
            .await?
            .context("start-up was cancelled")?;
        let cancel = self.cancel.clone();
        self.workers = Some(tokio::spawn(async move {
            run_workers(ctx, &settings, cancel).await
        }));
        Ok(())
    }

    async fn stop_workers(&mut self) -> anyhow::Result<()> {
        self.cancel.cancel();
        if let Some(workers) = self.workers.take() {
            tokio::time::timeout(WAIT, workers)
                .await
                .context("workers did not stop")??;
        }
        Ok(())
    }

    async fn exec_consumer(&self) -> anyhow::Result<async_nats::jetstream::consumer::Info> {
        let stream = self.bus.jetstream().get_stream("LG_EXEC").await?;
        Ok(stream.consumer_info("exec-cli").await?)
    }

    fn work_dir(&self) -> PathBuf {
        self.scratch.path().join("work")
    }

    async fn base_snapshot(&self, files: &[(&str, &str)]) -> anyhow::Result<String> {
        support::freeze_text_files(&self.store, files).await
    }

    async fn send(&self, req: &ExecRequest) -> anyhow::Result<()> {
        let envelope: serde_json::Value =
            serde_json::from_slice(&encode(&Message::ExecRequest(req.clone())))?;
        let msg_id = format!("{}:{}:{}:exec:1", req.run_id, req.generation, req.round);
        self.bus
            .publish_json(
                &self.bus.subjects().exec(Capability::Cli),
                &envelope,
                &msg_id,
                &[],
            )
            .await?;
        Ok(())
    }

    async fn next_result(&mut self) -> anyhow::Result<(String, ExecResult)> {
        let deadline = tokio::time::Instant::now() + WAIT;
        while tokio::time::Instant::now() < deadline {
            if let Some(delivery) = self.results.next(Duration::from_secs(1)).await? {
                delivery.ack().await?;
                let subject = delivery.subject().to_string();
                match decode(delivery.payload())? {
                    Message::ExecResult(result) => return Ok((subject, result)),
                    // Announced before each episode (tests/episode_control.rs covers it), and
                    // its progress while it runs.
                    Message::EpisodeStarted(_) | Message::EpisodeProgress(_) => {}
                    other => bail!("unexpected {} on {subject}", other.kind()),
                }
            }
        }
        bail!("no exec result within {WAIT:?}")
    }

    /// Content of `path` in snapshot `id`, read back through the store (hash-checked).
    async fn file_in(&self, id: &str, path: &str) -> anyhow::Result<Option<String>> {
        support::file_in(&self.store, id, path).await
    }

    async fn exec_stream_empty(&self) -> bool {
        match self.bus.jetstream().get_stream("LG_EXEC").await {
            Ok(mut stream) => stream
                .info()
                .await
                .map(|i| i.state.messages == 0)
                .unwrap_or(false),
            Err(_) => false,
        }
    }

    async fn stop(mut self) -> anyhow::Result<()> {
        self.stop_workers().await
    }
}

fn request(run_id: &str, base: &str) -> ExecRequest {
    support::request(run_id, base, "standin", 60)
}

fn frozen(result: &ExecResult) -> (&str, &str, bool, u32, u32) {
    match &result.outcome {
        ExecOutcome::Frozen {
            candidate,
            summary,
            claimed_done,
            tool_calls,
            files_changed,
            ..
        } => (
            candidate,
            summary,
            *claimed_done,
            *tool_calls,
            *files_changed,
        ),
        ExecOutcome::Failed { error } => panic!("episode failed: {error}"),
    }
}

#[tokio::test]
async fn tool_calls_write_a_file_and_freeze_it() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            Reply::tool_call(
                "write_file",
                json!({"path": "src/hello.txt", "content": "hello world\n"}),
            ),
            Reply::tool_call("finish", json!({"summary": "wrote hello"})),
        ],
    );
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[("README.md", "readme\n")]).await?;
    // Garbage on the exec subject is terminated; the worker keeps going.
    h.bus
        .publish_json(
            &h.bus.subjects().exec(Capability::Cli),
            &json!({"v": 1, "kind": "nope"}),
            "junk",
            &[],
        )
        .await?;
    h.send(&request("run-a", &base)).await?;

    let (subject, result) = h.next_result().await?;
    assert_eq!(subject, "loopgate.result.exec.run-a");
    assert_eq!(
        (
            result.run_id.as_str(),
            result.round,
            result.delivery_attempt
        ),
        ("run-a", 1, 1)
    );
    assert_eq!(result.worker, "exec-test");
    assert!(result.usage.input_tokens > 0);
    let (candidate, summary, claimed_done, tool_calls, files_changed) = frozen(&result);
    assert_eq!(
        (summary, claimed_done, tool_calls, files_changed),
        ("wrote hello", true, 2, 1)
    );
    assert_eq!(
        h.file_in(candidate, "src/hello.txt").await?.as_deref(),
        Some("hello world\n")
    );
    assert_eq!(
        h.file_in(candidate, "README.md").await?.as_deref(),
        Some("readme\n")
    );

    // The request was acked after the result went out, and the episode dir is gone.
    wait_until(WAIT, || h.exec_stream_empty()).await?;
    wait_until(WAIT, || async {
        support::work_dir_entries(&h.work_dir())
            .map(|n| n == 0)
            .unwrap_or(false)
    })
    .await?;
    // The model saw the workspace listing and the task.
    let first = &h.model.requests(MODEL)[0];
    assert!(last_message_content(first, "user")
        .unwrap_or_default()
        .contains("README.md"));
    h.stop().await
}

#[tokio::test]
async fn fenced_json_tool_calls_in_content_work() -> anyhow::Result<()> {
    let write = "I will create the file.\n```json\n{\"name\": \"write_file\", \"arguments\": \
                 {\"path\": \"fenced.txt\", \"content\": \"from a fence\"}}\n```";
    let finish =
        "```json\n{\"name\": \"finish\", \"arguments\": {\"summary\": \"fenced done\"}}\n```";
    let script = Script::new().replies(MODEL, [Reply::content(write), Reply::content(finish)]);
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[]).await?;
    h.send(&request("run-b", &base)).await?;

    let (_, result) = h.next_result().await?;
    let (candidate, summary, claimed_done, _, files_changed) = frozen(&result);
    assert_eq!(
        (summary, claimed_done, files_changed),
        ("fenced done", true, 1)
    );
    assert_eq!(
        h.file_in(candidate, "fenced.txt").await?.as_deref(),
        Some("from a fence")
    );
    h.stop().await
}

#[tokio::test]
async fn hostile_paths_are_tool_errors() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            Reply::tool_call(
                "write_file",
                json!({"path": "../../etc/x", "content": "pwned"}),
            ),
            Reply::tool_call(
                "write_file",
                json!({"path": "/tmp/loopgate-abs-escape", "content": "pwned"}),
            ),
            // Answers with the last tool result, so the test can see what the model was told.
            Reply::dynamic(|req| {
                Reply::content(last_message_content(req, "tool").unwrap_or_default())
            }),
        ],
    );
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[("keep.txt", "k")]).await?;
    h.send(&request("run-c", &base)).await?;

    let (_, result) = h.next_result().await?;
    let (candidate, summary, claimed_done, tool_calls, files_changed) = frozen(&result);
    assert!(summary.starts_with("error: "), "{summary}");
    assert_eq!((claimed_done, tool_calls, files_changed), (false, 2, 0));
    assert_eq!(
        candidate, base,
        "nothing changed, so the candidate is the base"
    );
    let requests = h.model.requests(MODEL);
    let told = last_message_content(&requests[1], "tool").unwrap_or_default();
    assert!(told.contains(".."), "{told}");
    for escaped in [
        h.scratch.path().join("etc/x"),
        PathBuf::from("/tmp/loopgate-abs-escape"),
    ] {
        assert!(!escaped.exists(), "{} was written", escaped.display());
    }
    h.stop().await
}

#[tokio::test]
async fn unknown_profile_and_dead_model_fail_cleanly() -> anyhow::Result<()> {
    let script = Script::new().fallback(MODEL, Reply::error(401, "bad key"));
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[]).await?;

    let mut unknown = request("run-d", &base);
    unknown.executor_profile = "nope".into();
    h.send(&unknown).await?;
    let (_, result) = h.next_result().await?;
    assert!(
        matches!(&result.outcome, ExecOutcome::Failed { error } if error.contains("unknown executor profile")),
        "{:?}",
        result.outcome
    );

    h.send(&request("run-e", &base)).await?;
    let (_, result) = h.next_result().await?;
    assert!(
        matches!(result.outcome, ExecOutcome::Failed { .. }),
        "{:?}",
        result.outcome
    );
    h.stop().await
}

#[tokio::test]
async fn step_cap_ends_a_model_that_never_stops() -> anyhow::Result<()> {
    let script = Script::new().fallback(
        MODEL,
        Reply::tool_call("shell", json!({"command": "echo hi >> log.txt"})),
    );
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[]).await?;
    let mut req = request("run-f", &base);
    req.max_steps = 3;
    h.send(&req).await?;
    let (_, result) = h.next_result().await?;
    let (candidate, summary, claimed_done, tool_calls, _) = frozen(&result);
    assert_eq!(
        (summary, claimed_done, tool_calls),
        ("step cap reached", false, 3)
    );
    assert_eq!(
        h.file_in(candidate, "log.txt").await?.as_deref(),
        Some("hi\nhi\nhi\n")
    );
    h.stop().await
}

#[tokio::test]
async fn progress_acks_keep_a_long_episode_from_redelivery() -> anyhow::Result<()> {
    // ack_wait 3 s; the first model call alone takes 5 s.
    let script = Script::new().replies(
        MODEL,
        [
            Reply::delayed(
                Duration::from_secs(5),
                Reply::tool_call("write_file", json!({"path": "slow.txt", "content": "slow"})),
            ),
            Reply::tool_call("finish", json!({"summary": "slow done"})),
        ],
    );
    let mut h = Harness::start_with(script, true, 3).await?;
    let base = h.base_snapshot(&[]).await?;
    h.send(&request("run-h", &base)).await?;
    h.model.wait_for_requests(MODEL, 1, WAIT).await?;
    // A rival puller on the same durable would get the request if ack_wait ran out.
    let options = ConsumerOptions {
        ack_wait: Duration::from_secs(3),
        ..ConsumerOptions::default()
    };
    let mut rival = h
        .bus
        .work_consumer(Work::Exec(Capability::Cli), options)
        .await?;
    let stolen = rival.next(Duration::from_secs(5)).await?;
    assert!(
        stolen.is_none(),
        "the request was redelivered during the episode: {stolen:?}"
    );
    let (_, result) = h.next_result().await?;
    assert_eq!(result.delivery_attempt, 1);
    let (_, summary, ..) = frozen(&result);
    assert_eq!(summary, "slow done");
    let info = h.exec_consumer().await?;
    assert_eq!(info.num_redelivered, 0);
    assert_eq!(h.model.request_count(MODEL), 2);
    h.stop().await
}

#[tokio::test]
async fn shutdown_naks_an_unfinished_episode_for_redelivery() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            // Still thinking when the worker is told to stop (grace is 1 s).
            Reply::delayed(Duration::from_secs(8), Reply::content("too late")),
            Reply::tool_call(
                "write_file",
                json!({"path": "again.txt", "content": "second try"}),
            ),
            Reply::tool_call("finish", json!({"summary": "redelivered"})),
        ],
    );
    let mut h = Harness::start(script, true).await?;
    let base = h.base_snapshot(&[]).await?;
    h.send(&request("run-i", &base)).await?;
    h.model.wait_for_requests(MODEL, 1, WAIT).await?;
    h.stop_workers().await?;
    // The episode dir went with the dropped episode.
    assert_eq!(support::work_dir_entries(&h.work_dir())?, 0);

    h.spawn_workers(6).await?;
    let (_, result) = h.next_result().await?;
    assert_eq!(result.delivery_attempt, 2);
    let (candidate, summary, ..) = frozen(&result);
    assert_eq!(summary, "redelivered");
    assert_eq!(
        h.file_in(candidate, "again.txt").await?.as_deref(),
        Some("second try")
    );
    h.stop().await
}

/// NATS frozen (SIGSTOP) for longer than ack_wait while the model thinks: neither the
/// delivery's keep-alive nor the claim's heartbeat reaches the server, so the episode pauses
/// (it starts nothing new) instead of running on beside a redelivery. Once the server answers,
/// the claim's next heartbeat lands before anyone could take the step over, and the same
/// episode goes on: the step is done once, by its first delivery.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_cut_off_past_ack_wait_pauses_its_episode_which_goes_on_once(
) -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            Reply::delayed(
                Duration::from_secs(8),
                Reply::tool_call(
                    "write_file",
                    json!({"path": "late.txt", "content": "first"}),
                ),
            ),
            Reply::tool_call(
                "write_file",
                json!({"path": "late.txt", "content": "second"}),
            ),
            Reply::tool_call("finish", json!({"summary": "done once"})),
        ],
    );
    let mut h = Harness::start_with(script, true, 3).await?;
    let base = h.base_snapshot(&[]).await?;
    h.send(&request("run-lost", &base)).await?;
    // The episode has asked the model (the delayed reply is pending).
    wait_until(WAIT, || {
        let n = h.model.requests(MODEL).len();
        async move { n >= 1 }
    })
    .await?;
    let pid = h.nats.process_mut().pid().to_string();
    let signal = |sig: &str| Command::new("kill").args([sig, &pid]).status();
    anyhow::ensure!(signal("-STOP")?.success(), "SIGSTOP failed");
    // Longer than ack_wait (3 s) plus one progress ack's timeout, shorter than the model's 10 s.
    tokio::time::sleep(Duration::from_secs(9)).await;
    anyhow::ensure!(signal("-CONT")?.success(), "SIGCONT failed");

    let (_, result) = h.next_result().await?;
    assert_eq!(result.delivery_attempt, 1, "{result:?}");
    let (candidate, summary, ..) = frozen(&result);
    assert_eq!(summary, "done once");
    assert_eq!(
        h.file_in(candidate, "late.txt").await?.as_deref(),
        Some("second")
    );
    // One episode: its three model calls, and no second episode's first call.
    let asked = h.model.requests(MODEL).len();
    assert_eq!(asked, 3, "the model was asked {asked} times");
    h.stop().await
}

/// JetStream hands a step out again (an ack lost in a nats-server restart, a consumer whose
/// state went back after a kill -9): once while its episode runs, once after it finished.
/// The copies carry no dedup id of their own, so they are the manager's dispatch
/// `run:gen:round:exec` as a redelivery is. Neither starts a second episode: the episode claim
/// makes the first copy wait for the running episode, and both get its stored result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_step_is_never_run_twice() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            Reply::delayed(
                Duration::from_secs(3),
                Reply::tool_call("write_file", json!({"path": "once.txt", "content": "1"})),
            ),
            Reply::tool_call("finish", json!({"summary": "done once"})),
        ],
    );
    let mut h = Harness::start_configured(script, true, 6, "concurrency = 2").await?;
    let base = h.base_snapshot(&[]).await?;
    let req = request("run-twice", &base);
    let payload = encode(&Message::ExecRequest(req.clone()));
    let subject = h.bus.subjects().exec(Capability::Cli);
    let bus = h.bus.clone();
    let redeliver = || async {
        bus.jetstream()
            .publish(subject.clone(), payload.clone().into())
            .await?
            .await?;
        anyhow::Ok(())
    };
    h.bus
        .publish_json(
            &subject,
            &serde_json::from_slice::<serde_json::Value>(&payload)?,
            "run-twice:1:1:exec",
            &[],
        )
        .await?;
    wait_until(WAIT, || {
        let n = h.model.requests(MODEL).len();
        async move { n >= 1 }
    })
    .await?;
    // While the episode thinks: a second worker slot gets the step again.
    redeliver().await?;
    let (_, result) = h.next_result().await?;
    let (candidate, summary, ..) = frozen(&result);
    assert_eq!(summary, "done once");
    assert_eq!(
        h.file_in(candidate, "once.txt").await?.as_deref(),
        Some("1")
    );
    // After it finished: the step again.
    redeliver().await?;
    wait_until(WAIT, || h.exec_stream_empty()).await?;
    assert_eq!(
        h.model.requests(MODEL).len(),
        2,
        "one episode of two model calls, not two episodes"
    );
    h.stop().await
}

#[tokio::test]
async fn binary_runs_an_episode_and_exits_cleanly_on_sigterm() -> anyhow::Result<()> {
    let script = Script::new().replies(
        MODEL,
        [
            Reply::tool_call(
                "write_file",
                json!({"path": "bin.txt", "content": "from the binary"}),
            ),
            Reply::tool_call("finish", json!({"summary": "ok"})),
        ],
    );
    let mut h = Harness::start(script, false).await?;
    let config = h.scratch.path().join("executor.toml");
    std::fs::write(
        &config,
        config_toml(&h.nats.url(), &h.model.base_url(), &h.work_dir(), 6),
    )?;
    let mut command = Command::new(env!("CARGO_BIN_EXE_loopgate-executor"));
    command
        .arg("--config")
        .arg(&config)
        .arg("--worker-id")
        .arg("bin-worker");
    let mut child = ChildGuard::spawn("loopgate-executor", command)?;

    let base = h.base_snapshot(&[]).await?;
    h.send(&request("run-g", &base)).await?;
    let (_, result) = h
        .next_result()
        .await
        .with_context(|| child.log_tail(4000))?;
    assert_eq!(result.worker, "bin-worker");
    let (candidate, ..) = frozen(&result);
    assert_eq!(
        h.file_in(candidate, "bin.txt").await?.as_deref(),
        Some("from the binary")
    );

    let status = child.terminate(WAIT).await.context("not reaped")?;
    assert!(
        status.success(),
        "exit {status:?}: {}",
        child.log_tail(4000)
    );
    let log = child.log_text();
    assert!(
        log.lines()
            .any(|l| l.starts_with('{') && l.contains("result published")),
        "{log}"
    );
    Ok(())
}

#[tokio::test]
async fn bad_config_exits_with_code_2() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let config = dir.path().join("executor.toml");
    std::fs::write(&config, "[executor]\nbogus = 1\n")?;
    let status = Command::new(env!("CARGO_BIN_EXE_loopgate-executor"))
        .arg("--config")
        .arg(&config)
        .output()?;
    assert_eq!(status.status.code(), Some(2));
    Ok(())
}

mod support;

#[path = "suite/mod.rs"]
mod suite;
