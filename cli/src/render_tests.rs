#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

#[test]
fn the_latest_round_of_attempts_is_the_status_line() {
    let won = |round: u64, attempt: u64| {
        serde_json::json!({"type": "attempt_won", "at": 0, "generation": 1, "round": round,
                "attempt": attempt, "of": 3, "candidate": "a".repeat(64), "worker": "w",
                "tokens": 1, "passing": 7, "blocking": 9, "early": false, "others": ""})
    };
    let other = serde_json::json!({"type": "gate", "at": 0, "generation": 1, "round": 2,
            "passed": false, "snapshot": "s", "reasons": []});
    assert_eq!(attempts_line(std::slice::from_ref(&other)), None);
    assert_eq!(
        attempts_line(&[won(1, 1), won(2, 2), other]).as_deref(),
        Some("attempts:  [round 2] attempt 2 of 3 won: 7/9 checks (snapshot aaaaaaaaaaaa)")
    );
}
use serde_json::json;

fn line(v: Value) -> String {
    log_line(&LogRecord::from_value(v))
}

#[test]
fn log_lines_table() {
    let snap = "a".repeat(64);
    let cases = vec![
            (
                json!({"at":1,"generation":1,"round":1,"type":"decision","seq":1,"route":"cli",
                       "task":"Create hello.py\nthat prints","task_state":null}),
                "[round 1] next: cli — Create hello.py that prints",
            ),
            (
                json!({"at":1,"generation":1,"round":1,"type":"audit_report","purpose":"round","worker":"audit-1",
                       "snapshot":snap,"verdicts":{"status":"complete","integrity":"clean","contract":"aligned"},
                       "passing":1,"checked":1,"gaps":[],"downgraded":false}),
                "[round 1] audit: complete/clean/aligned — checks 1/1 passing",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"gate","passed":false,"snapshot":snap,
                       "reasons":["check 'a' fails","integrity is suspect, not clean"]}),
                "[round 2] gate: closed — check 'a' fails; integrity is suspect, not clean",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"wrote hello.py","claimed_done":true,"tool_calls":3,"error":null}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — its summary (a claim): wrote hello.py [3 tool calls] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"exec_result","worker":"exec-1","candidate":snap,
                       "summary":"fixed hello.py","claimed_done":true,"tool_calls":5,"error":null,
                       "self_check_refusals":2}),
                "[round 2] executor exec-1: snapshot aaaaaaaaaaaa — its summary (a claim): fixed hello.py [5 tool calls] [finish refused 2x by self-check] (claims done)",
            ),
            (
                json!({"at":1,"generation":1,"round":3,"type":"terminal","state":"budget_exhausted",
                       "reason":"max_rounds reached","snapshot":snap}),
                "[round 3] budget_exhausted: max_rounds reached (snapshot aaaaaaaaaaaa)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"clause_step","clause":2,"of":2,
                       "text":"Create b.txt.","attempt":1}),
                "[round 2] the step is goal clause 2 of 2 (try 1), no manager decision (budget.clause_steps): Create b.txt.",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"instructed","text":"use pytest\nnot unittest"}),
                "[round 2] instruction: use pytest not unittest",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"paused","phase":"executing"}),
                "[round 2] paused (the executing step in flight finishes first)",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"held","step":"decide"}),
                "[round 2] held: the next step (decide) waits for unpause",
            ),
            (
                json!({"at":1,"generation":1,"round":2,"type":"unpaused","paused_ms":1500}),
                "[round 2] unpaused after 1.5 s",
            ),
            (
                json!({"at":1,"generation":2,"round":2,"type":"continued","goal":"Add bye.py",
                       "spec_hash":snap,"criteria":2,"base_snapshot":snap}),
                "[round 2] continued as a new generation from snapshot aaaaaaaaaaaa: contract aaaaaaaaaaaa (2 criteria), goal: Add bye.py",
            ),
            (
                json!({"at":1,"generation":1,"round":4,"type":"something_new","x":1}),
                "[round 4] something_new: ",
            ),
        ];
    for (value, expected) in cases {
        let got = line(value);
        assert!(got.starts_with(expected), "got {got:?}, want {expected:?}");
    }
}

