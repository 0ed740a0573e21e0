//! One episode per dispatched step, whatever JetStream redelivers. A worker claims the step's
//! key in the `lg-episodes` KV bucket (create-if-absent) before it starts an episode, keeps
//! the claim alive with compare-and-set heartbeats while it runs, and records the finished
//! result in it before publishing. A redelivery of the same step (an ack lost in a nats-server
//! restart, a consumer whose state went back after a kill -9, an ack_wait that ran out)
//! therefore never starts a second episode:
//! - the claim says **finished**: the stored result is published again (same dedup id) and
//!   the delivery acked, the work is not redone;
//! - the claim is **running** and its heartbeats go on: the delivery waits (kept alive by the
//!   consume loop) until it finishes or its holder goes silent;
//! - the holder has been silent for longer than it may work without a heartbeat: the claim is
//!   taken over by compare-and-set, and the old holder, whose next heartbeat fails with a wrong
//!   revision, stops its episode. A holder *pauses* its episode `ack_wait` after it *sent* its
//!   last heartbeat that landed (so before the server stamped it): it starts no model call or
//!   tool run while paused, and keeps trying to write its claim over its last revision. A
//!   watcher takes over once the server's own clock says the claim's last revision is
//!   `ack_wait` plus a margin old, and it has itself read the same revision for
//!   [`WATCHED_SILENCE`]. Both ages are read from server stamps (the claim's, and a probe key's
//!   written now), so no two machines' clocks are compared, and a step whose holder was killed
//!   moves about `ack_wait` plus the margin after its last heartbeat instead of a further
//!   `ack_wait` after the redelivery.
//! - A holder cannot tell a NATS outage of its own (a cut link: another worker takes the step
//!   over, and the paused holder stops once its write fails) from one of the whole server (a
//!   frozen or restarted nats-server: nobody could take the step over). Pausing instead of
//!   stopping keeps the work in the second case: once the server answers, the holder's claim
//!   write lands within a retry, before a watcher has read the claim silent for
//!   [`WATCHED_SILENCE`], and the episode goes on where it paused.
//!
//! Workers talk to NATS only; the bucket is part of the topology the manager creates.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::kv;
use serde::{Deserialize, Serialize};
use tokio::sync::{watch, Mutex, OnceCell};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::bus::{with_timeout, Bus};
use crate::bus_error::{BusError, ClaimErrorKind, Operation};
use crate::runtime::keep_alive::progress_interval;

/// A result as it was published: republished as is for a redelivery of a finished step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredResult {
    pub subject: String,
    pub msg_id: String,
    pub payload: serde_json::Value,
}

/// What a claim key holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum Record {
    Running {
        holder: String,
    },
    /// Its holder stopped without a result (nak, cancel, shutdown): anyone may take it.
    Released {
        holder: String,
    },
    Finished {
        holder: String,
        result: StoredResult,
    },
}

/// What a claim key looks like to a worker that wants to run the step.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Absent,
    /// Released, or a value nobody can read: free to take.
    Free,
    Running {
        holder: String,
    },
    Finished(StoredResult),
}

/// What to do about it.
#[derive(Debug, Clone, PartialEq)]
enum Next {
    Create,
    Take,
    Watch,
    Republish(StoredResult),
}

fn next(seen: Seen) -> Next {
    match seen {
        Seen::Absent => Next::Create,
        Seen::Free => Next::Take,
        Seen::Running { .. } => Next::Watch,
        Seen::Finished(result) => Next::Republish(result),
    }
}

/// The result a finished claim holds; `None` for any other entry.
pub(crate) fn finished_result_of(entry: &kv::Entry) -> Option<StoredResult> {
    match seen(Some(entry)) {
        Seen::Finished(result) => Some(result),
        _ => None,
    }
}

fn seen(entry: Option<&kv::Entry>) -> Seen {
    let Some(entry) = entry else {
        return Seen::Absent;
    };
    if entry.operation != kv::Operation::Put {
        return Seen::Free;
    }
    match serde_json::from_slice::<Record>(&entry.value) {
        Ok(Record::Running { holder }) => Seen::Running { holder },
        Ok(Record::Finished { result, .. }) => Seen::Finished(result),
        Ok(Record::Released { .. }) | Err(_) => Seen::Free,
    }
}

