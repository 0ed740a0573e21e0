//! Stored run records across versions: records written by the flat `RunRecord` of `55b6270`
//! (fixtures under `fixtures/run_record/`) load with today's grouped record and keep their
//! values; today's records keep exactly the old keys (plus `schema`), so a replica of that
//! version still reads them; a record of a newer schema is refused with a clear error.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use loopgate_common::gate::GateVerdict;
use loopgate_common::state::{
    Deadline, DeadlineKind, Outgoing, Phase, PlanningStage, RecordError, RoleUsage, RoundSummary,
    RunRecord, RunState, Target, RUN_RECORD_SCHEMA,
};
use loopgate_common::task::Task;
use loopgate_protocol::contract::Contract;
use loopgate_protocol::rubric::{RubricStanding, Strategy};
use loopgate_protocol::snapshot::SnapshotId;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::{Evidence, Verdicts};
use serde::{Deserialize, Serialize};
use serde_json::Value;

macro_rules! fixture {
    ($name:literal) => {
        ($name, include_str!(concat!("fixtures/run_record/", $name)))
    };
}

const FIXTURES: [(&str, &str); 8] = [
    fixture!("queued_fresh.json"),
    fixture!("running_deciding_streaks.json"),
    fixture!("running_executing.json"),
    fixture!("waiting_for_approval.json"),
    fixture!("running_after_freeze.json"),
    fixture!("resumed_generation_2.json"),
    fixture!("completed_rubric.json"),
    fixture!("legacy_without_default_fields.json"),
];

/// The keys the flat record of `55b6270` added after the first records were stored, all
/// `#[serde(default)]`.
const LATER_KEYS: [&str; 11] = [
    "deadline",
    "wall_deadline_ms",
    "failed_streak",
    "generation_start_round",
    "trace_parent",
    "escalation_level",
    "done_refusals",
    "planning",
    "proposed_contract",
    "last_good_snapshot",
    "rubric",
];

const T0: i64 = 1_767_225_600_000;
const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn load(name: &str, json: &str) -> RunRecord {
    match RunRecord::from_json(json) {
        Ok(record) => record,
        Err(e) => panic!("{name}: {e}"),
    }
}

fn fixture(name: &str) -> (&'static str, &'static str) {
    match FIXTURES.iter().find(|(n, _)| *n == name) {
        Some(f) => *f,
        None => panic!("no fixture {name}"),
    }
}

fn usage(input_tokens: u64, output_tokens: u64, cost_micros: u64) -> Usage {
    Usage {
        input_tokens,
        output_tokens,
        cost_micros,
        ..Usage::default()
    }
}

/// The values a fixture must load with, field group by field group.
#[derive(Clone, Copy)]
struct Want {
    state: RunState,
    phase: &'static str,
    generation: u32,
    round: u32,
    decide_seq: u32,
    /// invalid_streak, failed_streak, done_refusals
    streaks: (u32, u32, u32),
    escalation_level: u32,
    usage: RoleUsage,
    generation_start_round: u32,
    deadline: Option<Deadline>,
    wall_deadline_ms: Option<i64>,
    planning: Option<PlanningStage>,
    proposed_spec_hash: Option<&'static str>,
    trace_parent: Option<&'static str>,
    evidence: usize,
    gate_passed: Option<bool>,
    last_good_snapshot: Option<&'static str>,
    rubric_average: Option<f64>,
    snapshot: &'static str,
    terminal_reason: Option<&'static str>,
}

