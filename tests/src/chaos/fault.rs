//! The faults a chaos run injects: which kind of component, what was done to it, and when.

/// The part a fault hit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    Manager,
    Executor,
    Auditor,
    Nats,
    Redis,
}

impl Component {
    pub const ALL: [Component; 5] = [
        Component::Manager,
        Component::Executor,
        Component::Auditor,
        Component::Nats,
        Component::Redis,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::Manager => "manager",
            Component::Executor => "executor",
            Component::Auditor => "auditor",
            Component::Nats => "nats-server",
            Component::Redis => "redis-server",
        }
    }
}

/// What was done to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    /// SIGKILL, then a restart on the same config and data.
    Kill,
    /// SIGSTOP, then SIGCONT after the freeze.
    Freeze,
    /// Its link cut at the fault proxy (a manager's, an executor's or an auditor's to
    /// nats-server, the managers' to redis-server): nothing forwarded for the drawn time, then healed (and, one time in two,
    /// every open connection reset as it heals).
    Partition,
    /// The executors' work-dir filesystem (a tmpfs) filled, then freed.
    DiskFull,
}

impl Action {
    pub const ALL: [Action; 4] = [
        Action::Kill,
        Action::Freeze,
        Action::Partition,
        Action::DiskFull,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Action::Kill => "kill",
            Action::Freeze => "freeze",
            Action::Partition => "partition",
            Action::DiskFull => "disk full",
        }
    }
}

/// One injected fault.
#[derive(Debug, Clone)]
pub struct Fault {
    pub component: Component,
    pub action: Action,
    /// Which one (`exec-3`, `manager-2`, `nats-server`...; for a partition the manager or
    /// worker whose NATS link was cut or `redis-server` for the managers' link; `exec-*` for a
    /// full disk).
    pub target: String,
    /// Unix ms when it was hit, and when it was back (restarted and ready, SIGCONTed, the link
    /// healed, the disk freed).
    pub at_ms: i64,
    pub back_ms: i64,
    /// A fault on the Redis primary with Sentinel: the open runs' logs read before it and
    /// again once the group had a primary and a replica again.
    pub log_check: Option<LogCheck>,
}

/// What a Redis failover did to the run logs the API showed before it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogCheck {
    /// Runs whose log was read before and after.
    pub runs: usize,
    /// Log entries read before the fault.
    pub entries: usize,
    /// One line per run whose log after the fault no longer starts with the entries read
    /// before it (an acknowledged transition lost, or changed).
    pub lost: Vec<String>,
}
