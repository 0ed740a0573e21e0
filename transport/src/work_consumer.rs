//! Durable pull consumers over the work-queue streams, and the deliveries they hand out.
//!
//! A pull request asks for as many messages as the caller can start at once (`next()`: one;
//! [`WorkConsumer::next_up_to`]: its free handlers) and expires with the caller's timeout, so a
//! consumer never holds messages it has no handler for (no prefetch eating ack_wait), an idle
//! wait costs one request per timeout (no spinning), a busy one one request per batch, and
//! after a server restart the next request simply goes out on the reconnected client.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, consumer::pull, AckKind};
use futures::StreamExt;
use loopgate_protocol::subjects::{
    Capability, STREAM_AUDIT, STREAM_DEAD, STREAM_EXEC, STREAM_RESULTS,
};
use serde::de::DeserializeOwned;

use crate::bus::Bus;
use crate::bus_error::{AckErrorKind, BusError, ConsumerErrorKind, Operation};

/// Shortest pull-request expiry we send; the server rejects very short ones.
const MIN_PULL_EXPIRY: Duration = Duration::from_millis(100);
/// Extra wait past the pull expiry for the server's 408 before we give up on the request.
const PULL_GRACE: Duration = Duration::from_secs(2);
/// A `next()` that ends without a message never returns sooner than this (anti-spin).
const MIN_IDLE_RETURN: Duration = Duration::from_millis(50);
const MIN_BIND_TIMEOUT: Duration = Duration::from_secs(1);
const MAX_ERROR_BACKOFF: Duration = Duration::from_secs(2);

/// Which work queue a consumer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Work {
    /// `<prefix>.exec.<capability>` on `LG_EXEC`, durable `exec-<capability>`.
    Exec(Capability),
    /// `<prefix>.audit.request` on `LG_AUDIT`, durable `audit`.
    Audit,
    /// `<prefix>.result.>` on `LG_RESULTS`, durable `manager`.
    Results,
    /// All of `LG_DEAD` (`<prefix>.dead.>` and the work streams' max-deliveries advisories),
    /// durable `manager-dead`: dead letters, turned into their runs' infrastructure-failure
    /// events, and advisories, turned into dead letters.
    Dead,
}

impl Work {
    pub fn stream_name(self) -> &'static str {
        match self {
            Work::Exec(_) => STREAM_EXEC,
            Work::Audit => STREAM_AUDIT,
            Work::Results => STREAM_RESULTS,
            Work::Dead => STREAM_DEAD,
        }
    }

    pub fn durable_name(self) -> String {
        match self {
            Work::Exec(capability) => format!("exec-{}", capability.as_str()),
            Work::Audit => "audit".to_string(),
            Work::Results => "manager".to_string(),
            Work::Dead => "manager-dead".to_string(),
        }
    }

    pub fn filter_subject(self, bus: &Bus) -> String {
        let subjects = bus.subjects();
        match self {
            Work::Exec(capability) => subjects.exec(capability),
            Work::Audit => subjects.audit_request(),
            Work::Results => subjects.results_all(),
            // The whole stream: its dead letters and the advisories it captures.
            Work::Dead => String::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerOptions {
    /// Redelivery after this long without ack or progress.
    pub ack_wait: Duration,
    /// Total deliveries allowed per message (first one included).
    pub max_deliver: i64,
    /// Messages delivered but not yet acked, across all workers of this consumer.
    pub max_ack_pending: i64,
}

impl Default for ConsumerOptions {
    fn default() -> Self {
        ConsumerOptions {
            ack_wait: Duration::from_secs(30),
            max_deliver: 5,
            max_ack_pending: 256,
        }
    }
}

impl Bus {
    /// Create or update the durable pull consumer for `work` and return a handle to pull from it.
    pub async fn work_consumer(
        &self,
        work: Work,
        options: ConsumerOptions,
    ) -> Result<WorkConsumer, BusError> {
        let config = pull::Config {
            durable_name: Some(work.durable_name()),
            filter_subject: work.filter_subject(self),
            ack_policy: jetstream::consumer::AckPolicy::Explicit,
            ack_wait: options.ack_wait,
            max_deliver: options.max_deliver,
            max_ack_pending: options.max_ack_pending,
            ..Default::default()
        };
        WorkConsumer::bound(self, work, config, false).await
    }

    /// Bind to the EXISTING durable consumer for `work` without creating or updating it, for
    /// restricted credentials that may only fetch from it (consumer info + next + acks).
    /// Fails if it does not exist yet; `next()` keeps retrying the lookup.
    pub async fn bind_work_consumer(&self, work: Work) -> Result<WorkConsumer, BusError> {
        let config = pull::Config {
            durable_name: Some(work.durable_name()),
            filter_subject: work.filter_subject(self),
            ..Default::default()
        };
        WorkConsumer::bound(self, work, config, true).await
    }
}

/// A durable pull consumer. Not `Clone`: give each worker loop its own (they share the durable).
pub struct WorkConsumer {
    bus: Bus,
    work: Work,
    config: pull::Config,
    consumer: Option<jetstream::consumer::PullConsumer>,
    failures: u32,
    /// Only look the durable up (never create or update it).
    bind_only: bool,
    /// The pull request still open: later calls take its messages before asking again.
    open: Option<OpenPull>,
}

/// A pull request the server may still answer.
struct OpenPull {
    messages: pull::Batch,
    /// Messages it may still deliver.
    left: usize,
    /// When it has surely expired (its expiry plus [`PULL_GRACE`]).
    ends_at: Instant,
}

impl std::fmt::Debug for WorkConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkConsumer")
            .field("work", &self.work)
            .field("bound", &self.consumer.is_some())
            .finish()
    }
}

