//! The run store's errors, and the timeout every call runs under.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("redis {op} failed: {source}")]
    Redis {
        op: &'static str,
        #[source]
        source: redis::RedisError,
    },
    #[error("redis {op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
    #[error("invalid {what} '{value}': must be non-empty, without ':' or whitespace (states: not 'all')")]
    InvalidName { what: &'static str, value: String },
    #[error("unexpected reply to {op}: {detail}")]
    Protocol { op: &'static str, detail: String },
    /// No sentinel named a primary for `master_name` (all unreachable, or none monitors it).
    #[error("no primary for '{master_name}': {detail}")]
    NoPrimary { master_name: String, detail: String },
    /// A read answered by a node that is not the primary: a replica still syncing (an old
    /// primary restarted as a replica starts empty, or from the dump of its last sync) or a
    /// demoted one. Whatever it holds, or lacks, says nothing certain about the primary's data.
    #[error("redis {op}: the node that answered is a {role}, not the primary, so its data may be missing or old")]
    NotPrimary { op: &'static str, role: String },
    /// The write is on the primary but fewer replicas than required acknowledged it in time:
    /// it is not acknowledged (its effects wait in the outbox).
    #[error("{op}: {acked} of {wanted} replicas acknowledged the write in time")]
    NotReplicated {
        op: &'static str,
        acked: u64,
        wanted: u64,
    },
}

impl StoreError {
    /// Whether the same call may succeed later: Redis was unreachable, restarting or slow, the
    /// node answering is a replica now (a failover), no sentinel named a primary, or too few
    /// replicas acknowledged a write.
    pub fn is_retryable(&self) -> bool {
        match self {
            StoreError::Redis { source, .. } => {
                source.is_io_error()
                    || source.is_connection_refusal()
                    || source.is_connection_dropped()
                    || source.is_timeout()
                    || source.is_cluster_error()
                    || matches!(
                        source.kind(),
                        redis::ErrorKind::Server(
                            redis::ServerErrorKind::BusyLoading
                                | redis::ServerErrorKind::ReadOnly
                                | redis::ServerErrorKind::MasterDown
                        )
                    )
                    || answered_by_a_replica(source)
            }
            StoreError::Timeout { .. }
            | StoreError::NoPrimary { .. }
            | StoreError::NotPrimary { .. }
            | StoreError::NotReplicated { .. } => true,
            StoreError::InvalidName { .. } | StoreError::Protocol { .. } => false,
        }
    }

    /// Whether the primary may have moved: it is unreachable or slow, or the node answering
    /// is a replica now (`READONLY`, `MASTERDOWN`). With sentinels, the store asks again.
    pub fn may_mean_failover(&self) -> bool {
        match self {
            StoreError::Redis { .. } | StoreError::Timeout { .. } => self.is_retryable(),
            StoreError::NotPrimary { .. } => true,
            StoreError::NoPrimary { .. }
            | StoreError::NotReplicated { .. }
            | StoreError::InvalidName { .. }
            | StoreError::Protocol { .. } => false,
        }
    }
}

/// A node refusing what only a primary does with a plain `ERR` (no `READONLY` code): `WAIT
/// cannot be used with replica instances`, which a pipeline of reads and `WAIT` (the outbox
/// relay's claim) gets from a demoted primary. The store must ask the sentinels again, as for
/// `READONLY`; without that the relay failed on the old primary for good (seen in CI).
fn answered_by_a_replica(source: &redis::RedisError) -> bool {
    source.to_string().contains("used with replica instances")
}

pub(crate) async fn bounded<T>(
    op: &'static str,
    after: Duration,
    fut: impl std::future::Future<Output = redis::RedisResult<T>>,
) -> Result<T, StoreError> {
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(source)) => Err(StoreError::Redis { op, source }),
        Err(_) => Err(StoreError::Timeout { op, after }),
    }
}
