//! The deployment's JetStream topology: the work and event streams, the snapshot and evidence
//! buckets, and the `audit` durable. The manager owns it and creates it with
//! `Bus::ensure_topology`; workers only look it up and wait (`runtime::await_topology`), so
//! everything is made at the owner's sizing. Every step looks before it creates.
//!
//! The durable `audit` consumer is part of the topology: restricted auditor credentials may
//! only bind it (never create it: a consumer's deliver subject could push stream data into
//! any subject), so whoever owns the topology — the manager, through `ensure_topology` —
//! creates it with the auditor's default settings.

use std::time::Duration;

use async_nats::jetstream::{self, stream};
use loopgate_protocol::subjects::{
    max_deliveries_advisories, EPISODE_BUCKET, EVIDENCE_BUCKET, SNAPSHOT_BUCKET, STREAM_AUDIT,
    STREAM_DEAD, STREAM_EVENTS, STREAM_EXEC, STREAM_RESULTS,
};

use crate::bus::{with_timeout, Bus, DUPLICATE_WINDOW, EVENTS_MAX_AGE};
use crate::bus_error::{
    BoxedSource, BusError, ConsumerErrorKind, Named, Operation, TopologyErrorKind,
};
use crate::sizing::TopologyOptions;
use crate::work_consumer::{ConsumerOptions, Work};

/// Concurrent `ensure_topology` calls from several processes may race on creation; retry a few
/// times before giving up.
const TOPOLOGY_ATTEMPTS: usize = 4;
/// How long an episode claim is kept (`lg-episodes`).
const EPISODE_CLAIM_MAX_AGE: Duration = Duration::from_secs(24 * 3600);
/// Byte cap of the episode-claim bucket (64 MiB, or the stream cap when that is smaller).
const EPISODE_BUCKET_MAX_BYTES: i64 = 64 << 20;

/// Whose view of the topology to check: each role looks up only what its NATS user may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TopologyRole {
    /// Everything (the manager; any process with full rights).
    Owner,
    Executor,
    Auditor,
}

/// Does the server's stream config carry every setting `wanted` specifies? Replicas and the
/// byte cap count only where `topology` asks for them.
fn stream_matches(
    actual: &stream::Config,
    wanted: &stream::Config,
    topology: TopologyOptions,
) -> bool {
    actual.subjects == wanted.subjects
        && actual.retention == wanted.retention
        && actual.storage == wanted.storage
        && actual.max_age == wanted.max_age
        && actual.duplicate_window == wanted.duplicate_window
        && topology
            .replicas
            .is_none_or(|r| actual.num_replicas.max(1) == r)
        && topology
            .stream_max_bytes
            .is_none_or(|b| actual.max_bytes == b)
}

/// The update for an existing stream whose settings differ from `wanted`: the replicas and the
/// byte cap stay as the server has them unless `topology` asks for them, so a process with the
/// default sizing never shrinks what the owner sized.
fn keep_unasked_sizing(
    mut wanted: stream::Config,
    actual: &stream::Config,
    topology: TopologyOptions,
) -> stream::Config {
    if topology.replicas.is_none() {
        wanted.num_replicas = actual.num_replicas;
    }
    if topology.stream_max_bytes.is_none() {
        wanted.max_bytes = actual.max_bytes;
    }
    wanted
}