/// How much later than a silent holder must have stopped a watcher takes its claim over: the
/// time an episode takes to stop once told, and the skew between the stamps of two NATS
/// servers when the bucket's leader moved.
pub const TAKE_OVER_MARGIN: Duration = Duration::from_secs(1);

/// How old (by the server's stamps) a running claim's last revision must be before a watcher
/// takes it over: its holder paused `ack_wait` after sending that heartbeat at the latest.
pub fn stale_after(ack_wait: Duration) -> Duration {
    ack_wait + TAKE_OVER_MARGIN
}

/// How long a watcher must itself have read a stale claim unchanged before it takes it over
/// (unless its holder was an earlier process of the watcher's own worker, which is dead). A
/// claim goes stale by the server's clock during a server-wide outage too, while its holder,
/// paused, keeps trying to write it: once the server answers, the holder's next try lands
/// within a retry interval plus one try's limit (`claim_heartbeat`).
pub const WATCHED_SILENCE: Duration = Duration::from_secs(2);

/// A running claim a watcher has seen: its revision, how old that revision was by the
/// server's clock when first seen, when (on the watcher's clock) that was, and whether its
/// holder was an earlier process of the watcher's own worker.
#[derive(Debug, Clone, Copy)]
struct Watched {
    revision: u64,
    silent_at_sight: Duration,
    sighted: Instant,
    earlier_process: bool,
}

impl Watched {
    /// How long until the claim may be taken over (zero when it may).
    fn due_in(&self, ack_wait: Duration) -> Duration {
        let watched = self.sighted.elapsed();
        take_over_due_in(
            self.silent_at_sight + watched,
            watched,
            ack_wait,
            self.earlier_process,
        )
    }
}

/// Pure rule: a claim silent for `silent` by the server's clock, which the watcher has read
/// unchanged for `watched`, is taken over in this long (zero: now). A dead earlier process
/// of the watcher's own worker is not waited for beyond its deadline.
fn take_over_due_in(
    silent: Duration,
    watched: Duration,
    ack_wait: Duration,
    earlier_process: bool,
) -> Duration {
    let stale_in = stale_after(ack_wait).saturating_sub(silent);
    if earlier_process {
        stale_in
    } else {
        stale_in.max(WATCHED_SILENCE.saturating_sub(watched))
    }
}

/// The claim key of a dispatch (`run:gen:round:exec`), under its role (`exec`, `audit`):
/// `<role>.<dispatch>` with every character outside `[A-Za-z0-9-]` written as `_XX` (hex),
/// so any dispatch id is a valid, distinct KV key.
pub fn claim_key(role: &str, dispatch: &str) -> String {
    let mut key = String::with_capacity(role.len() + 1 + dispatch.len() * 2);
    key.push_str(role);
    key.push('.');
    for byte in dispatch.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' {
            key.push(char::from(byte));
        } else {
            key.push_str(&format!("_{byte:02X}"));
        }
    }
    key
}

/// A holder name no other episode has: the worker, this process, a counter.
fn holder_name(worker: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}{}",
        process_prefix(worker),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// What the holder names of this process of `worker` start with.
fn process_prefix(worker: &str) -> String {
    format!("{worker}/{}/", std::process::id())
}

/// Pure rule: is `holder` an earlier process of `worker` (its name, another process id)?
fn is_earlier_process(holder: &str, worker: &str, this_process: &str) -> bool {
    holder
        .strip_prefix(worker)
        .is_some_and(|rest| rest.starts_with('/'))
        && !holder.starts_with(this_process)
}

/// `fut` within the bus's request timeout; its own error is left to the caller, who tells
/// the expected ones (a key that exists, a stale revision) from failures.
async fn within<T>(
    bus: &Bus,
    operation: ClaimErrorKind,
    fut: impl std::future::Future<Output = T>,
) -> Result<T, BusError> {
    let after = bus.request_timeout();
    tokio::time::timeout(after, fut)
        .await
        .map_err(|_| BusError::Timeout {
            op: operation.op(),
            after,
        })
}

/// The claims of one worker process (cheap to clone).
#[derive(Debug, Clone)]
pub struct EpisodeClaims {
    bus: Bus,
    worker: String,
    ack_wait: Duration,
    store: Arc<OnceCell<kv::Store>>,
}

