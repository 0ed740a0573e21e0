//! Waiting for a bench's run to end: poll the run until it is terminal; a run that asks a
//! question (nobody answers one in a bench) or outlives its time is cancelled by the bench, and
//! the returned note says so.

use std::time::{Duration, Instant};

use loopgate_tests::Stack;
use serde_json::{json, Value};

/// The states a run ends in.
pub const TERMINAL_STATES: [&str; 5] = [
    "completed",
    "blocked",
    "budget_exhausted",
    "cancelled",
    "failed",
];

/// How long past its own wall cap a bench waits for a run before cancelling it.
pub const GRACE_SECS: u64 = 90;

/// How often the run is polled.
const POLL: Duration = Duration::from_millis(500);

/// Poll run `id` until it is terminal and return its view, with a note when the bench cancelled
/// it (it waited for input, or was still going `timeout` after it started). A run that does not
/// stop within a minute of its cancel is an error.
pub async fn wait_for_end(
    stack: &Stack,
    id: &str,
    timeout: Duration,
) -> anyhow::Result<(Value, String)> {
    let deadline = Instant::now() + timeout;
    let mut note = String::new();
    loop {
        let v = stack.run(id).await?;
        let state = v["state"].as_str().unwrap_or("");
        if TERMINAL_STATES.contains(&state) {
            return Ok((v, note));
        }
        if state == "waiting_for_input" && note.is_empty() {
            note = format!(
                "the manager asked a question nobody answers here: {}; cancelled by the bench",
                v["question"].as_str().unwrap_or("?")
            );
            stack
                .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
                .await?;
        } else if Instant::now() > deadline && note.is_empty() {
            note = format!(
                "still {state} {} s after it started; cancelled by the bench",
                timeout.as_secs()
            );
            stack
                .post_raw(&format!("/v1/runs/{id}/cancel"), &json!({}))
                .await?;
        } else if Instant::now() > deadline + Duration::from_secs(60) {
            anyhow::bail!("run {id} did not stop after cancel: {v}");
        }
        tokio::time::sleep(POLL).await;
    }
}