impl Bus {
    /// The stream configurations this deployment uses, for the current prefix.
    pub fn stream_configs(&self) -> Vec<stream::Config> {
        let s = &self.subjects();
        let sizing = self.topology();
        let replicas = sizing.replicas.unwrap_or(1);
        let max_bytes = sizing.stream_max_bytes.unwrap_or(-1);
        let work = |name: &str, subject: String| stream::Config {
            name: name.to_string(),
            subjects: vec![subject],
            retention: stream::RetentionPolicy::WorkQueue,
            storage: stream::StorageType::File,
            duplicate_window: DUPLICATE_WINDOW,
            num_replicas: replicas,
            max_bytes,
            // A full work queue refuses new work (the publisher retries) rather than dropping
            // the oldest queued step.
            discard: stream::DiscardPolicy::New,
            ..Default::default()
        };
        vec![
            work(STREAM_EXEC, s.exec_all()),
            work(STREAM_AUDIT, s.audit_all()),
            work(STREAM_RESULTS, s.results_all()),
            stream::Config {
                name: STREAM_EVENTS.to_string(),
                subjects: vec![s.events_all()],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age: EVENTS_MAX_AGE,
                duplicate_window: DUPLICATE_WINDOW,
                num_replicas: replicas,
                max_bytes,
                ..Default::default()
            },
            // Dead letters: kept (not a work queue) for inspection; the manager's `dead`
            // durable turns each into its run's infrastructure-failure event. The stream also
            // captures the server's advisories that a work consumer gave up on a message
            // (`given_up`): the manager turns each into a dead letter.
            stream::Config {
                name: STREAM_DEAD.to_string(),
                subjects: vec![
                    s.dead_all(),
                    max_deliveries_advisories(STREAM_EXEC),
                    max_deliveries_advisories(STREAM_AUDIT),
                ],
                retention: stream::RetentionPolicy::Limits,
                storage: stream::StorageType::File,
                max_age: EVENTS_MAX_AGE,
                duplicate_window: DUPLICATE_WINDOW,
                num_replicas: replicas,
                max_bytes,
                ..Default::default()
            },
        ]
    }

    /// Create or update the streams, the snapshot and evidence buckets, and the `audit` durable
    /// auditors bind to. Idempotent and safe to run from several processes at once.
    pub async fn ensure_topology(&self) -> Result<(), BusError> {
        for config in self.stream_configs() {
            self.ensure_stream(config).await?;
        }
        self.ensure_snapshot_bucket().await?;
        self.ensure_evidence_bucket().await?;
        self.ensure_episode_bucket().await?;
        self.ensure_audit_consumer().await
    }