impl WorkConsumer {
    /// A handle on `work`'s durable, bound once before it is returned.
    async fn bound(
        bus: &Bus,
        work: Work,
        config: pull::Config,
        bind_only: bool,
    ) -> Result<WorkConsumer, BusError> {
        let mut consumer = WorkConsumer {
            bus: bus.clone(),
            work,
            config,
            consumer: None,
            failures: 0,
            bind_only,
            open: None,
        };
        consumer.bind(bus.request_timeout()).await?;
        Ok(consumer)
    }

    pub fn work(&self) -> Work {
        self.work
    }

    /// Create-or-update the durable on the server (idempotent across processes).
    async fn bind(&mut self, bind_timeout: Duration) -> Result<(), BusError> {
        let js = self.bus.jetstream();
        let stream_name = self.work.stream_name();
        let consumer = if self.bind_only {
            let durable = self.work.durable_name();
            crate::bus::with_timeout(
                ConsumerErrorKind::Bind,
                bind_timeout,
                js.get_consumer_from_stream(durable, stream_name),
            )
            .await?
        } else {
            crate::bus::with_timeout(
                ConsumerErrorKind::Create,
                bind_timeout,
                js.create_consumer_on_stream(self.config.clone(), stream_name),
            )
            .await?
        };
        self.consumer = Some(consumer);
        Ok(())
    }

    /// Wait up to `timeout` for the next message. `Ok(None)` when none arrived, so callers can
    /// `select!` on cancellation between calls. Errors are returned after a short backoff so a
    /// caller looping on `next()` never spins while the server is away.
    pub async fn next(&mut self, timeout: Duration) -> Result<Option<Delivery>, BusError> {
        self.next_up_to(1, timeout).await
    }

    /// [`WorkConsumer::next`] for a caller that can start `free` handlers now: a new pull
    /// request asks for up to `free` messages, and later calls take the rest of them as they
    /// arrive, until it has delivered them all or expired. The caller must be able to start
    /// a handler for each message a request delivers (a call's `free` counts the handlers of
    /// messages it has not been given yet), or those messages wait unstarted.
    pub async fn next_up_to(
        &mut self,
        free: usize,
        timeout: Duration,
    ) -> Result<Option<Delivery>, BusError> {
        let started = Instant::now();
        let result = self.try_next(free.max(1), timeout).await;
        match &result {
            Ok(Some(_)) => self.failures = 0,
            Ok(None) => {
                self.failures = 0;
                sleep_until_at_least(started, MIN_IDLE_RETURN.min(timeout)).await;
            }
            Err(err) => {
                self.failures = self.failures.saturating_add(1);
                // A lost durable (e.g. server restarted without its store) is recreated next time.
                self.consumer = None;
                self.open = None;
                let backoff = error_backoff(self.failures).min(timeout.max(MIN_IDLE_RETURN));
                tracing::warn!(work = ?self.work, error = %err, ?backoff, "pull failed");
                sleep_until_at_least(started, backoff).await;
            }
        }
        result
    }

