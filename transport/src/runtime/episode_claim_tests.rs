//! Unit tables of the episode claims' pure rules (`episode_claim`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn result() -> StoredResult {
    StoredResult {
        subject: "loopgate.result.exec.r".into(),
        msg_id: "r:1:1:exec-result:1".into(),
        payload: serde_json::json!({"v": 1}),
    }
}

#[test]
fn what_a_claimer_does_table() {
    let cases = [
        (Seen::Absent, Next::Create),
        (Seen::Free, Next::Take),
        (Seen::Running { holder: "w".into() }, Next::Watch),
        (Seen::Finished(result()), Next::Republish(result())),
    ];
    for (seen, want) in cases {
        assert_eq!(next(seen.clone()), want, "{seen:?}");
    }
}

#[test]
fn records_round_trip_and_garbage_is_free() {
    let records = [
        Record::Running { holder: "a".into() },
        Record::Released { holder: "a".into() },
        Record::Finished {
            holder: "a".into(),
            result: result(),
        },
    ];
    for record in records {
        let bytes = serde_json::to_vec(&record).unwrap();
        assert_eq!(serde_json::from_slice::<Record>(&bytes).unwrap(), record);
    }
    assert!(serde_json::from_slice::<Record>(b"{\"state\":\"bogus\"}").is_err());
}

#[test]
fn claim_keys_are_valid_and_distinct() {
    let cases = [
        ("exec", "run-1:2:3:exec", "exec.run-1_3A2_3A3_3Aexec"),
        ("audit", "r:1:2:final:7", "audit.r_3A1_3A2_3Afinal_3A7"),
        ("exec", "a_3A", "exec.a_5F3A"),
        ("exec", "a.b", "exec.a_2Eb"),
    ];
    for (role, dispatch, want) in cases {
        let key = claim_key(role, dispatch);
        assert_eq!(key, want);
        assert!(key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)));
    }
    assert_ne!(claim_key("exec", "a:"), claim_key("exec", "a_3A"));
}

#[test]
fn a_holder_is_taken_over_only_after_it_must_have_stopped() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // (ack_wait, silent by the server's stamps, due in)
    let cases = [
        // Seen as the redelivery comes: ack_wait silent already, the margin is left.
        (s(5), s(5), s(1)),
        // A fresh heartbeat: the whole ack_wait and the margin.
        (s(5), s(0), s(6)),
        (s(30), ms(12_500), ms(18_500)),
        // Silent past the stale line: now.
        (s(5), s(6), s(0)),
        (s(5), s(60), s(0)),
    ];
    for (ack_wait, silent, want) in cases {
        assert_eq!(
            take_over_due_in(silent, ack_wait),
            want,
            "{ack_wait:?} {silent:?}"
        );
    }
    assert_eq!(stale_after(s(5)), s(6));
}

#[test]
fn a_holder_that_only_stores_its_result_outlives_its_deadline() {
    let start = Instant::now();
    let s = Duration::from_secs;
    let every = s(1);
    // (now, alive until, storing, next beat, stop at now)
    let cases = [
        // Working: the beat never goes past the deadline, and at the deadline it stops.
        (start, start + s(5), false, start + s(1), false),
        (
            start + s(4) + every / 2,
            start + s(5),
            false,
            start + s(5),
            false,
        ),
        (start + s(5), start + s(5), false, start + s(5), true),
        (start + s(9), start + s(5), false, start + s(5), true),
        // Only storing: the beats go on past the deadline, and it never stops for it.
        (
            start + s(4) + every / 2,
            start + s(5),
            true,
            start + s(5) + every / 2,
            false,
        ),
        (start + s(9), start + s(5), true, start + s(10), false),
    ];
    for (now, alive_until, storing, beat, stop) in cases {
        let offset = |i: Instant| i - start;
        assert_eq!(
            next_beat(now, every, alive_until, storing),
            beat,
            "{:?} {:?} {storing}",
            offset(now),
            offset(alive_until)
        );
        assert_eq!(
            must_stop(now, alive_until, storing),
            stop,
            "{:?}",
            offset(now)
        );
    }
}
