#![allow(clippy::unwrap_used)]
use super::*;
use serde_json::json;

#[test]
fn run_view_tolerates_missing_and_odd_fields() {
    let minimal = RunView::from_value(&json!({"id": "r1", "state": "running"})).unwrap();
    assert_eq!((minimal.round, minimal.phase_name()), (0, None));
    assert!(minimal.evidence.is_empty() && minimal.max_rounds.is_none());
    let odd = RunView::from_value(&json!({
        "id": "r1", "state": "completed", "phase": {"type": "finished"}, "usage": {},
        "rubric": "?", "created_at": "yesterday",
        "gate": {"passed": true, "reasons": []},
        "evidence": [{"check_id": "c", "verdict": "pass", "exit_code": 0}]
    }))
    .unwrap();
    assert_eq!(odd.phase_name(), Some("finished"));
    assert_eq!((odd.rubric, odd.created_at), (None, 0));
    assert_eq!(odd.evidence[0].duration_ms, None);
    for bad in [
        json!({"id": "r1", "state": "bogus"}),
        json!({"state": "running"}),
    ] {
        assert!(RunView::from_value(&bad).is_err(), "{bad}");
    }
}

#[test]
fn short_ids_stay_unique_within_a_list() {
    let a = "0193a2b4-c5d6-7000-8000-000000000001";
    let b = "0193a2b4-c5d6-7000-8000-000000000002";
    let c = "0193a2b4-ffff-7000-8000-000000000003";
    let cases: [(&[&str], Vec<&str>); 3] = [
        (&[a], vec!["0193a2b4-c5d"]),
        (&[a, c], vec!["0193a2b4-c5d", "0193a2b4-fff"]),
        (&[a, b], vec![a, b]),
    ];
    for (ids, want) in cases {
        assert_eq!(short_ids(ids), want);
    }
    for (prefix, ok) in [
        ("0193a2b4-c5d", true),
        ("", false),
        ("01*", false),
        ("ABC", true),
    ] {
        assert_eq!(is_id_prefix(prefix), ok, "{prefix}");
    }
}

#[test]
fn request_bodies_keep_their_wire_shape() {
    let cases = [
        (
            serde_json::to_value(ResumeRequest::default()).unwrap(),
            json!({}),
        ),
        (
            serde_json::to_value(ResumeRequest {
                budget: Some(BudgetFile {
                    max_rounds: Some(3),
                    ..BudgetFile::default()
                }),
            })
            .unwrap(),
            json!({"budget": {"max_rounds": 3}}),
        ),
        (
            serde_json::to_value(AnswerRequest { text: "yes".into() }).unwrap(),
            json!({"text": "yes"}),
        ),
    ];
    for (got, want) in cases {
        assert_eq!(got, want);
    }
    let upload: UploadedFile =
        serde_json::from_value(json!({"path": "a", "content_b64": ""})).unwrap();
    assert_eq!(upload.mode, 0o644);
    assert!(
        serde_json::from_value::<SubmitRequest>(json!({"task": {"goal": "g"}, "extra": 1}))
            .is_err()
    );
}
