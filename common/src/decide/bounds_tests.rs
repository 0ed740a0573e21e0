//! What a worker's unsigned fields can do to a run: usage no episode could spend is refused
//! (never charged, never ends the run), a step's episode deadline is set by its first start
//! only, and the manager's decision requests go out under ids sealed with the run's secret.

use super::tests::{apply, exec_done, exec_result, frozen, report, TASK};
use super::*;
use crate::state::{DeadlineKind, Target};
use crate::task::parse_task_toml;
use loopgate_protocol::dispatch_id::decide_msg_id;
use loopgate_protocol::usage::Usage;
use loopgate_protocol::verdict::Integrity;
use loopgate_protocol::wire::{EpisodeRole, EpisodeStarted, ExecOutcome, Message};

/// The run's token budget: far above one episode's ceiling, far below a forged 10^9.
const BUDGET_TOKENS: u64 = 100_000_000;
const EPISODE_SECS: u64 = 120;

fn run() -> RunRecord {
    let mut task = parse_task_toml(TASK).unwrap();
    task.budget.max_total_tokens = Some(BUDGET_TOKENS);
    task.budget.max_cost_micros = Some(50_000_000);
    task.budget.executor_episode_secs = EPISODE_SECS;
    let secret = MsgIdSecret::new("5e".repeat(32));
    start_run_with("r1", task, "base", 0, false, secret).record
}

fn executing() -> RunRecord {
    super::tests::reply(&run(), "Next: cli\nTask: write hello.py").record
}

fn result(record: &RunRecord, usage: Usage) -> RunEvent {
    let outcome = ExecOutcome::Failed {
        error: "forged".into(),
    };
    exec_result(record, outcome, usage)
}

fn start(record: &RunRecord, role: EpisodeRole, attempt: u64, worker: &str) -> RunEvent {
    RunEvent::EpisodeStarted(EpisodeStarted {
        attempt: 1,
        run_id: record.id.clone(),
        generation: record.generation,
        round: record.round,
        role,
        delivery_attempt: attempt,
        worker: worker.into(),
    })
}

fn distrusted(decision: Decision) -> Distrust {
    match decision {
        Decision::Distrusted(d) => d,
        other => panic!("expected Distrusted, got {other:?}"),
    }
}

#[test]
fn usage_no_episode_could_spend_is_refused_and_never_charged() {
    let r = executing();
    let (ceiling, cost_ceiling) =
        episode_bounds::usage_ceiling(&r.task.budget, EpisodeRole::Executor);
    assert_eq!(
        ceiling,
        (EPISODE_SECS + EPISODE_GRACE_SECS) * TOKENS_PER_EPISODE_SEC
    );
    assert!(
        ceiling < BUDGET_TOKENS,
        "the test's budget outlasts one episode"
    );
    let forged = [
        Usage::tokens(1_000_000_000, 0),
        Usage::tokens(0, ceiling + 1),
        Usage::tokens(ceiling, 1),
        Usage::tokens(u64::MAX, u64::MAX),
        Usage {
            input_tokens: 1,
            output_tokens: 1,
            cost_micros: cost_ceiling + 1,
            ..Default::default()
        },
    ];
    for usage in forged {
        let d = distrusted(decide(&r, &result(&r, usage), 5));
        assert_eq!(
            (d.kind, d.reason),
            ("exec_result", "usage_over_ceiling"),
            "{usage:?}"
        );
        assert!(d.detail.contains(&ceiling.to_string()), "{}", d.detail);
    }
    // A stale one is refused the same: no episode could have spent it either.
    let mut stale = r.clone();
    stale.round += 7;
    assert!(matches!(
        decide(&stale, &result(&r, Usage::tokens(1_000_000_000, 0)), 5),
        Decision::Distrusted(_)
    ));
    // Nothing of the forgeries reached the run: the honest result goes on to its audit and
    // only its own usage is charged.
    let honest = exec_done(&r, "c1");
    assert!(matches!(honest.record.phase, Phase::Auditing { .. }));
    assert_eq!(honest.record.accounting.usage.executor, Usage::default());
    // Up to the ceiling is what an episode could spend: charged (and with a budget below it,
    // it would end the run, as an honest episode that spent it would).
    let at_ceiling = apply(&r, result(&r, Usage::tokens(ceiling / 2, ceiling / 2)));
    assert_eq!(at_ceiling.record.accounting.usage.executor.total(), ceiling);
    assert_eq!(at_ceiling.record.state, RunState::Running);
    let mut small = r.clone();
    small.task.budget.max_total_tokens = Some(ceiling / 4);
    let ended = apply(&small, result(&small, Usage::tokens(ceiling, 0)));
    assert_eq!(ended.record.state, RunState::BudgetExhausted);
}

