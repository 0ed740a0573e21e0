//! The process exit codes `loopgate` promises (also listed in `loopgate --help`).

use loopgate_common::state::RunState;

/// Exit codes, stable for scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// The command worked; for `watch`/`status`, the run completed or is still going.
    Ok,
    /// Bad input, a server error, an integrity failure.
    Error,
    /// Bad command line (clap's own exit code).
    Usage,
    /// The run ended blocked, budget_exhausted, cancelled or failed.
    RunNotCompleted,
    /// The run waits for an answer (`loopgate answer RUN TEXT`).
    WaitingForInput,
    /// The manager could not be reached.
    Unreachable,
    /// `loopgate verify`: the run's completion is not proven (no trusted key, not completed,
    /// a report that does not complete the run, unsigned or badly signed report, untrusted
    /// key, tampered blob, missing evidence).
    NotVerified,
    /// The RUN argument is a prefix no run id starts with, or one more than one starts with.
    NoSuchRun,
}

impl ExitStatus {
    pub fn code(self) -> u8 {
        match self {
            ExitStatus::Ok => 0,
            ExitStatus::Error => 1,
            ExitStatus::Usage => 2,
            ExitStatus::RunNotCompleted => 3,
            ExitStatus::WaitingForInput => 4,
            ExitStatus::Unreachable => 5,
            ExitStatus::NotVerified => 6,
            ExitStatus::NoSuchRun => 7,
        }
    }

    /// What a run in `state` means for the exit code of `watch` and `status`.
    pub fn for_run_state(state: RunState) -> ExitStatus {
        match state {
            RunState::Completed | RunState::Queued | RunState::Running | RunState::Paused => {
                ExitStatus::Ok
            }
            RunState::WaitingForInput => ExitStatus::WaitingForInput,
            RunState::Blocked
            | RunState::BudgetExhausted
            | RunState::Cancelled
            | RunState::Failed => ExitStatus::RunNotCompleted,
        }
    }
}

/// The exit code table shown at the end of `loopgate --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  ok; for watch / submit --watch / status: the run completed (or, for status, is still going)
  1  error: bad input (invalid task file, workspace refused), server error, integrity failure
  2  usage error (bad command line)
  3  the run ended blocked, budget_exhausted, cancelled or failed
  4  the run is waiting for input (answer it with `loopgate answer RUN TEXT`)
  5  the manager is unreachable (is it running? `loopgate up`)
  6  verify / apply: the completion is not proven (no trusted key, not completed, a report that
     does not complete the run, bad or untrusted signature, tampered blob, missing evidence)
  7  RUN is a short id no run starts with, or more than one does (give more characters)

RUN is a run id or an unambiguous prefix of one (the short ids `loopgate runs` shows).";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_states_map_to_documented_codes() {
        let cases = [
            (RunState::Queued, 0),
            (RunState::Running, 0),
            (RunState::Paused, 0),
            (RunState::Completed, 0),
            (RunState::Blocked, 3),
            (RunState::BudgetExhausted, 3),
            (RunState::Cancelled, 3),
            (RunState::Failed, 3),
            (RunState::WaitingForInput, 4),
        ];
        for (state, code) in cases {
            assert_eq!(ExitStatus::for_run_state(state).code(), code, "{state:?}");
        }
    }

    #[test]
    fn help_lists_every_code() {
        for status in [
            ExitStatus::Ok,
            ExitStatus::Error,
            ExitStatus::Usage,
            ExitStatus::RunNotCompleted,
            ExitStatus::WaitingForInput,
            ExitStatus::Unreachable,
            ExitStatus::NotVerified,
            ExitStatus::NoSuchRun,
        ] {
            let needle = format!("\n  {}  ", status.code());
            assert!(EXIT_CODES_HELP.contains(&needle), "{status:?}");
        }
    }
}