fn wants() -> Vec<(&'static str, Want)> {
    let none = RoleUsage::default();
    let base = Want {
        state: RunState::Running,
        phase: "deciding",
        generation: 1,
        round: 0,
        decide_seq: 0,
        streaks: (0, 0, 0),
        escalation_level: 0,
        usage: none,
        generation_start_round: 0,
        deadline: None,
        wall_deadline_ms: None,
        planning: None,
        proposed_spec_hash: None,
        trace_parent: None,
        evidence: 0,
        gate_passed: None,
        last_good_snapshot: None,
        rubric_average: None,
        snapshot: "",
        terminal_reason: None,
    };
    let executing = Want {
        state: RunState::Running,
        phase: "executing",
        round: 2,
        decide_seq: 4,
        streaks: (0, 1, 0),
        escalation_level: 1,
        usage: RoleUsage {
            manager: usage(4800, 320, 1400),
            executor: usage(0, 0, 0),
            auditor: usage(300, 40, 90),
        },
        deadline: Some(Deadline {
            at_ms: 1_767_227_484_000,
            kind: DeadlineKind::ExecEpisode,
        }),
        wall_deadline_ms: Some(T0 + 3_600_000),
        trace_parent: Some(TRACE),
        evidence: 1,
        gate_passed: Some(false),
        snapshot: "cand-0001",
        ..base
    };
    vec![
        (
            "queued_fresh.json",
            Want {
                state: RunState::Queued,
                decide_seq: 1,
                deadline: Some(Deadline {
                    at_ms: T0 + 420_000,
                    kind: DeadlineKind::Decision,
                }),
                wall_deadline_ms: Some(T0 + 3_600_000),
                snapshot: "base-snap-0001",
                ..base
            },
        ),
        (
            "running_deciding_streaks.json",
            Want {
                round: 1,
                decide_seq: 4,
                streaks: (1, 1, 1),
                usage: RoleUsage {
                    manager: usage(3600, 240, 1050),
                    ..executing.usage
                },
                deadline: Some(Deadline {
                    at_ms: 1_767_226_042_000,
                    kind: DeadlineKind::Decision,
                }),
                phase: "deciding",
                ..executing
            },
        ),
        ("running_executing.json", executing),
        (
            "waiting_for_approval.json",
            Want {
                state: RunState::WaitingForInput,
                phase: "waiting_for_answer",
                round: 2,
                planning: Some(PlanningStage::Approval),
                proposed_spec_hash: Some(
                    "a3f6c157fa5681963f40890159374ad1d663cf1b4b8e57dfeee9636f89ede4e3",
                ),
                snapshot: "contract-snap",
                ..base
            },
        ),
        (
            "running_after_freeze.json",
            Want {
                round: 2,
                decide_seq: 1,
                generation_start_round: 2,
                deadline: Some(Deadline {
                    at_ms: 420_001,
                    kind: DeadlineKind::Decision,
                }),
                snapshot: "contract-snap",
                ..base
            },
        ),
        (
            "resumed_generation_2.json",
            Want {
                generation: 2,
                round: 1,
                decide_seq: 2,
                usage: RoleUsage {
                    manager: usage(900, 30, 0),
                    ..none
                },
                generation_start_round: 1,
                deadline: Some(Deadline {
                    at_ms: T0 + 60_000 + 420_000,
                    kind: DeadlineKind::Decision,
                }),
                wall_deadline_ms: Some(T0 + 60_000 + 600_000),
                snapshot: "base-snap-0002",
                ..base
            },
        ),
        (
            "completed_rubric.json",
            Want {
                state: RunState::Completed,
                phase: "finished",
                round: 1,
                decide_seq: 1,
                usage: RoleUsage {
                    manager: usage(10, 5, 0),
                    ..none
                },
                evidence: 2,
                gate_passed: Some(true),
                last_good_snapshot: Some("c1"),
                rubric_average: Some(9.0),
                snapshot: "c1",
                terminal_reason: Some(
                    "an audit of the current snapshot passed the gate on every criterion",
                ),
                ..base
            },
        ),
        // Stored before the later fields existed: they load as their defaults.
        (
            "legacy_without_default_fields.json",
            Want {
                streaks: (0, 0, 0),
                escalation_level: 0,
                deadline: None,
                wall_deadline_ms: None,
                trace_parent: None,
                ..executing
            },
        ),
    ]
}