#[test]
fn an_audit_reports_usage_within_its_own_ceiling() {
    let r = exec_done(&executing(), "c1").record;
    let (ceiling, _) = episode_bounds::usage_ceiling(&r.task.budget, EpisodeRole::Auditor);
    let mut forged = report(&r, true, Integrity::Clean);
    forged.usage = Usage::tokens(ceiling + 1, 0);
    let d = distrusted(decide(&r, &RunEvent::AuditFinished(forged), 5));
    assert_eq!((d.kind, d.reason), ("audit_report", "usage_over_ceiling"));
    let mut honest = report(&r, true, Integrity::Clean);
    honest.usage = Usage::tokens(ceiling, 0);
    let s = apply(&r, RunEvent::AuditFinished(honest));
    assert_eq!(s.record.accounting.usage.auditor.total(), ceiling);
}

#[test]
fn only_the_first_start_of_a_step_sets_its_deadline() {
    let r = executing();
    let first = start(&r, EpisodeRole::Executor, 1, "exec-1");
    let s = match decide(&r, &first, 1_000) {
        Decision::Apply(s) => s.record,
        other => panic!("{other:?}"),
    };
    let deadline = s.deadlines.phase.expect("an episode deadline");
    assert_eq!(deadline.kind, DeadlineKind::ExecEpisode);
    let episode_ms = ((EPISODE_SECS + EPISODE_GRACE_SECS) * 1000) as i64;
    assert_eq!(deadline.at_ms, 1_000 + episode_ms);
    // An exact redelivery of the start just applied is a replay: nothing moves.
    assert!(matches!(decide(&s, &first, 2_000), Decision::Replay(ref o) if o.is_empty()));
    // Ten more starts, each later than the last: repeats of an attempt already started are
    // security events; a redelivery's start (a higher attempt) is logged; none moves the
    // deadline.
    let mut s = s;
    let mut now = 2_000;
    for i in 0..10u64 {
        now += 60_000;
        let (attempt, worker) = if i % 2 == 0 {
            (1 + i / 2, format!("forger-{i}"))
        } else {
            (2 + i, "exec-2".to_string())
        };
        let again = start(&s, EpisodeRole::Executor, attempt, &worker);
        match decide(&s, &again, now) {
            Decision::Distrusted(d) => {
                assert_eq!(i % 2, 0, "{}", d.detail);
                assert_eq!(
                    (d.kind, d.reason),
                    ("episode_started", "repeated_episode_start")
                );
            }
            Decision::Apply(step) => {
                assert_eq!(i % 2, 1, "start {i} (attempt {attempt})");
                assert_eq!(super::tests::kinds(&step), ["episode_started"]);
                s = step.record;
            }
            other => panic!("start {i} (attempt {attempt}): {other:?}"),
        }
        assert_eq!(
            s.deadlines.phase,
            Some(deadline),
            "start {i} moved the deadline"
        );
    }
    // Redeliveries' starts are logged a bounded number of times.
    for attempt in 20..40 {
        match decide(&s, &start(&s, EpisodeRole::Executor, attempt, "w"), now) {
            Decision::Apply(step) => s = step.record,
            Decision::Ignore(why) => {
                assert!(why.contains("restarts"), "{why}");
                break;
            }
            other => panic!("attempt {attempt}: {other:?}"),
        }
    }
    let latest = s.deadlines.episode_started.expect("the first start");
    assert_eq!(latest.restarts, lifecycle::MAX_LOGGED_RESTARTS);
    assert_eq!(s.deadlines.phase, Some(deadline));
    // The deadline still passes when it was due: the step is cancelled and the run goes on.
    let t = match decide(&s, &RunEvent::Tick, deadline.at_ms) {
        Decision::Apply(t) => t,
        other => panic!("{other:?}"),
    };
    assert!(
        matches!(t.record.phase, Phase::Deciding { .. }),
        "{:?}",
        t.record.phase
    );
    assert!(t.outgoing().iter().any(|o| o.target == Target::Control));
}