    async fn try_next(
        &mut self,
        free: usize,
        timeout: Duration,
    ) -> Result<Option<Delivery>, BusError> {
        if self
            .open
            .as_ref()
            .is_none_or(|open| open.left == 0 || Instant::now() >= open.ends_at)
        {
            self.open = Some(self.pull(free, timeout).await?);
        }
        let Some(open) = self.open.as_mut() else {
            return Err(BusError::Protocol("no pull request open".into()));
        };
        let wait = open
            .ends_at
            .saturating_duration_since(Instant::now())
            .min(timeout.max(MIN_PULL_EXPIRY) + PULL_GRACE);
        match tokio::time::timeout(wait, open.messages.next()).await {
            Ok(Some(Ok(message))) => {
                open.left = open.left.saturating_sub(1);
                Delivery::new(message, self.bus.request_timeout()).map(Some)
            }
            Ok(Some(Err(err))) => {
                self.open = None;
                Err(ConsumerErrorKind::Pull.failed(err))
            }
            Ok(None) => {
                self.open = None;
                Ok(None)
            }
            // The caller's wait is over; a request opened with a longer one stays open.
            Err(_) => {
                if Instant::now() >= open.ends_at {
                    self.open = None;
                }
                Ok(None)
            }
        }
    }

    /// Send a pull request for up to `batch` messages that expires after `timeout`.
    async fn pull(&mut self, batch: usize, timeout: Duration) -> Result<OpenPull, BusError> {
        if self.consumer.is_none() {
            // Re-binding after an error must not stretch next() far past the caller's timeout.
            let bound = self
                .bus
                .request_timeout()
                .min(timeout.max(MIN_BIND_TIMEOUT));
            self.bind(bound).await?;
        }
        let Some(consumer) = self.consumer.as_ref() else {
            return Err(BusError::Protocol("consumer not bound".into()));
        };
        let expires = timeout.max(MIN_PULL_EXPIRY);
        let messages = crate::bus::with_timeout(
            ConsumerErrorKind::PullRequest,
            self.bus.request_timeout(),
            consumer
                .batch()
                .max_messages(batch)
                .expires(expires)
                .messages(),
        )
        .await?;
        Ok(OpenPull {
            messages,
            left: batch,
            ends_at: Instant::now() + expires + PULL_GRACE,
        })
    }
}

fn error_backoff(failures: u32) -> Duration {
    let exponent = failures.saturating_sub(1).min(6);
    Duration::from_millis(100u64 << exponent).min(MAX_ERROR_BACKOFF)
}

async fn sleep_until_at_least(started: Instant, at_least: Duration) {
    let elapsed = started.elapsed();
    if elapsed < at_least {
        tokio::time::sleep(at_least - elapsed).await;
    }
}

struct DeliveryInner {
    message: jetstream::Message,
    attempt: u64,
    stream_sequence: u64,
    timeout: Duration,
}

/// One delivered work message. Cloning is cheap (shared); all ack methods take `&self`, so a
/// clone (or a `ProgressHandle`) can send progress acks from another task while a handler runs.
#[derive(Clone)]
pub struct Delivery {
    inner: Arc<DeliveryInner>,
}

impl std::fmt::Debug for Delivery {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delivery")
            .field("subject", &self.subject())
            .field("attempt", &self.inner.attempt)
            .field("stream_sequence", &self.inner.stream_sequence)
            .finish()
    }
}

impl Delivery {
    fn new(message: jetstream::Message, timeout: Duration) -> Result<Delivery, BusError> {
        let (attempt, stream_sequence) = {
            let info = message
                .info()
                .map_err(|err| BusError::Protocol(format!("no JetStream ack info: {err}")))?;
            (
                u64::try_from(info.delivered).unwrap_or(1).max(1),
                info.stream_sequence,
            )
        };
        Ok(Delivery {
            inner: Arc::new(DeliveryInner {
                message,
                attempt,
                stream_sequence,
                timeout,
            }),
        })
    }