#[test]
fn old_records_load_with_their_values() {
    let wants = wants();
    assert_eq!(wants.len(), FIXTURES.len(), "a row per fixture");
    for (name, want) in wants {
        let (_, json) = fixture(name);
        let r = load(name, json);
        let got_streaks = (
            r.streaks.invalid_decisions,
            r.streaks.failed_rounds,
            r.streaks.done_refusals,
        );
        assert_eq!(r.schema, 1, "{name}: an unversioned record is schema 1");
        assert_eq!(r.state, want.state, "{name}");
        assert_eq!(r.phase.name(), want.phase, "{name}");
        assert_eq!(r.generation, want.generation, "{name}");
        assert_eq!(r.round, want.round, "{name}");
        assert_eq!(r.decide_seq, want.decide_seq, "{name}");
        assert_eq!(got_streaks, want.streaks, "{name}");
        assert_eq!(r.escalation_level, want.escalation_level, "{name}");
        assert_eq!(r.accounting.usage, want.usage, "{name}");
        assert_eq!(
            r.accounting.generation_start_round, want.generation_start_round,
            "{name}"
        );
        assert_eq!(r.deadlines.phase, want.deadline, "{name}");
        assert_eq!(r.deadlines.wall_ms, want.wall_deadline_ms, "{name}");
        assert_eq!(r.planning.stage, want.planning, "{name}");
        assert_eq!(
            r.planning
                .proposed_contract
                .as_ref()
                .map(|c| c.spec_hash.as_str()),
            want.proposed_spec_hash,
            "{name}"
        );
        assert_eq!(r.trace_parent.as_deref(), want.trace_parent, "{name}");
        assert_eq!(r.audit.evidence.len(), want.evidence, "{name}");
        assert_eq!(
            r.audit.last_gate.as_ref().map(|g| g.passed),
            want.gate_passed,
            "{name}"
        );
        assert_eq!(
            r.audit.last_verdicts.as_ref().map(|(_, s)| s.as_str()),
            want.gate_passed.map(|_| want.snapshot),
            "{name}: verdicts about the current snapshot"
        );
        assert_eq!(
            r.audit.last_good_snapshot.as_deref(),
            want.last_good_snapshot,
            "{name}"
        );
        assert_eq!(
            r.audit.rubric.as_ref().and_then(|s| s.average),
            want.rubric_average,
            "{name}"
        );
        assert_eq!(r.snapshot, want.snapshot, "{name}");
        assert_eq!(r.terminal_reason.as_deref(), want.terminal_reason, "{name}");
        assert_eq!(r.check_consistency(), Ok(()), "{name}");
    }
}

#[test]
fn the_rubric_standing_and_planning_load_whole() {
    let (name, json) = fixture("completed_rubric.json");
    let r = load(name, json);
    assert_eq!(
        r.audit.rubric,
        Some(RubricStanding {
            snapshot: "c1".into(),
            average: Some(9.0),
            threshold: 8.5,
            strategy: Some(Strategy::Finish),
            passed: true,
        })
    );
    assert!(r.progress().contains("rubric 9.0/8.5"), "{}", r.progress());
    let (name, json) = fixture("waiting_for_approval.json");
    let r = load(name, json);
    assert!(
        r.progress().contains("waiting for approval"),
        "{}",
        r.progress()
    );
}

/// Today's serialization of an old record is the old JSON plus `"schema": 1`: no key renamed,
/// moved or dropped (the legacy fixture gains the later keys with their defaults).
#[test]
fn old_records_serialize_back_to_the_same_keys_and_values() {
    for (name, json) in FIXTURES {
        let record = load(name, json);
        let mut old: Value = serde_json::from_str(json).unwrap();
        let mut new = serde_json::to_value(&record).unwrap();
        assert_eq!(new["schema"], RUN_RECORD_SCHEMA, "{name}");
        new.as_object_mut().unwrap().remove("schema");
        if name == "legacy_without_default_fields.json" {
            for key in LATER_KEYS {
                let defaulted = new.as_object_mut().unwrap().remove(key);
                let want = match key {
                    "failed_streak"
                    | "generation_start_round"
                    | "escalation_level"
                    | "done_refusals" => Value::from(0),
                    _ => Value::Null,
                };
                assert_eq!(defaulted, Some(want), "{name}: {key}");
            }
            assert!(LATER_KEYS.iter().all(|k| old.get(k).is_none()), "{name}");
        }
        strip_keys_added_since_the_fixtures(name, &mut new);
        assert_eq!(new, old.take(), "{name}");
    }
}