    /// What of the topology `role` needs is not there yet, by name (`stream LG_EXEC`, `bucket
    /// lg-snapshots`, `consumer audit`), looked up read-only with only the look-ups that role's
    /// NATS user may make (deploy/nats/loopgate-users.conf). An existing stream whose settings
    /// differ counts as present (its owner updates it).
    pub async fn missing_topology(&self, role: TopologyRole) -> Vec<String> {
        let timeout = self.request_timeout();
        let js = self.jetstream();
        let mut missing = Vec::new();
        let (streams, buckets, audit_durable): (Vec<String>, &[&str], bool) = match role {
            TopologyRole::Owner => (
                self.stream_configs().into_iter().map(|c| c.name).collect(),
                &[SNAPSHOT_BUCKET, EVIDENCE_BUCKET],
                true,
            ),
            // Its work stream and every stream it publishes to, and the snapshots it writes.
            // (Not the dead letters: only the manager writes and reads them.)
            TopologyRole::Executor => (
                self.stream_configs()
                    .into_iter()
                    .map(|c| c.name)
                    .filter(|name| name != STREAM_DEAD)
                    .collect(),
                &[SNAPSHOT_BUCKET],
                false,
            ),
            // The durable it binds, the snapshots it reads and the evidence it writes.
            TopologyRole::Auditor => (Vec::new(), &[SNAPSHOT_BUCKET, EVIDENCE_BUCKET], true),
        };
        for name in streams {
            if self.stream_config(&name).await.is_none() {
                missing.push(format!("stream {name}"));
            }
        }
        for bucket in buckets {
            if !matches!(
                tokio::time::timeout(timeout, js.get_object_store(*bucket)).await,
                Ok(Ok(_))
            ) {
                missing.push(format!("bucket {bucket}"));
            }
        }
        // Every role claims its episodes (runtime::episode_claim).
        if !matches!(
            tokio::time::timeout(timeout, js.get_key_value(EPISODE_BUCKET)).await,
            Ok(Ok(_))
        ) {
            missing.push(format!("bucket {EPISODE_BUCKET}"));
        }
        if audit_durable {
            let lookup = js
                .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                    Work::Audit.durable_name(),
                    Work::Audit.stream_name(),
                );
            if with_timeout(ConsumerErrorKind::Info, timeout, lookup)
                .await
                .is_err()
            {
                missing.push(format!("consumer {}", Work::Audit.durable_name()));
            }
        }
        missing
    }

    /// Stream `name`'s config as the server has it now; None when it does not exist or cannot
    /// be looked up within the request timeout.
    async fn stream_config(&self, name: &str) -> Option<stream::Config> {
        match tokio::time::timeout(self.request_timeout(), self.jetstream().get_stream(name)).await
        {
            Ok(Ok(existing)) => Some(existing.cached_info().config.clone()),
            _ => None,
        }
    }

    /// Create the stream, or bring an existing one to the settings this topology asks for.
    /// Every process may run this at the same time, so each look decides afresh: absent, it is
    /// created (create only: an update could land on a stream another process has just
    /// created); present with our settings, done (so processes with read-only rights on the
    /// topology pass once the manager has created it); present otherwise, it is updated,
    /// keeping the sizing this process does not ask for (`keep_unasked_sizing`): a process
    /// with the default sizing never shrinks the owner's replicated stream, and "it exists" is
    /// done only once its settings are ours.
    async fn ensure_stream(&self, config: stream::Config) -> Result<(), BusError> {
        let timeout = self.request_timeout();
        let mut last_error = timed_out(timeout);
        for attempt in 0..TOPOLOGY_ATTEMPTS {
            let js = self.jetstream();
            let result = match self.stream_config(&config.name).await {
                Some(actual) if stream_matches(&actual, &config, self.topology()) => return Ok(()),
                Some(actual) => {
                    let update = keep_unasked_sizing(config.clone(), &actual, self.topology());
                    tokio::time::timeout(timeout, js.update_stream(update))
                        .await
                        .map(|r| r.map(drop).map_err(BoxedSource::from))
                }
                None => tokio::time::timeout(timeout, js.create_stream(config.clone()))
                    .await
                    .map(|r| r.map(drop).map_err(BoxedSource::from)),
            };
            match result {
                Ok(Ok(())) => return Ok(()),
                // Another process created or changed it meanwhile: look again.
                Ok(Err(err)) => last_error = err,
                Err(_) => last_error = timed_out(timeout),
            }
            tracing::debug!(stream = %config.name, attempt, error = %last_error, "ensure stream retry");
            tokio::time::sleep(Duration::from_millis(50 * (attempt as u64 + 1))).await;
        }
        Err(TopologyErrorKind::Stream.failed(Box::new(Named {
            name: config.name,
            source: last_error,
        })))
    }

    async fn ensure_snapshot_bucket(&self) -> Result<(), BusError> {
        let mut last_error = timed_out(self.request_timeout());
        for attempt in 0..TOPOLOGY_ATTEMPTS {
            if let Ok(Ok(_)) = tokio::time::timeout(
                self.request_timeout(),
                self.jetstream().get_object_store(SNAPSHOT_BUCKET),
            )
            .await
            {
                return self
                    .keep_bucket_sized(
                        &format!("OBJ_{SNAPSHOT_BUCKET}"),
                        self.topology().snapshot_max_bytes,
                    )
                    .await;
            }
            let config = jetstream::object_store::Config {
                bucket: SNAPSHOT_BUCKET.to_string(),
                description: Some("loopgate content-addressed snapshots".into()),
                storage: stream::StorageType::File,
                num_replicas: self.topology().replicas.unwrap_or(1),
                max_bytes: self.topology().snapshot_max_bytes.unwrap_or(-1),
                ..Default::default()
            };
            match tokio::time::timeout(
                self.request_timeout(),
                self.jetstream().create_object_store(config),
            )
            .await
            {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(err)) => last_error = err.into(),
                Err(_) => last_error = timed_out(self.request_timeout()),
            }
            tracing::debug!(attempt, error = %last_error, "ensure snapshot bucket retry");
            tokio::time::sleep(Duration::from_millis(50 * (attempt as u64 + 1))).await;
        }
        Err(TopologyErrorKind::SnapshotBucket.failed(last_error))
    }

    /// Create the evidence bucket if it does not exist. Idempotent; needs stream-creation
    /// rights (the manager's credentials).
    pub async fn ensure_evidence_bucket(&self) -> Result<(), BusError> {
        let js = self.jetstream();
        let timeout = self.request_timeout();
        let mut last_error = timed_out(timeout);
        for attempt in 0..TOPOLOGY_ATTEMPTS {
            if let Ok(Ok(_)) =
                tokio::time::timeout(timeout, js.get_object_store(EVIDENCE_BUCKET)).await
            {
                return self
                    .keep_bucket_sized(
                        &format!("OBJ_{EVIDENCE_BUCKET}"),
                        self.topology().evidence_max_bytes,
                    )
                    .await;
            }
            let config = jetstream::object_store::Config {
                bucket: EVIDENCE_BUCKET.to_string(),
                description: Some("loopgate acceptance-check outputs".into()),
                storage: jetstream::stream::StorageType::File,
                num_replicas: self.topology().replicas.unwrap_or(1),
                max_bytes: self.topology().evidence_max_bytes.unwrap_or(-1),
                ..Default::default()
            };
            match tokio::time::timeout(timeout, js.create_object_store(config)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(err)) => last_error = err.into(),
                Err(_) => last_error = timed_out(timeout),
            }
            tokio::time::sleep(Duration::from_millis(50 * (attempt as u64 + 1))).await;
        }
        Err(TopologyErrorKind::EvidenceBucket.failed(last_error))
    }

    /// Bring an existing bucket's backing stream (`OBJ_<bucket>`, `KV_<bucket>`) to the replicas and byte cap
    /// this topology asks for, as `ensure_stream` does for the streams. Processes start in any
    /// order, and one with the default sizing (a development worker that found the topology
    /// missing) may have created the bucket first with one replica: left so, the whole
    /// deployment's snapshots live on one node, and losing that node answers every snapshot
    /// read with "no responders" while the streams fail over. The default sizing asks for
    /// nothing and looks nothing up, so restricted workers pass.
    async fn keep_bucket_sized(
        &self,
        stream_name: &str,
        max_bytes: Option<i64>,
    ) -> Result<(), BusError> {
        let replicas = self.topology().replicas;
        if replicas.is_none() && max_bytes.is_none() {
            return Ok(());
        }
        let timeout = self.request_timeout();
        let stream = with_timeout(
            TopologyErrorKind::BucketInfo,
            timeout,
            self.jetstream().get_stream(stream_name),
        )
        .await?;
        let mut config = stream.cached_info().config.clone();
        let replicas_match = replicas.is_none_or(|r| config.num_replicas.max(1) == r);
        let bytes_match = max_bytes.is_none_or(|b| config.max_bytes == b);
        if replicas_match && bytes_match {
            return Ok(());
        }
        if let Some(r) = replicas {
            config.num_replicas = r;
        }
        if let Some(b) = max_bytes {
            config.max_bytes = b;
        }
        tracing::info!(
            stream = stream_name,
            replicas = config.num_replicas,
            max_bytes = config.max_bytes,
            "resizing bucket to the configured [jetstream] sizing"
        );
        with_timeout(
            TopologyErrorKind::ResizeBucket,
            timeout,
            self.jetstream().update_stream(config),
        )
        .await
        .map(drop)
    }

    /// Create the episode-claim bucket (KV, one revision per key) unless it exists. A claim
    /// is kept a day: longer than any step is redelivered.
    pub async fn ensure_episode_bucket(&self) -> Result<(), BusError> {
        let js = self.jetstream();
        let timeout = self.request_timeout();
        let mut last_error = timed_out(timeout);
        for attempt in 0..TOPOLOGY_ATTEMPTS {
            if let Ok(Ok(_)) = tokio::time::timeout(timeout, js.get_key_value(EPISODE_BUCKET)).await
            {
                // Replicated like the other buckets: the claims must survive a node.
                return self
                    .keep_bucket_sized(
                        &format!("KV_{EPISODE_BUCKET}"),
                        self.topology()
                            .stream_max_bytes
                            .map(|b| b.min(EPISODE_BUCKET_MAX_BYTES)),
                    )
                    .await;
            }
            let config = jetstream::kv::Config {
                bucket: EPISODE_BUCKET.to_string(),
                description: "loopgate episode claims: one episode per dispatched step".into(),
                history: 1,
                max_age: EPISODE_CLAIM_MAX_AGE,
                storage: stream::StorageType::File,
                num_replicas: self.topology().replicas.unwrap_or(1),
                // Claims are a few KiB and live a day: a small cap, so the bucket adds little
                // to the storage JetStream reserves for the streams' caps.
                max_bytes: self
                    .topology()
                    .stream_max_bytes
                    .map_or(EPISODE_BUCKET_MAX_BYTES, |b| {
                        b.min(EPISODE_BUCKET_MAX_BYTES)
                    }),
                ..Default::default()
            };
            match tokio::time::timeout(timeout, js.create_key_value(config)).await {
                Ok(Ok(_)) => return Ok(()),
                Ok(Err(err)) => last_error = err.into(),
                Err(_) => last_error = timed_out(timeout),
            }
            tokio::time::sleep(Duration::from_millis(50 * (attempt as u64 + 1))).await;
        }
        Err(TopologyErrorKind::EpisodeBucket.failed(last_error))
    }

    /// Create the `audit` durable unless it exists, with the topology's `audit_ack_wait` (else
    /// the default [`ConsumerOptions`]). Looks first, so callers with read-only rights pass once
    /// it is there; an existing durable is updated only when `audit_ack_wait` is set and
    /// differs from the server's.
    pub async fn ensure_audit_consumer(&self) -> Result<(), BusError> {
        let wanted = self.topology().audit_ack_wait;
        let options = ConsumerOptions {
            ack_wait: wanted.unwrap_or(ConsumerOptions::default().ack_wait),
            ..ConsumerOptions::default()
        };
        let lookup = self
            .jetstream()
            .get_consumer_from_stream::<async_nats::jetstream::consumer::pull::Config, _, _>(
                Work::Audit.durable_name(),
                Work::Audit.stream_name(),
            );
        if let Ok(existing) =
            with_timeout(ConsumerErrorKind::Info, self.request_timeout(), lookup).await
        {
            let server = existing.cached_info().config.ack_wait;
            match wanted {
                Some(ack_wait) if ack_wait != server => {
                    tracing::info!(?server, ?ack_wait, "updating the audit consumer's ack_wait");
                }
                _ => return Ok(()),
            }
        }
        self.work_consumer(Work::Audit, options).await.map(drop)
    }
}