    pub fn subject(&self) -> &str {
        self.inner.message.subject.as_str()
    }

    pub fn payload(&self) -> &[u8] {
        &self.inner.message.payload
    }

    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(self.payload())
    }

    /// JetStream delivery count, 1 on first delivery.
    pub fn attempt(&self) -> u64 {
        self.inner.attempt
    }

    pub fn stream_sequence(&self) -> u64 {
        self.inner.stream_sequence
    }

    /// Last value of header `name`, if present.
    pub fn header(&self, name: &str) -> Option<String> {
        self.inner
            .message
            .headers
            .as_ref()
            .and_then(|headers| headers.get_last(name))
            .map(|value| value.as_str().to_string())
    }

    /// Acknowledge and wait for the server to confirm (double ack).
    pub async fn ack(&self) -> Result<(), BusError> {
        crate::bus::with_timeout(
            AckErrorKind::Ack,
            self.inner.timeout,
            self.inner.message.double_ack(),
        )
        .await
    }

    /// Negative ack: redeliver, after `delay` when given.
    pub async fn nak(&self, delay: Option<Duration>) -> Result<(), BusError> {
        self.send(AckKind::Nak(delay), AckErrorKind::Nak).await
    }

    /// Work in progress: restart the ack_wait timer, and wait for the server to confirm it
    /// (a request on the ack subject, like `double_ack`): a flush only proves the bytes left
    /// this process, which a frozen or partitioned server would never see.
    pub async fn progress(&self) -> Result<(), BusError> {
        let message = &self.inner.message;
        let Some(reply) = message.reply.clone() else {
            return Err(BusError::Protocol("delivery without an ack subject".into()));
        };
        let client = message.context.client();
        let request = client.request(reply, "+WPI".into());
        crate::bus::with_timeout(AckErrorKind::Progress, self.inner.timeout, request)
            .await
            .map(drop)
    }

    /// Stop redelivering this message without marking it processed.
    pub async fn term(&self) -> Result<(), BusError> {
        self.send(AckKind::Term, AckErrorKind::Term).await
    }

    /// A clonable handle that can only send progress acks, for a heartbeat task.
    pub fn progress_handle(&self) -> ProgressHandle {
        ProgressHandle {
            delivery: self.clone(),
        }
    }

    /// Publish the ack kind, then flush so it has reached the server when this returns.
    async fn send(&self, kind: AckKind, op: AckErrorKind) -> Result<(), BusError> {
        let message = &self.inner.message;
        let timeout = self.inner.timeout;
        crate::bus::with_timeout(op, timeout, message.ack_with(kind)).await?;
        crate::bus::with_timeout(op, timeout, message.context.client().flush()).await
    }
}

/// Sends `AckKind::Progress` for one delivery; cheap to clone and move into a task.
#[derive(Clone, Debug)]
pub struct ProgressHandle {
    delivery: Delivery,
}

impl ProgressHandle {
    pub async fn progress(&self) -> Result<(), BusError> {
        self.delivery.progress().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync + 'static>() {}

    #[test]
    fn handles_move_into_tasks() {
        assert_send_sync::<Delivery>();
        assert_send_sync::<ProgressHandle>();
        assert_send_sync::<WorkConsumer>();
        assert_send_sync::<Bus>();
    }

    #[test]
    fn backoff_grows_and_caps() {
        let cases = [
            (1, 100),
            (2, 200),
            (3, 400),
            (5, 1600),
            (6, 2000),
            (50, 2000),
        ];
        for (failures, millis) in cases {
            assert_eq!(
                error_backoff(failures),
                Duration::from_millis(millis),
                "{failures}"
            );
        }
    }

    #[test]
    fn durable_names_and_streams() {
        let cases = [
            (Work::Exec(Capability::Cli), "exec-cli", STREAM_EXEC),
            (Work::Exec(Capability::Gui), "exec-gui", STREAM_EXEC),
            (Work::Audit, "audit", STREAM_AUDIT),
            (Work::Results, "manager", STREAM_RESULTS),
            (Work::Dead, "manager-dead", STREAM_DEAD),
        ];
        for (work, durable, stream) in cases {
            assert_eq!(work.durable_name(), durable);
            assert_eq!(work.stream_name(), stream);
        }
    }
}