/// Keys added to the record after the fixtures were written, each with the default an old
/// record loads with: additions never rename, move or drop a key, and this lists them.
fn strip_keys_added_since_the_fixtures(name: &str, new: &mut Value) {
    let empty = || Value::Array(Vec::new());
    let added: [(&str, Value); 5] = [
        ("audited", empty()),
        ("passing_ever", empty()),
        ("failures_seen", empty()),
        ("stagnant_rounds", Value::from(0)),
        ("steps_sent_back", Value::from(0)),
    ];
    let record = new.as_object_mut().unwrap();
    for (key, default) in added {
        assert_eq!(record.remove(key), Some(default), "{name}: {key}");
    }
    let budget = record["task"]["budget"].as_object_mut().unwrap();
    assert_eq!(
        budget.remove("stagnation_rounds"),
        Some(Value::from(2)),
        "{name}"
    );
    for round in record["history"].as_array_mut().unwrap() {
        let round = round.as_object_mut().unwrap();
        for (key, default) in [
            ("base", Value::Null),
            ("changed_paths", empty()),
            ("checked", Value::from(0)),
            ("reused_from", Value::Null),
        ] {
            assert_eq!(round.remove(key), Some(default), "{name}: history {key}");
        }
    }
}

/// The flat record exactly as `55b6270` defined it: what a replica that is not upgraded yet
/// reads during a rolling upgrade.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct FlatRecord55b6270 {
    id: String,
    generation: u32,
    state: RunState,
    phase: Phase,
    task: Task,
    contract: Contract,
    round: u32,
    base_snapshot: SnapshotId,
    snapshot: SnapshotId,
    task_state: Option<String>,
    history: Vec<RoundSummary>,
    feedback: Vec<String>,
    invalid_streak: u32,
    decide_seq: u32,
    usage: RoleUsage,
    created_at: i64,
    updated_at: i64,
    terminal_reason: Option<String>,
    evidence: Vec<Evidence>,
    last_verdicts: Option<(Verdicts, SnapshotId)>,
    last_gate: Option<GateVerdict>,
    outbox: Vec<Outgoing>,
    last_event: Option<String>,
    #[serde(default)]
    deadline: Option<Deadline>,
    #[serde(default)]
    wall_deadline_ms: Option<i64>,
    #[serde(default)]
    failed_streak: u32,
    #[serde(default)]
    generation_start_round: u32,
    #[serde(default)]
    trace_parent: Option<String>,
    #[serde(default)]
    escalation_level: u32,
    #[serde(default)]
    done_refusals: u32,
    #[serde(default)]
    planning: Option<PlanningStage>,
    #[serde(default)]
    proposed_contract: Option<Contract>,
    #[serde(default)]
    last_good_snapshot: Option<SnapshotId>,
    #[serde(default)]
    rubric: Option<RubricStanding>,
}

#[test]
fn a_replica_of_55b6270_reads_todays_records() {
    for (name, json) in FIXTURES {
        let mut record = load(name, json);
        // Change every group, so a misplaced key would show.
        record.streaks.invalid_decisions += 1;
        record.streaks.failed_rounds += 2;
        record.streaks.done_refusals += 3;
        record.accounting.generation_start_round += 4;
        record.accounting.usage.executor.input_tokens += 5;
        record.deadlines.wall_ms = Some(6);
        record.deadlines.phase = Some(Deadline {
            at_ms: 7,
            kind: DeadlineKind::Audit,
        });
        record.audit.last_good_snapshot = Some("good".into());
        record.planning.stage = Some(PlanningStage::Contract);
        let stored = serde_json::to_string(&record).unwrap();
        let old: FlatRecord55b6270 = match serde_json::from_str(&stored) {
            Ok(old) => old,
            Err(e) => panic!("{name}: the old replica cannot read it: {e}"),
        };
        assert_eq!(
            old.invalid_streak, record.streaks.invalid_decisions,
            "{name}"
        );
        assert_eq!(old.failed_streak, record.streaks.failed_rounds, "{name}");
        assert_eq!(old.done_refusals, record.streaks.done_refusals, "{name}");
        assert_eq!(
            old.generation_start_round, record.accounting.generation_start_round,
            "{name}"
        );
        assert_eq!(old.usage, record.accounting.usage, "{name}");
        assert_eq!(old.wall_deadline_ms, Some(6), "{name}");
        assert_eq!(old.deadline, record.deadlines.phase, "{name}");
        assert_eq!(old.last_good_snapshot.as_deref(), Some("good"), "{name}");
        assert_eq!(old.planning, Some(PlanningStage::Contract), "{name}");
        assert_eq!(old.evidence, record.audit.evidence, "{name}");
        assert_eq!(old.rubric, record.audit.rubric, "{name}");
        // And what the old replica writes back (without `schema`) is today's record again.
        let rewritten = serde_json::to_string(&old).unwrap();
        assert_eq!(load(name, &rewritten), record, "{name}");
    }
}