/// How a claim ended up.
#[derive(Debug)]
pub enum Claimed {
    /// This worker runs the episode; keep the guard while it runs.
    Owned(Box<ClaimGuard>),
    /// The step has finished already: publish this again and ack, do not redo the work.
    Finished(StoredResult),
}

impl EpisodeClaims {
    /// Claims of `worker`'s episodes, whose deliveries are redelivered after `ack_wait`.
    pub fn new(bus: Bus, worker: &str, ack_wait: Duration) -> EpisodeClaims {
        EpisodeClaims {
            bus,
            worker: worker.to_string(),
            ack_wait,
            store: Arc::new(OnceCell::new()),
        }
    }

    async fn store(&self) -> Result<&kv::Store, BusError> {
        self.store
            .get_or_try_init(|| {
                with_timeout(
                    ClaimErrorKind::OpenBucket,
                    self.bus.request_timeout(),
                    self.bus
                        .jetstream()
                        .get_key_value(loopgate_protocol::subjects::EPISODE_BUCKET),
                )
            })
            .await
    }

    async fn entry(&self, key: &str) -> Result<Option<kv::Entry>, BusError> {
        let store = self.store().await?;
        with_timeout(
            ClaimErrorKind::Read,
            self.bus.request_timeout(),
            store.entry(key),
        )
        .await
    }

    /// Claim `key` for a new episode, or learn that its step has finished. A claim held by
    /// a live episode elsewhere is waited on; `stop` (the delivery lost, shutdown) ends the
    /// wait with `Ok(None)`. An error means NATS could not be asked: hand the delivery back.
    pub async fn claim(
        &self,
        key: &str,
        stop: &CancellationToken,
    ) -> Result<Option<Claimed>, BusError> {
        let holder = holder_name(&self.worker);
        let running = Record::Running {
            holder: holder.clone(),
        };
        let value: bytes::Bytes = serde_json::to_vec(&running)?.into();
        let every = progress_interval(self.ack_wait);
        // The running revision this watcher has seen, and how old it is.
        let mut watched: Option<Watched> = None;
        loop {
            let entry = self.entry(key).await?;
            let revision = entry.as_ref().map_or(0, |e| e.revision);
            // The claim write is sent after this instant: the holder's own deadline counts
            // from it.
            let sent = Instant::now();
            let seen = seen(entry.as_ref());
            let earlier_process = matches!(&seen, Seen::Running { holder }
                if is_earlier_process(holder, &self.worker, &process_prefix(&self.worker)));
            let taken = match next(seen) {
                Next::Republish(result) => return Ok(Some(Claimed::Finished(result))),
                Next::Create => self.create(key, value.clone()).await?,
                Next::Take => self.take(key, value.clone(), revision).await?,
                Next::Watch => match watched {
                    Some(w) if w.revision == revision && w.due_in(self.ack_wait).is_zero() => {
                        tracing::warn!(
                            key,
                            silent = ?(w.silent_at_sight + w.sighted.elapsed()),
                            "the episode holding this step went silent; taking it over"
                        );
                        self.take(key, value.clone(), revision).await?
                    }
                    Some(w) if w.revision == revision => None,
                    _ => {
                        let silent = match entry.as_ref() {
                            Some(entry) => self.silent_for(key, entry).await,
                            None => Duration::ZERO,
                        };
                        tracing::info!(
                            key,
                            ?silent,
                            "another episode of this step is running; waiting for it instead of starting a second"
                        );
                        watched = Some(Watched {
                            revision,
                            silent_at_sight: silent,
                            sighted: Instant::now(),
                            earlier_process,
                        });
                        None
                    }
                },
            };
            if let Some(revision) = taken {
                return Ok(Some(Claimed::Owned(Box::new(ClaimGuard::start(
                    self.clone(),
                    key.to_string(),
                    holder,
                    revision,
                    sent,
                )))));
            }
            // Look again after a heartbeat interval, or right when the claim turns stale.
            let pause = watched.map_or(every, |w| every.min(w.due_in(self.ack_wait)));
            tokio::select! {
                () = stop.cancelled() => return Ok(None),
                () = tokio::time::sleep(pause) => {}
            }
        }
    }