#[test]
fn runs_table_shows_short_ids_names_ages_and_fits_goals_to_a_terminal() {
    let goal = "Create hello.py that prints exactly: hello, loopgate; then write its tests";
    let views: Vec<RunView> = [
        ("0193a2b4-c5d6-7000-8000-000000000001", Some("hello"), 3_000),
        ("0193a2b4-ffff-7000-8000-000000000002", None, 7_200_000),
    ]
    .iter()
    .map(|(id, name, age)| {
        RunView::from_value(&json!({
            "id": id, "name": name, "state": "running", "round": 2, "counted_rounds": 2,
            "max_rounds": 5, "checks": {"passing": 0, "total": 1},
            "created_at": 10_000_000 - age, "goal": goal
        }))
        .unwrap()
    })
    .collect();
    let whole = runs_table_at(&views, 10_000_000, None);
    assert_eq!(
        whole,
        vec![
            "ID            NAME   STATE    ROUND  CHECKS  AGE  GOAL".to_string(),
            format!("0193a2b4-c5d  hello  running    2/5     0/1   3s  {goal}"),
            format!("0193a2b4-fff  -      running    2/5     0/1   2h  {goal}"),
        ]
    );
    let narrow = runs_table_at(&views, 10_000_000, Some(80));
    assert!(
        narrow.iter().all(|l| l.chars().count() <= 80),
        "{narrow:#?}"
    );
    assert!(narrow[1].ends_with('…'), "{narrow:#?}");
    assert_eq!(
        runs_footer(50, 50, Some(100), Some("running")),
        vec!["runs 51-100 shown; more exist: loopgate runs --state running --offset 100"]
    );
    assert!(runs_footer(0, 3, None, None).is_empty());
}

#[test]
fn a_stream_holds_back_repeats_and_counts_them() {
    let feed = |lines: &[&str]| {
        let mut f = RepeatFilter::default();
        let mut out: Vec<String> = Vec::new();
        for l in lines {
            out.extend(f.push(l.to_string()));
        }
        out.extend(f.flush());
        out
    };
    let cases: [(&[&str], Vec<&str>); 5] = [
        (&["a", "b"], vec!["a", "b"]),
        (
            &["a", "a", "a", "b"],
            vec!["a", "  (the line above ×3 in all)", "b"],
        ),
        (
            &["x", "d", "r", "d", "r", "d", "r"],
            vec!["x", "d", "r", "d", "  (3 more lines repeating the 2 above)"],
        ),
        (&["a", "a"], vec!["a", "  (the line above ×2 in all)"]),
        (
            &["12:00:00 a", "12:00:03 a", "12:00:04 b"],
            vec!["12:00:00 a", "  (the line above ×2 in all)", "12:00:04 b"],
        ),
    ];
    for (input, want) in cases {
        assert_eq!(feed(input), want, "{input:?}");
    }
}

#[test]
fn identical_consecutive_lines_collapse_with_a_count() {
    let lines = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let cases = [
        (
            lines(&["a", "a", "a", "b", "a"]),
            lines(&["a (×3)", "b", "a"]),
        ),
        (lines(&["a", "b"]), lines(&["a", "b"])),
        (lines(&[]), lines(&[])),
        (
            lines(&["x", "d", "r", "d", "r", "d", "r", "y"]),
            lines(&["x", "d", "r (these 2 lines ×3)", "y"]),
        ),
        (lines(&["a", "a", "b", "b"]), lines(&["a (×2)", "b (×2)"])),
        // The time before a line (`loopgate log`) is not part of what repeats: the first
        // one's time stays.
        (
            lines(&["00:00:01 [round 3] x", "00:00:09 [round 3] x", "00:00:10 b"]),
            lines(&["00:00:01 [round 3] x (×2)", "00:00:10 b"]),
        ),
        // Nor is its zone (`UTC`, or `--local`'s offset).
        (
            lines(&["00:00:01 UTC [round 3] x", "00:00:09 UTC [round 3] x"]),
            lines(&["00:00:01 UTC [round 3] x (×2)"]),
        ),
        (
            lines(&["01:00:01 +01:00 [round 3] x", "01:00:09 +01:00 [round 3] x"]),
            lines(&["01:00:01 +01:00 [round 3] x (×2)"]),
        ),
        (
            lines(&["19:00:01 -05:30 x", "19:00:09 -05:30 y"]),
            lines(&["19:00:01 -05:30 x", "19:00:09 -05:30 y"]),
        ),
    ];
    for (input, want) in cases {
        assert_eq!(collapse_repeats(input), want);
    }
}

