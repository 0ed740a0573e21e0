//! For tests that hit one episode with a fault: a stand-in executor (or manager) whose first
//! model call is slow (so its episode or decision is surely in flight when the fault comes),
//! and which executor started a run's first episode.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use loopgate_test_support::{Reply, Script, StandInModel};
use serde_json::{json, Value};

use crate::Stack;

/// A stand-in executor that writes the right `hello.py` and then finishes; the very first call
/// it answers (of any episode) waits `first_delay` first.
pub fn hello_executor(first_delay: Duration) -> Reply {
    hello_executor_with(HelloDelays {
        first_call: first_delay,
        ..HelloDelays::default()
    })
}

/// Delays of [`hello_executor_with`]'s answers.
#[derive(Debug, Clone, Copy, Default)]
pub struct HelloDelays {
    /// Before the very first answer (of any episode).
    pub first_call: Duration,
    /// Before every `write_file` answer.
    pub each_write: Duration,
    /// Before every `finish` answer.
    pub each_finish: Duration,
}

/// A stand-in executor that writes the right `hello.py` and then finishes, each answer after
/// its delay.
pub fn hello_executor_with(delays: HelloDelays) -> Reply {
    let first = Arc::new(AtomicBool::new(true));
    Reply::dynamic(move |req: &Value| {
        let last_role = req["messages"]
            .as_array()
            .and_then(|m| m.last())
            .and_then(|m| m["role"].as_str())
            .unwrap_or("");
        let (reply, delay) = if last_role == "tool" {
            (
                Reply::tool_call("finish", json!({"summary": "wrote hello.py"})),
                delays.each_finish,
            )
        } else {
            (
                Reply::tool_call(
                    "write_file",
                    json!({"path": "hello.py", "content": "print('hello, loopgate')\n"}),
                ),
                delays.each_write,
            )
        };
        let delay = if first.swap(false, Ordering::SeqCst) {
            delay + delays.first_call
        } else {
            delay
        };
        if delay.is_zero() {
            reply
        } else {
            Reply::delayed(delay, reply)
        }
    })
}

/// A stand-in model whose manager always answers `Next: cli / Task: write hello.py` and whose
/// executor is `executor`.
pub async fn hello_model(executor: Reply) -> anyhow::Result<StandInModel> {
    StandInModel::start(
        Script::new()
            .fallback(
                "standin-manager",
                Reply::content("Next: cli\nTask: write hello.py"),
            )
            .fallback("standin-executor", executor),
    )
    .await
}

/// A stand-in manager that always answers `Next: cli / Task: write hello.py`, its first answer
/// after `first_delay` (a fault lands while it thinks); the flag turns true once that first call
/// has come in.
pub fn slow_first_manager(first_delay: Duration) -> (Reply, Arc<AtomicBool>) {
    let asked = Arc::new(AtomicBool::new(false));
    let flag = asked.clone();
    let manager = Reply::dynamic(move |_req: &Value| {
        let first = !flag.swap(true, Ordering::SeqCst);
        let reply = Reply::content("Next: cli\nTask: write hello.py");
        if first {
            Reply::delayed(first_delay, reply)
        } else {
            reply
        }
    });
    (manager, asked)
}

/// A task whose check sleeps 4 s first, so round 1's audit is mid-check when a fault hits its
/// auditor; no baseline audit, so round 1's is the first. Roles `mgr` and `exec`.
pub const SLOW_CHECK_TASK: &str = r#"
goal = "Create hello.py that prints exactly: hello, loopgate"
[[acceptance]]
id = "prints-greeting"
check = "sleep 4; test \"$(python3 hello.py)\" = 'hello, loopgate'"
[roles]
manager = "mgr"
executor = "exec"
[budget]
max_rounds = 4
baseline_checks = false
"#;

/// Two auditors redelivered an audit after 3 s: the auditors' `ack_wait_secs` and the audit
/// durable's (the manager's `[jetstream] audit_ack_wait_secs`, default 30 s).
pub fn two_auditors_ack_wait_3s(opts: &mut crate::StackOptions) {
    opts.auditors = 2;
    opts.auditor_extra = "ack_wait_secs = 3".into();
    opts.manager_tables = "[jetstream]\naudit_ack_wait_secs = 3".into();
}

impl Stack {
    /// Which auditor (0 = `auditor`, i = `more_auditors[i - 1]`, also its index in
    /// `auditor_nats_proxies`) started run `id`'s first audit, waiting up to `timeout` for it.
    /// Auditor i + 1 runs as `audit-{i + 1}`.
    pub async fn first_audit_auditor(&self, id: &str, timeout: Duration) -> anyhow::Result<usize> {
        let worker = self.first_episode_worker(id, "auditor", timeout).await?;
        worker
            .strip_prefix("audit-")
            .and_then(|i| i.parse::<usize>().ok())
            .and_then(|i| i.checked_sub(1))
            .filter(|i| *i <= self.more_auditors.len())
            .ok_or_else(|| anyhow::anyhow!("no auditor named {worker}"))
    }

    /// The index in `executors` of the worker that started run `id`'s first executor episode,
    /// waiting up to `timeout` for it.
    pub async fn first_episode_executor(
        &self,
        id: &str,
        timeout: Duration,
    ) -> anyhow::Result<usize> {
        let worker = self.first_episode_worker(id, "executor", timeout).await?;
        self.executors
            .iter()
            .position(|x| x.name() == worker)
            .ok_or_else(|| anyhow::anyhow!("no executor named {worker}"))
    }

    /// The worker id of run `id`'s first episode of `role`, waiting up to `timeout` for it.
    async fn first_episode_worker(
        &self,
        id: &str,
        role: &str,
        timeout: Duration,
    ) -> anyhow::Result<String> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let started = self.log_entries(id, "episode_started").await?;
            if let Some(e) = started.iter().find(|e| e["role"] == role) {
                return Ok(e["worker"].as_str().unwrap_or_default().to_string());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no {role} episode of {id} started\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}