    /// How old `entry` is by the server's clock: the stamp of a probe key written now, less
    /// the entry's stamp. Zero when the probe fails (the watch then counts from now, which
    /// only waits longer).
    async fn silent_for(&self, key: &str, entry: &kv::Entry) -> Duration {
        match self.server_stamp_now(key).await {
            Ok(probe) => {
                let age = probe.created - entry.created;
                u64::try_from(age.whole_milliseconds())
                    .map(Duration::from_millis)
                    .unwrap_or(Duration::ZERO)
            }
            Err(err) => {
                tracing::warn!(error = %err, "reading the server's clock failed; the watch counts from now");
                Duration::ZERO
            }
        }
    }

    /// A probe key of this worker's, written now and read back: its stamp is the server's now.
    /// It sits under the role of `claim` (`exec.`, `audit.`), the only keys a role's NATS user
    /// may write, named so that no dispatch id (`run:generation:...`) can be it.
    async fn server_stamp_now(&self, claim: &str) -> Result<kv::Entry, BusError> {
        let store = self.store().await?;
        let role = claim.split('.').next().unwrap_or("exec");
        let key = claim_key(role, &format!("clock:{}", self.worker));
        within(
            &self.bus,
            ClaimErrorKind::Update,
            store.put(&key, bytes::Bytes::new()),
        )
        .await?
        .map_err(|err| ClaimErrorKind::Update.failed(err.into()))?;
        self.entry(&key).await?.ok_or_else(|| {
            ClaimErrorKind::Read.failed(
                std::io::Error::other("the clock probe was written but reads back absent").into(),
            )
        })
    }

    /// Create-if-absent: `Some(revision)` when this worker got it, `None` when another did.
    async fn create(&self, key: &str, value: bytes::Bytes) -> Result<Option<u64>, BusError> {
        let store = self.store().await?;
        match within(&self.bus, ClaimErrorKind::Create, store.create(key, value)).await? {
            Ok(revision) => Ok(Some(revision)),
            Err(err) if err.kind() == kv::CreateErrorKind::AlreadyExists => Ok(None),
            Err(err) => Err(ClaimErrorKind::Create.failed(err.into())),
        }
    }

    /// Compare-and-set over `revision`: `None` when someone else wrote first.
    async fn take(
        &self,
        key: &str,
        value: bytes::Bytes,
        revision: u64,
    ) -> Result<Option<u64>, BusError> {
        let store = self.store().await?;
        let update = store.update(key, value, revision);
        match within(&self.bus, ClaimErrorKind::Update, update).await? {
            Ok(revision) => Ok(Some(revision)),
            Err(err) if err.kind() == kv::UpdateErrorKind::WrongLastRevision => Ok(None),
            Err(err) => Err(ClaimErrorKind::Update.failed(err.into())),
        }
    }

    /// Write `record` over this holder's claim: compare-and-set over the last revision it
    /// knows, re-reading once when that is stale (a heartbeat that landed but whose answer
    /// was lost). `Ok(None)` when another holder has the key now.
    async fn write_own(
        &self,
        key: &str,
        holder: &str,
        revision: u64,
        record: &Record,
    ) -> Result<Option<u64>, BusError> {
        let value: bytes::Bytes = serde_json::to_vec(record)?.into();
        if let Some(revision) = self.take(key, value.clone(), revision).await? {
            return Ok(Some(revision));
        }
        let entry = self.entry(key).await?;
        match (seen(entry.as_ref()), entry) {
            (Seen::Running { holder: now }, Some(entry)) if now == holder => {
                self.take(key, value, entry.revision).await
            }
            _ => Ok(None),
        }
    }
}

/// A claim held by a running episode: heartbeats until finished, released or dropped.
#[derive(Debug)]
pub struct ClaimGuard {
    claims: EpisodeClaims,
    key: String,
    holder: String,
    revision: Arc<Mutex<u64>>,
    /// `true` while no heartbeat has reached NATS for `ack_wait`.
    paused: watch::Receiver<bool>,
    taken_over: CancellationToken,
    /// Set once the episode's own work is done and only storing its result is left.
    storing: Arc<AtomicBool>,
    heartbeat: JoinHandle<()>,
}