/// The last failure of a topology step whose last attempt ran out of time.
fn timed_out(after: Duration) -> BoxedSource {
    format!("timed out after {after:?}").into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(replicas: usize, max_bytes: i64) -> stream::Config {
        stream::Config {
            name: "LG_EXEC".into(),
            subjects: vec!["lg.exec.>".into()],
            num_replicas: replicas,
            max_bytes,
            ..Default::default()
        }
    }

    #[test]
    fn an_update_keeps_the_sizing_this_process_does_not_ask_for() {
        let owner = TopologyOptions {
            replicas: Some(3),
            stream_max_bytes: Some(1 << 30),
            ..TopologyOptions::default()
        };
        let replicas_only = TopologyOptions {
            replicas: Some(3),
            ..TopologyOptions::default()
        };
        // (this process's sizing, what it wants, what the server has) -> (replicas, max_bytes)
        let cases = [
            (
                TopologyOptions::default(),
                config(1, -1),
                config(3, 1 << 30),
                (3, 1 << 30),
            ),
            (owner, config(3, 1 << 30), config(1, -1), (3, 1 << 30)),
            (
                replicas_only,
                config(3, -1),
                config(1, 1 << 20),
                (3, 1 << 20),
            ),
        ];
        for (topology, wanted, actual, (replicas, max_bytes)) in cases {
            let update = keep_unasked_sizing(wanted, &actual, topology);
            assert_eq!(
                (update.num_replicas, update.max_bytes),
                (replicas, max_bytes),
                "{topology:?}"
            );
            assert_eq!(update.subjects, actual.subjects);
        }
    }
}