#[test]
fn tokens_line_shows_cached_prompt_tokens_when_some() {
    let cases = [
        (json!({}), "tokens: 120"),
        (
            json!({"executor": {"input_tokens": 100, "output_tokens": 20}}),
            "tokens: 120",
        ),
        (
            json!({
                "executor": {"input_tokens": 80, "output_tokens": 10, "cached_prompt_tokens": 60},
                "manager": {"input_tokens": 20, "output_tokens": 10, "cached_prompt_tokens": 5},
                "auditor": {"input_tokens": 0, "output_tokens": 0}
            }),
            "tokens: 120 (65 prompt tokens read from cache)",
        ),
    ];
    for (usage, want) in cases {
        let view = RunView::from_value(&json!({
            "id": "r1", "state": "running", "usage": usage, "total_tokens": 120
        }))
        .unwrap();
        let lines = run_summary(&view, 0);
        assert!(lines.contains(&want.to_string()), "{lines:?}");
    }
}

#[test]
fn status_says_what_a_running_episode_does() {
    let view = RunView::from_value(&json!({
        "id": "r1", "state": "running", "episode_progress": [
            {"run_id": "r1", "generation": 1, "round": 2, "delivery_attempt": 1,
             "worker": "exec-1", "turn": 3, "tool": "shell", "tool_calls": 2,
             "tokens": 900, "elapsed_ms": 7400}
        ]
    }))
    .unwrap();
    let lines = run_summary(&view, 0);
    assert!(
            lines.contains(
                &"running: executor exec-1 turn 3, calling shell, 2 tool calls, 900 tokens, 7 s in (its last notice)"
                    .to_string()
            ),
            "{lines:?}"
        );
}

#[test]
fn status_states_facts_and_marks_the_managers_note_as_a_claim() {
    let view = RunView::from_value(&json!({
        "id": "r1", "state": "completed", "phase": "finished", "task_state": "working.",
        "gate": {"passed": true, "snapshot": "f".repeat(64), "reasons": []},
        "checks": {"passing": 1, "total": 1}, "actions": ["continue"]
    }))
    .unwrap();
    let lines = run_summary(&view, 0);
    for want in [
        "standing: completed; gate open on snapshot ffffffffffff; checks 1/1 passing",
        "gate: open",
        "manager's note (its claim, not checked): working.",
        "accepts now: continue",
    ] {
        assert!(lines.contains(&want.to_string()), "{want}: {lines:?}");
    }
    assert!(
        !lines.iter().any(|l| l.starts_with("task state")),
        "{lines:?}"
    );
}

#[test]
fn final_report_names_state_snapshot_and_evidence() {
    let view = RunView::from_value(&json!({
            "id": "r1", "state": "completed", "snapshot": "f".repeat(64), "terminal_reason": "all checks pass",
            "evidence": [{"artifact_version": "f".repeat(64), "check_id": "prints-greeting", "verdict": "pass", "exit_code": 0}]
        }))
        .unwrap();
    let lines = final_report(&view);
    assert_eq!(lines[0], "run r1 completed: all checks pass");
    assert_eq!(lines[1], format!("snapshot: {}", "f".repeat(64)));
    assert!(lines.contains(&"  prints-greeting: pass on snapshot ffffffffffff, exit 0".to_string()));
}
