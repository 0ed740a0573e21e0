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
fn a_holder_is_taken_over_only_after_it_must_have_paused_and_was_watched_silent() {
    let s = Duration::from_secs;
    let ms = Duration::from_millis;
    // (ack_wait, silent by the server's stamps, watched unchanged, earlier process, due in)
    let cases = [
        // Seen as the redelivery comes: ack_wait silent already, the margin is left, and the
        // watcher's own read must last longer.
        (s(5), s(5), s(0), false, WATCHED_SILENCE),
        (s(5), s(5), s(0), true, s(1)),
        // A fresh heartbeat: the whole ack_wait and the margin.
        (s(5), s(0), s(0), false, s(6)),
        (s(30), ms(12_500), s(0), false, ms(18_500)),
        // Silent past the stale line by the server's clock (a server-wide outage): only the
        // watcher's own read is left, which a paused holder's next write ends.
        (s(5), s(60), s(0), false, WATCHED_SILENCE),
        (s(5), s(60), ms(1500), false, ms(500)),
        (s(5), s(6), WATCHED_SILENCE, false, s(0)),
        // An earlier process of the watcher's own worker is dead: stale is enough.
        (s(5), s(6), s(0), true, s(0)),
        (s(5), s(60), s(0), true, s(0)),
    ];
    for (ack_wait, silent, watched, earlier, want) in cases {
        assert_eq!(
            take_over_due_in(silent, watched, ack_wait, earlier),
            want,
            "{ack_wait:?} {silent:?} {watched:?} {earlier}"
        );
    }
    assert_eq!(stale_after(s(5)), s(6));
}

#[test]
fn earlier_processes_of_a_worker_are_told_from_this_one_and_from_others() {
    let this = "exec-1/200/";
    let cases = [
        ("exec-1/100/0", true),
        ("exec-1/200/3", false),
        ("exec-10/100/0", false),
        ("exec-2/100/0", false),
        ("exec-1", false),
    ];
    for (holder, want) in cases {
        assert_eq!(is_earlier_process(holder, "exec-1", this), want, "{holder}");
    }
}

#[test]
fn a_holder_pauses_at_its_deadline_unless_it_only_stores_its_result() {
    let start = Instant::now();
    let s = Duration::from_secs;
    let every = s(1);
    // (now, alive until, paused, storing, next beat, pause at now)
    let cases = [
        // Working: the beat never goes past the deadline, and at the deadline it pauses.
        (start, start + s(5), false, false, start + s(1), false),
        (
            start + s(4) + every / 2,
            start + s(5),
            false,
            false,
            start + s(5),
            false,
        ),
        (start + s(5), start + s(5), false, false, start + s(5), true),
        // Paused: it tries again soon, however far past the deadline.
        (
            start + s(9),
            start + s(5),
            true,
            false,
            start + s(9) + PAUSED_RETRY,
            true,
        ),
        // Only storing: the beats go on past the deadline, and it never pauses for it.
        (
            start + s(4) + every / 2,
            start + s(5),
            false,
            true,
            start + s(5) + every / 2,
            false,
        ),
        (
            start + s(9),
            start + s(5),
            false,
            true,
            start + s(10),
            false,
        ),
    ];
    for (now, alive_until, paused, storing, beat, pause) in cases {
        let offset = |i: Instant| i - start;
        assert_eq!(
            next_beat(now, every, alive_until, paused, storing),
            beat,
            "{:?} {:?} {storing}",
            offset(now),
            offset(alive_until)
        );
        assert_eq!(
            must_pause(now, alive_until, storing),
            pause,
            "{:?}",
            offset(now)
        );
    }
    // A try within the deadline may use what is left of it; past it, a short one.
    assert_eq!(beat_limit(start + s(4), s(2), start + s(5)), s(1));
    assert_eq!(beat_limit(start, s(2), start + s(5)), s(2));
    assert_eq!(
        beat_limit(start + s(9), s(2), start + s(5)),
        PAUSED_TRY_LIMIT
    );
}