fn with_schema(json: &str, schema: &str) -> String {
    let mut value: Value = serde_json::from_str(json).unwrap();
    value["schema"] = serde_json::from_str(schema).unwrap();
    value.to_string()
}

#[test]
fn the_schema_decides_what_loads() {
    let (_, json) = fixture("running_executing.json");
    // A newer record whose other keys no longer decode either: still reported as newer.
    let mut reshaped: Value = serde_json::from_str(&with_schema(json, "2")).unwrap();
    reshaped.as_object_mut().unwrap().remove("invalid_streak");
    struct Case {
        name: &'static str,
        json: String,
        /// `Ok(schema)`, or a piece of the error.
        want: Result<u32, &'static str>,
    }
    let cases = [
        Case {
            name: "no schema: the first layout",
            json: json.to_string(),
            want: Ok(1),
        },
        Case {
            name: "schema 1",
            json: with_schema(json, "1"),
            want: Ok(1),
        },
        Case {
            name: "a newer schema",
            json: with_schema(json, "2"),
            want: Err("run record schema 2 is newer than this build reads (schema 1 and older)"),
        },
        Case {
            name: "a much newer schema",
            json: with_schema(json, "4294967295"),
            want: Err("schema 4294967295 is newer"),
        },
        Case {
            name: "a newer schema in another shape",
            json: reshaped.to_string(),
            want: Err("schema 2 is newer"),
        },
        Case {
            name: "schema 0 never existed",
            json: with_schema(json, "0"),
            want: Err("schema 0 does not exist"),
        },
        Case {
            name: "a schema that is not a number",
            json: with_schema(json, "\"2\""),
            want: Err("not a JSON object with a numeric `schema`"),
        },
        Case {
            name: "an old record missing a key that never had a default",
            json: {
                let mut v: Value = serde_json::from_str(json).unwrap();
                v.as_object_mut().unwrap().remove("invalid_streak");
                v.to_string()
            },
            want: Err("(schema 1) is not valid: missing field `invalid_streak`"),
        },
    ];
    for case in cases {
        match (RunRecord::from_json(&case.json), case.want) {
            (Ok(record), Ok(schema)) => assert_eq!(record.schema, schema, "{}", case.name),
            (Err(e), Err(want)) => {
                let msg = e.to_string();
                assert!(msg.contains(want), "{}: {msg}", case.name);
            }
            (got, want) => panic!("{}: got {got:?}, want {want:?}", case.name),
        }
    }
}

/// Also when read with plain serde (tools, tests): a newer record never decodes.
#[test]
fn plain_serde_refuses_a_newer_schema_too() {
    let (_, json) = fixture("queued_fresh.json");
    let err = serde_json::from_str::<RunRecord>(&with_schema(json, "2")).unwrap_err();
    assert!(err.to_string().contains("schema 2 is newer"), "{err}");
    assert!(matches!(
        RunRecord::from_json(&with_schema(json, "2")),
        Err(RecordError::NewerSchema { found: 2 })
    ));
    let ok = serde_json::from_str::<RunRecord>(&with_schema(json, "1")).unwrap();
    assert!(matches!(
        ok.outbox.first().map(|o| o.target),
        Some(Target::Decide)
    ));
}
