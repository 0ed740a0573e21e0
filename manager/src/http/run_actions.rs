//! The changes the API accepts on a run now (`RunView::actions`): each route's own refusal
//! rule, asked of the run as it is. Every change route hands its event to `decide` and refuses
//! when `decide` ignores it (`Applied::Ignored`); this asks `decide` the same question with the
//! event the route would send for a well-formed body, and stores nothing.

use loopgate_api::RunAction;
use loopgate_common::decide::{decide, Decision, RunEvent};
use loopgate_common::state::{RunRecord, RunState};

/// The event `action`'s route sends, with a body the route accepts; None where the route
/// refuses before asking `decide`.
fn probe(record: &RunRecord, action: RunAction) -> Option<RunEvent> {
    Some(match action {
        RunAction::Cancel => RunEvent::Cancel {
            reason: "cancelled by the user".into(),
        },
        RunAction::Answer => RunEvent::Answer {
            text: "answer".into(),
        },
        RunAction::Approve => RunEvent::Approve { edited: None },
        RunAction::Resume => RunEvent::Resume {
            budget: record.task.budget.clone(),
        },
        RunAction::Instruct => RunEvent::Instruct {
            text: "instruction".into(),
        },
        RunAction::Pause => RunEvent::Pause,
        RunAction::Unpause => RunEvent::Unpause,
        // `continue_run` refuses any run but a completed one before it asks `decide`.
        RunAction::Continue if record.state != RunState::Completed => return None,
        RunAction::Continue => RunEvent::Continue {
            task: Box::new(record.task.clone()),
        },
    })
}

/// The actions whose route would accept a well-formed request on `record` at `now`.
pub(crate) fn run_actions(record: &RunRecord, now: i64) -> Vec<RunAction> {
    RunAction::ALL
        .into_iter()
        .filter(|action| {
            probe(record, *action).is_some_and(|event| {
                matches!(
                    decide(record, &event, now),
                    Decision::Apply(_) | Decision::Replay(_)
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use loopgate_common::decide::start_run;
    use loopgate_common::task::parse_task_file_toml;

    const TASK: &str = r#"
goal = "g"
[[acceptance]]
id = "a"
check = "true"
"#;

    #[test]
    fn actions_follow_the_routes_refusals() {
        let Ok(file) = parse_task_file_toml(TASK) else {
            panic!("task parses");
        };
        let Ok(task) = file.validate() else {
            panic!("task validates");
        };
        let live = start_run("r1", task, "base", 1).record;
        let mut completed = live.clone();
        completed.state = RunState::Completed;
        completed.phase = loopgate_common::state::Phase::Finished;
        let mut cancelled = completed.clone();
        cancelled.state = RunState::Cancelled;
        let cases = [
            (
                &live,
                vec![RunAction::Cancel, RunAction::Instruct, RunAction::Pause],
            ),
            (&completed, vec![RunAction::Continue]),
            (&cancelled, vec![RunAction::Resume]),
        ];
        for (record, want) in cases {
            assert_eq!(run_actions(record, 2), want, "{:?}", record.state);
        }
    }
}
