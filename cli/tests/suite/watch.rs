//! `loopgate watch` against a stand-in event stream: human lines, reconnect with dedupe,
//! exit codes for completed / failed / waiting runs.

use super::standin;

use std::collections::HashMap;

use serde_json::{json, Value};
use standin::{loopgate, loopgate_with_env, sse, start, Canned, EventScript};

fn snap() -> String {
    "c".repeat(64)
}

fn entries() -> Vec<Value> {
    vec![
        json!({"id": "1-0", "at": 1, "generation": 1, "round": 1, "type": "decision", "seq": 1,
               "route": "cli", "task": "Create hello.py", "task_state": null}),
        json!({"id": "2-0", "at": 2, "generation": 1, "round": 1, "type": "audit_report", "purpose": "round",
               "worker": "audit-1", "snapshot": snap(),
               "verdicts": {"status": "complete", "integrity": "clean", "contract": "aligned"},
               "passing": 1, "checked": 1, "gaps": [], "downgraded": false}),
        json!({"id": "3-0", "at": 3, "generation": 1, "round": 1, "type": "terminal", "state": "completed",
               "reason": "gate passed", "snapshot": snap()}),
    ]
}

fn end_view(state: &str) -> Value {
    json!({"id": "r1", "state": state, "round": 1, "snapshot": snap(), "terminal_reason": "gate passed",
           "evidence": [{"artifact_version": snap(), "check_id": "prints-greeting", "verdict": "pass",
                         "produced_at": 3, "log_digest": null, "exit_code": 0, "duration_ms": 4,
                         "output_excerpt": ""}]})
}

fn script(entries: &[Value], end: Option<&Value>, hold_open: bool) -> EventScript {
    let mut body: String = entries.iter().map(|e| sse("log", e)).collect();
    if let Some(end) = end {
        body.push_str(&sse("end", end));
    }
    EventScript { body, hold_open }
}

/// Times are UTC, and say so; `--local` prints them in the machine's zone (`TZ`) with its
/// offset, for `watch` and `log` alike.
#[tokio::test]
async fn local_times_with_their_offset() {
    let all = entries();
    let end = end_view("completed");
    let server = start(Canned {
        event_scripts: vec![script(&all, Some(&end), false)],
        ..Canned::default()
    })
    .await;
    // POSIX `TZ`: `XST-1` is one hour east of UTC.
    let tz = [("TZ", "XST-1")];
    let ran = loopgate_with_env(&server.url, &["watch", "r1", "--local"], &tz).await;
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let first = ran.stdout.lines().next().unwrap_or_default().to_string();
    assert_eq!(
        first,
        "01:00:00 +01:00 [round 1] next: cli — Create hello.py"
    );
    let ran = loopgate_with_env(&server.url, &["watch", "r1"], &tz).await;
    let first = ran.stdout.lines().next().unwrap_or_default().to_string();
    assert!(
        first.starts_with("00:00:00 UTC [round 1]"),
        "{}",
        ran.stdout
    );
}

#[tokio::test]
async fn watch_reconnects_skips_replayed_entries_and_exits_0_on_completed() {
    let all = entries();
    let end = end_view("completed");
    let server = start(Canned {
        event_scripts: vec![
            script(&all[..2], None, false),
            script(&all, Some(&end), false),
        ],
        ..Canned::default()
    })
    .await;
    let ran = loopgate(&server.url, &["watch", "r1"]).await;
    assert_eq!(ran.code, Some(0), "{}\n{}", ran.stdout, ran.stderr);
    let lines: Vec<&str> = ran.stdout.lines().collect();
    assert_eq!(
        lines[0],
        "00:00:00 UTC [round 1] next: cli — Create hello.py"
    );
    assert_eq!(
        lines[1],
        "00:00:00 UTC [round 1] audit: complete/clean/aligned — checks 1/1 passing"
    );
    assert!(
        lines[2].starts_with("00:00:00 UTC [round 1] completed: gate passed"),
        "{lines:?}"
    );
    assert_eq!(lines[3], "run r1 completed: gate passed");
    assert_eq!(lines[4], format!("snapshot: {}", snap()));
    assert!(
        ran.stdout
            .contains("prints-greeting: pass on snapshot cccccccccccc"),
        "{}",
        ran.stdout
    );
    assert_eq!(
        ran.stdout.matches("next: cli").count(),
        1,
        "replayed entries printed once"
    );
    let seen = server.seen.lock().unwrap();
    assert_eq!(seen.event_connections, vec![None, Some("2-0".to_string())]);
}

#[tokio::test]
async fn watch_exits_3_when_the_run_failed_and_json_prints_raw_lines() {
    let mut all = entries();
    all[2]["state"] = json!("failed");
    let end = end_view("failed");
    let server = start(Canned {
        event_scripts: vec![script(&all, Some(&end), false)],
        ..Canned::default()
    })
    .await;
    let ran = loopgate(&server.url, &["watch", "r1", "--json"]).await;
    assert_eq!(ran.code, Some(3), "{}", ran.stderr);
    let values: Vec<Value> = ran
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(values.len(), 4);
    assert_eq!(values[0]["type"], "decision");
    assert_eq!(values[3]["state"], "failed");
}

#[tokio::test]
async fn watch_exits_4_while_the_run_waits_for_an_answer() {
    let question = json!({"id": "1-0", "at": 1, "generation": 1, "round": 1, "type": "question",
                          "question": "Which Python version?"});
    let server = start(Canned {
        runs: HashMap::from([(
            "r1".to_string(),
            json!({"id": "r1", "state": "waiting_for_input", "question": "Which Python version?"}),
        )]),
        event_scripts: vec![script(&[question], None, true)],
        ..Canned::default()
    })
    .await;
    let ran = loopgate(&server.url, &["watch", "r1"]).await;
    assert_eq!(ran.code, Some(4), "{}", ran.stderr);
    assert!(
        ran.stdout.contains("question: Which Python version?"),
        "{}",
        ran.stdout
    );
    assert!(ran.stdout.contains("loopgate answer r1"), "{}", ran.stdout);
}
