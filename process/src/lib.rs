//! loopgate-process: the one way loopgate runs a child process (the executor's `shell` tool, a
//! CLI agent, an acceptance check, the sandbox probes): its own process group, stdin closed,
//! stdout and stderr pumped into bounded sinks, a time budget, the whole group killed at exit,
//! on timeout and on drop. Tokio and rustix only: no NATS, no Redis, so the check runner and
//! anyone else can use it without the bus.

mod child_process;

pub use child_process::{
    run_child, shared, with_sink, ChildEnd, ChildError, ChildRun, GroupKill, OutputSink, SharedSink,
};
