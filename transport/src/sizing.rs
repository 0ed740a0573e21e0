//! How big the JetStream topology is: replicas and byte caps (the manager's `[jetstream]`).

/// Replicas and byte caps of the topology, applied by the process that owns it (the manager,
/// from its `[jetstream]` keys). `None` leaves a setting to the server (1 replica, no cap) and
/// never asks for an update, so restricted workers, which only look the topology up, pass.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TopologyOptions {
    /// Replicas of every stream and bucket (1, 3 or 5; R3 survives a node).
    pub replicas: Option<usize>,
    /// Byte cap of each stream (`LG_EXEC`, `LG_AUDIT`, `LG_RESULTS`, `LG_EVENTS`): a full
    /// stream refuses publishes instead of filling the volume.
    pub stream_max_bytes: Option<i64>,
    /// Byte cap of the snapshot bucket (`OBJ_` stream of the object store).
    pub snapshot_max_bytes: Option<i64>,
    /// Byte cap of the evidence bucket.
    pub evidence_max_bytes: Option<i64>,
    /// `ack_wait` of the `audit` durable the auditors share: how long an audit whose auditor
    /// went silent waits before it is delivered again. `None`: 30 s when the durable is
    /// created, and an existing durable is left as it is.
    pub audit_ack_wait: Option<std::time::Duration>,
}