#[test]
fn each_new_step_counts_its_own_first_start() {
    let r = executing();
    let s = apply(&r, start(&r, EpisodeRole::Executor, 1, "exec-1")).record;
    // The audit of the same round is a new step: its start sets the audit deadline.
    let a = exec_done(&s, "c1").record;
    assert_eq!(a.deadlines.episode_started, None);
    let audited = apply(&a, start(&a, EpisodeRole::Auditor, 1, "audit-1")).record;
    let first = audited
        .deadlines
        .episode_started
        .expect("the audit's start");
    assert_eq!((first.role, first.round), (EpisodeRole::Auditor, a.round));
    // An executor start for the round now being audited changes nothing.
    assert!(matches!(
        decide(&audited, &start(&audited, EpisodeRole::Executor, 9, "x"), 5),
        Decision::Ignore(_)
    ));
    // A second start of the audit is refused too.
    let d = distrusted(decide(
        &audited,
        &start(&audited, EpisodeRole::Auditor, 1, "audit-2"),
        5,
    ));
    assert_eq!(d.reason, "repeated_episode_start");
    // A record stored before the field existed reads without it.
    let json = serde_json::to_string(&a).unwrap();
    assert!(!json.contains("episode_started"), "{json}");
}

#[test]
fn decision_requests_go_out_under_ids_sealed_with_the_runs_secret() {
    let r = run();
    let prefix = decide_msg_id("r1", 1, 1);
    let out = &r.outbox[0];
    assert_eq!(out.target, Target::Decide);
    assert_eq!(out.msg_id, r.msg_id_secret.seal(&prefix));
    assert!(
        out.msg_id.starts_with(&format!("{prefix}:")),
        "{}",
        out.msg_id
    );
    assert_eq!(out.msg_id.len(), prefix.len() + 33);
    // Another run secret, another id; the same secret, the same id (a replayed transition or
    // the outbox relay publishes what was stored).
    let mut other = parse_task_toml(TASK).unwrap();
    other.budget.max_rounds = 3;
    let again = start_run_with(
        "r1",
        other.clone(),
        "base",
        0,
        false,
        r.msg_id_secret.clone(),
    );
    assert_eq!(again.record.outbox[0].msg_id, out.msg_id);
    let elsewhere = start_run_with(
        "r1",
        other,
        "base",
        0,
        false,
        MsgIdSecret::new("00".repeat(32)),
    );
    assert_ne!(elsewhere.record.outbox[0].msg_id, out.msg_id);
    // The secret is stored with the record (and only there) and is never in a message.
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains(&"5e".repeat(32)));
    let messages =
        serde_json::to_string(&r.outbox.iter().map(|o| &o.message).collect::<Vec<_>>()).unwrap();
    assert!(!messages.contains(&"5e".repeat(32)), "{messages}");
    // A record stored before the secret existed: the bare prefix, as before.
    assert_eq!(super::tests::started().outbox[0].msg_id, prefix);
}

/// The token budget left when a step goes out travels with it (`ExecRequest::max_tokens`),
/// shared among the step's siblings, so the executor ends an episode at the budget instead of
/// overshooting it by a whole episode.
#[test]
fn a_step_carries_the_token_budget_left_shared_among_its_siblings() {
    let max_tokens = |step: &Step| -> Vec<Option<u64>> {
        step.outgoing()
            .iter()
            .filter_map(|o| match &o.message {
                Message::ExecRequest(r) => Some(r.max_tokens),
                _ => None,
            })
            .collect()
    };
    let task = |budget: Option<u64>, attempts: u32| {
        let mut task = parse_task_toml(TASK).unwrap();
        task.budget.max_total_tokens = budget;
        task.budget.attempts = attempts;
        task
    };
    // (budget.max_total_tokens, budget.attempts, each sibling's share after the manager's
    // 15-token reply)
    let cases = [
        (Some(1_000), 1, vec![Some(985)]),
        (Some(1_000), 2, vec![Some(492); 2]),
        (Some(16), 1, vec![Some(1)]),
        (None, 1, vec![None]),
    ];
    for (budget, attempts, want) in cases {
        let s = start_run("r1", task(budget, attempts), "base", 0);
        let s = super::tests::reply(&s.record, "Next: cli\nTask: write hello.py");
        assert_eq!(max_tokens(&s), want, "{budget:?} x{attempts}");
    }
    // The next step gets what the first one's episode and the manager's replies left.
    let s = start_run("r1", task(Some(1_000), 1), "base", 0);
    let s = super::tests::reply(&s.record, "Next: cli\nTask: write hello.py");
    let event = exec_result(&s.record, frozen("c1"), Usage::tokens(300, 0));
    let s = apply(&s.record, event);
    let s = apply(
        &s.record,
        RunEvent::AuditFinished(report(&s.record, false, Integrity::Clean)),
    );
    let s = super::tests::reply(&s.record, "Next: cli\nTask: fix hello.py");
    assert_eq!(max_tokens(&s), vec![Some(1_000 - 15 - 300 - 15)]);
}
