//! A fault on the Redis primary when the managers' Redis runs with Sentinel
//! (`ChaosConfig::redis_ha`): killed (the sentinels promote the replica, the old primary comes
//! back as its replica) or frozen (promoted past if the freeze outlasts the sentinels'
//! down-after, demoted as it wakes). The open runs' logs are read before the fault and again
//! once the group has a primary and a synced replica, to count what a failover lost.

use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::Value;

use super::fault::{Action, LogCheck};
use crate::Stack;

/// How long the sentinels get to promote the replica, and the group to have a primary and a
/// synced replica again.
const SETTLE: Duration = Duration::from_secs(60);
/// How long reading the logs back may take (the managers follow the new primary meanwhile).
const READ_BACK: Duration = Duration::from_secs(60);

/// Kill or freeze the primary for `freeze`, wait for the group to settle, and compare the open
/// runs' logs. Gives the target's name and the log comparison.
pub(super) async fn hit_primary(
    stack: &mut Stack,
    action: Action,
    freeze: Duration,
) -> anyhow::Result<(String, LogCheck)> {
    let before = open_logs(stack).await;
    let ha = stack
        .redis_ha
        .as_mut()
        .context("the chaos stack has no Redis with Sentinel")?;
    let old = ha.wait_healthy(SETTLE).await?;
    let node = ha
        .node_mut(old)
        .with_context(|| format!("the primary :{old} is not one of the nodes"))?;
    match action {
        Action::Freeze => {
            node.process_mut().signal("STOP");
            tokio::time::sleep(freeze).await;
            node.process_mut().signal("CONT");
        }
        _ => {
            node.kill();
            let new = ha.wait_failover(old, SETTLE).await?;
            let node = ha
                .node_mut(old)
                .with_context(|| format!("no node :{old}"))?;
            node.restart_as_replica_of(new).await?;
        }
    }
    ha.wait_healthy(SETTLE).await?;
    let mut after = Vec::with_capacity(before.len());
    for (id, _) in &before {
        after.push(read_log_back(stack, id).await);
    }
    Ok((format!("redis primary :{old}"), compare(&before, &after)))
}

/// Every running run's log as the API shows it now (best effort: a run whose log cannot be
/// read is left out).
async fn open_logs(stack: &Stack) -> Vec<(String, Vec<Value>)> {
    let Ok(list) = stack.get("/v1/runs?state=running&limit=500").await else {
        return Vec::new();
    };
    let mut logs = Vec::new();
    for run in list["runs"].as_array().into_iter().flatten() {
        let id = run["id"].as_str().unwrap_or_default().to_string();
        if let Ok(log) = stack.get(&format!("/v1/runs/{id}/log")).await {
            logs.push((id, entries(&log)));
        }
    }
    logs
}

/// The run's log, tried until the API answers (`None` after [`READ_BACK`]).
async fn read_log_back(stack: &Stack, id: &str) -> Option<Vec<Value>> {
    let deadline = Instant::now() + READ_BACK;
    loop {
        if let Ok(log) = stack.get(&format!("/v1/runs/{id}/log")).await {
            return Some(entries(&log));
        }
        if Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn entries(log: &Value) -> Vec<Value> {
    log["entries"].as_array().cloned().unwrap_or_default()
}

/// Each run's log after the fault must start with what it showed before.
fn compare(before: &[(String, Vec<Value>)], after: &[Option<Vec<Value>>]) -> LogCheck {
    let mut check = LogCheck {
        runs: before.len(),
        entries: before.iter().map(|(_, e)| e.len()).sum(),
        lost: Vec::new(),
    };
    for ((id, seen), now) in before.iter().zip(after) {
        let Some(now) = now else {
            check.lost.push(format!(
                "{id}: its log could not be read back within {READ_BACK:?}"
            ));
            continue;
        };
        let kept = seen.iter().zip(now).take_while(|(a, b)| a == b).count();
        if kept < seen.len() {
            check.lost.push(format!(
                "{id}: {} of {} entries seen before the failover are gone or changed, from {}",
                seen.len() - kept,
                seen.len(),
                seen[kept]["type"].as_str().unwrap_or("?")
            ));
        }
    }
    check
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn log(ids: &[&str]) -> Vec<Value> {
        ids.iter().map(|i| json!({"id": i, "type": "t"})).collect()
    }

    #[test]
    fn a_log_that_lost_or_changed_what_it_showed_counts_as_lost() {
        // (before, after, runs lost)
        let cases: Vec<(Vec<Value>, Option<Vec<Value>>, usize)> = vec![
            (log(&["1", "2"]), Some(log(&["1", "2"])), 0),
            (log(&["1", "2"]), Some(log(&["1", "2", "3"])), 0),
            (log(&[]), Some(log(&["1"])), 0),
            (log(&["1", "2"]), Some(log(&["1"])), 1),
            (log(&["1", "2"]), Some(log(&["1", "2b", "3"])), 1),
            (log(&["1"]), None, 1),
        ];
        for (i, (seen, now, want)) in cases.into_iter().enumerate() {
            let n = seen.len();
            let check = compare(&[("run".into(), seen)], &[now]);
            assert_eq!(check.lost.len(), want, "case {i}: {:?}", check.lost);
            assert_eq!((check.runs, check.entries), (1, n), "case {i}");
        }
    }
}