/// How recording a finished episode went.
#[derive(Debug, PartialEq, Eq)]
pub enum Recorded {
    /// Stored: a redelivery republishes it.
    Stored,
    /// Another episode has taken the step over: do not publish, do not settle.
    TakenOver,
}

impl ClaimGuard {
    /// `sent`: when the write that won the claim was sent (its deadline counts from there).
    fn start(
        claims: EpisodeClaims,
        key: String,
        holder: String,
        revision: u64,
        sent: Instant,
    ) -> ClaimGuard {
        let revision = Arc::new(Mutex::new(revision));
        let taken_over = CancellationToken::new();
        let (pause, paused) = watch::channel(false);
        let storing = Arc::new(AtomicBool::new(false));
        let beat = Heartbeat {
            claims: claims.clone(),
            key: key.clone(),
            holder: holder.clone(),
            revision: revision.clone(),
            pause,
            taken_over: taken_over.clone(),
            storing: storing.clone(),
        };
        let heartbeat = tokio::spawn(heartbeat_loop(beat, sent).in_current_span());
        ClaimGuard {
            claims,
            key,
            holder,
            revision,
            paused,
            taken_over,
            storing,
            heartbeat,
        }
    }

    /// `true` while the episode must start nothing new: no heartbeat has reached NATS for
    /// `ack_wait` (another worker may take the step over once it is stale). It turns `false`
    /// again when a heartbeat lands over the claim's last revision; if another worker took the
    /// step over meanwhile, [`ClaimGuard::taken_over`] fires instead.
    pub fn paused(&self) -> watch::Receiver<bool> {
        self.paused.clone()
    }

    /// Whether another episode has taken the step over (then the delivery is its, too).
    pub fn is_taken_over(&self) -> bool {
        self.taken_over.is_cancelled()
    }

    /// Fires when another episode has taken the step over: the episode must stop.
    pub fn taken_over(&self) -> &CancellationToken {
        &self.taken_over
    }

    /// The episode's own work is done (no more model calls or tool runs) and only storing
    /// its result over NATS is left: it is not paused any more (see [`ClaimGuard::paused`]).
    /// Its next heartbeat that lands (compare-and-set over its last revision) keeps the claim
    /// unless another episode took it over meanwhile, which [`ClaimGuard::taken_over`] then
    /// says.
    pub fn only_storing(&self) {
        self.storing.store(true, Ordering::SeqCst);
    }

    /// Store the finished episode's result in the claim, retrying while NATS is away for up
    /// to `patience`, before it is published: from then on a redelivery republishes it.
    pub async fn finish(
        self,
        result: &StoredResult,
        patience: Duration,
    ) -> Result<Recorded, BusError> {
        self.heartbeat.abort();
        let record = Record::Finished {
            holder: self.holder.clone(),
            result: result.clone(),
        };
        let revision = *self.revision.lock().await;
        let written = crate::runtime::retry_with_patience(
            "episode claim finish",
            patience,
            &CancellationToken::new(),
            BusError::is_retryable,
            || {
                self.claims
                    .write_own(&self.key, &self.holder, revision, &record)
            },
        )
        .await?;
        Ok(match written.flatten() {
            Some(_) => Recorded::Stored,
            None => Recorded::TakenOver,
        })
    }

    /// The episode stopped without a result: free the step for the next delivery at once
    /// (best effort: a claim left running is taken over once it is stale).
    pub async fn release(self) {
        self.heartbeat.abort();
        if self.taken_over.is_cancelled() {
            return;
        }
        let record = Record::Released {
            holder: self.holder.clone(),
        };
        let revision = *self.revision.lock().await;
        if let Err(err) = self
            .claims
            .write_own(&self.key, &self.holder, revision, &record)
            .await
        {
            tracing::debug!(key = %self.key, error = %err, "releasing the episode claim failed; it goes stale instead");
        }
    }
}

impl Drop for ClaimGuard {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

#[path = "claim_heartbeat.rs"]
mod claim_heartbeat;
#[cfg(test)]
use claim_heartbeat::{beat_limit, must_pause, next_beat, PAUSED_RETRY, PAUSED_TRY_LIMIT};
use claim_heartbeat::{heartbeat_loop, Heartbeat};

#[path = "earlier_claims.rs"]
mod earlier_claims;

#[cfg(test)]
#[path = "episode_claim_tests.rs"]
mod tests;
