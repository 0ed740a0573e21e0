//! Self-check inside the episode: when the model calls `finish` (and once more when the step
//! cap is reached) the blocking acceptance checks the step targets run on a scratch copy of the
//! live workspace, sandboxed exactly like the auditor's (`loopgate_checks`: the same probe, the
//! same launch, the same scratch layout, PATH, HOME and scrubbed environment, each check with
//! its own timeout). A failing one refuses `finish` with a tool result that names it; the
//! episode goes on, at most `self_checks` times. The results are feedback for the agent, never
//! evidence: the gate counts only the auditor's evidence on the frozen snapshot.
//!
//! `targets` (which checks, pure), `finish_rules` (the budget and the refusal text, pure),
//! `runner` (the scratch copy and the checks: the I/O). Built-in tool loop only: CLI agents run
//! their own loop and never call loopgate's `finish`.

pub(crate) mod finish_rules;
pub(crate) mod runner;
pub(crate) mod targets;
