//! Per-round overhead: runs of many rounds, one at a time, against one executor and one
//! auditor; each round's dispatch-to-dispatch time split into parts from the run log (the
//! manager's millisecond `at` stamps) and the workers' JSON logs (microsecond timestamps).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use loopgate_tests::Stack;
use serde_json::{json, Value};

use crate::scenario::{task_toml, EXECUTOR_MODEL};
use crate::stats::{round3, Summary};

/// The parts of one round, in critical-path order: (id, what it covers).
pub const PARTS: &[(&str, &str)] = &[
    ("exec_hop", "manager CAS + ExecRequest publish + delivery to the executor"),
    ("exec_materialize_model", "executor: materialize the base snapshot + 2 stand-in model calls"),
    ("exec_freeze", "executor: freeze the workspace (upload the changed blob + manifest)"),
    ("result_to_audit", "ExecResult publish + delivery + manager load/CAS + AuditRequest publish + delivery"),
    ("audit_materialize", "auditor: materialize the candidate, read the base manifest, prepare the check dir"),
    ("check", "check execution (`true` under the auditor's sandbox)"),
    ("audit_finish", "auditor: remove the check's copy, store its output, remove the scratch dir, publish AuditReport"),
    ("report_to_dispatch", "AuditReport delivery + manager load/CAS + DecideRequest hop + decision (load, stand-in call, CAS) up to the next dispatch"),
];

#[derive(Debug, Default, Clone, Copy)]
struct WorkerMarks {
    episode_started: Option<f64>,
    tool_loop_ended: Option<f64>,
    frozen: Option<f64>,
    audit_started: Option<f64>,
    check_finished: Option<f64>,
    check_ms: Option<f64>,
    report_published: Option<f64>,
}

/// Unix ms (fractional) of a tracing JSON line's RFC 3339 `timestamp`.
fn timestamp_ms(line: &Value) -> Option<f64> {
    let text = line["timestamp"].as_str()?;
    let t =
        time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.unix_timestamp_nanos() as f64 / 1e6)
}

/// run id and round of a log line: its own fields, else its current span's.
fn run_round(line: &Value) -> Option<(String, u64)> {
    for scope in [&line["fields"], &line["span"]] {
        if let (Some(run), Some(round)) = (scope["run_id"].as_str(), scope["round"].as_u64()) {
            return Some((run.to_string(), round));
        }
    }
    let run = line["fields"]["run_id"]
        .as_str()
        .or_else(|| line["span"]["run_id"].as_str())?;
    let round = line["spans"]
        .as_array()?
        .iter()
        .find_map(|s| s["round"].as_u64())?;
    Some((run.to_string(), round))
}

fn worker_marks(logs: &[String]) -> HashMap<(String, u64), WorkerMarks> {
    let mut marks: HashMap<(String, u64), WorkerMarks> = HashMap::new();
    for line in logs.iter().flat_map(|l| l.lines()) {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(at), Some(key)) = (timestamp_ms(&v), run_round(&v)) else {
            continue;
        };
        let m = marks.entry(key).or_default();
        match v["fields"]["message"].as_str().unwrap_or("") {
            "episode started" => m.episode_started = Some(at),
            "tool loop ended" => m.tool_loop_ended = Some(at),
            "workspace frozen" => m.frozen = Some(at),
            "audit started" => m.audit_started = Some(at),
            "check finished" => {
                m.check_finished = Some(at);
                m.check_ms = v["fields"]["duration_ms"].as_f64();
            }
            "audit report published" => m.report_published = Some(at),
            _ => {}
        }
    }
    marks
}

/// Parts of round `r` (ms) given its dispatch, the next dispatch and the workers' marks.
fn split(d0: f64, d1: f64, m: &WorkerMarks) -> Option<[f64; 8]> {
    let check_start = m.check_finished? - m.check_ms?;
    Some([
        m.episode_started? - d0,
        m.tool_loop_ended? - m.episode_started?,
        m.frozen? - m.tool_loop_ended?,
        m.audit_started? - m.frozen?,
        check_start - m.audit_started?,
        m.check_ms?,
        m.report_published? - m.check_finished?,
        d1 - m.report_published?,
    ])
}

pub struct Latency {
    pub round: Summary,
    pub parts: Vec<Summary>,
    pub json: Value,
    /// The last measured run (its stored record sizes the Redis CAS microbenchmark).
    pub last_run: String,
}

pub async fn measure(stack: &Stack, runs: usize, rounds: u32) -> anyhow::Result<Latency> {
    // Warm-up (connections, consumers, page cache); not measured.
    let warm = stack.submit(&task_toml(5), &[]).await?;
    let warm_id = warm["id"].as_str().context("run id")?.to_string();
    stack
        .wait_terminal(&warm_id, Duration::from_secs(120))
        .await?;

    let mut per_run = Vec::new();
    for i in 0..runs {
        let started = Instant::now();
        let id = stack.submit(&task_toml(rounds), &[]).await?["id"]
            .as_str()
            .context("run id")?
            .to_string();
        let done = stack
            .wait_terminal(&id, Duration::from_secs(60 + u64::from(rounds)))
            .await?;
        eprintln!(
            "latency run {}/{runs}: {} rounds in {:.1} s, {}",
            i + 1,
            rounds,
            started.elapsed().as_secs_f64(),
            done["state"]
        );
        let log = stack.get(&format!("/v1/runs/{id}/log")).await?;
        per_run.push((id, log["entries"].as_array().cloned().unwrap_or_default()));
    }
    let marks = worker_marks(&[
        stack.executors.iter().map(|e| e.log_text()).collect(),
        stack.auditor.log_text(),
    ]);

    let (mut totals, mut parts) = (Vec::new(), vec![Vec::new(); PARTS.len()]);
    let mut series = Vec::new();
    let mut unsplit = 0usize;
    for (id, entries) in &per_run {
        let submitted = entries
            .first()
            .and_then(|e| e["at"].as_f64())
            .unwrap_or(0.0);
        let dispatch: Vec<(u64, f64)> = entries
            .iter()
            .filter(|e| e["type"] == "exec_dispatched")
            .filter_map(|e| Some((e["round"].as_u64()?, e["at"].as_f64()?)))
            .collect();
        series.push(json!({
            "run": id,
            "dispatch_s": dispatch.iter().map(|(_, at)| round3((at - submitted) / 1000.0)).collect::<Vec<_>>(),
        }));
        for pair in dispatch.windows(2) {
            let ((r, d0), (_, d1)) = (pair[0], pair[1]);
            totals.push(d1 - d0);
            match marks.get(&(id.clone(), r)).and_then(|m| split(d0, d1, m)) {
                Some(values) => {
                    for (bucket, v) in parts.iter_mut().zip(values) {
                        bucket.push(v);
                    }
                }
                None => unsplit += 1,
            }
        }
    }
    let round = Summary::of(&totals);
    let parts: Vec<Summary> = parts.iter().map(|p| Summary::of(p)).collect();
    let last_run = per_run.last().map(|(id, _)| id.clone()).unwrap_or_default();
    let json = json!({
        "runs": runs,
        "rounds_per_run": rounds,
        "executors": 1,
        "rounds_measured": round.n,
        "rounds_without_split": unsplit,
        "per_round_ms": round.json(),
        "parts": PARTS.iter().zip(&parts).map(|((id, what), s)| json!({
            "id": id, "what": what, "ms": s.json(),
        })).collect::<Vec<_>>(),
        "series": series,
        "standin_model": EXECUTOR_MODEL,
    });
    Ok(Latency {
        round,
        parts,
        json,
        last_run,
    })
}
