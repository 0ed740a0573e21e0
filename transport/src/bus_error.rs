//! What a bus operation fails with: [`BusError`], one variant per family of operations. A NATS
//! failure is a [`NatsError`] whose kind says which operation failed (callers match on it) and
//! which keeps the client's own error as its source: the shape of async-nats's `Error<Kind>`.

use std::fmt;
use std::time::Duration;

/// The client's error behind a failure.
pub type BoxedSource = Box<dyn std::error::Error + Send + Sync>;

#[derive(Debug, thiserror::Error)]
pub enum BusError {
    /// `url` without its credentials (`loopgate_common::redact`).
    #[error("connecting to NATS at {url}: {reason}")]
    Connect { url: String, reason: String },
    #[error("invalid bus options: {0}")]
    Config(String),
    #[error("{op} timed out after {after:?}")]
    Timeout { op: &'static str, after: Duration },
    /// A JetStream publish that got no positive PubAck.
    #[error("publish to '{subject}' was not acknowledged: {source}")]
    Publish {
        subject: String,
        #[source]
        source: PublishError,
    },
    /// Core NATS: publish, subscribe, flush.
    #[error(transparent)]
    Core(CoreError),
    /// A durable work consumer: bind, create, look up, pull.
    #[error(transparent)]
    Consumer(ConsumerError),
    /// Settling one delivery: ack, nak, term, progress.
    #[error(transparent)]
    Ack(AckError),
    /// Streams and buckets: ensure, look up, resize.
    #[error(transparent)]
    Topology(TopologyError),
    /// Messages of a work stream read back: stream look-up, get, delete.
    #[error(transparent)]
    Stream(StreamError),
    /// The episode-claim bucket: open, read, create, update.
    #[error(transparent)]
    Claim(ClaimError),
    #[error("encoding JSON: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("unexpected JetStream message: {0}")]
    Protocol(String),
}

impl BusError {
    /// Whether the same call may succeed later: the server was unreachable, slow or refused
    /// for now (every NATS failure kind: a missing durable or bucket is created by the
    /// manager, a full stream drains). Bad options, encoding and protocol errors stay what
    /// they are.
    pub fn is_retryable(&self) -> bool {
        match self {
            BusError::Connect { .. }
            | BusError::Timeout { .. }
            | BusError::Publish { .. }
            | BusError::Core(_)
            | BusError::Consumer(_)
            | BusError::Ack(_)
            | BusError::Topology(_)
            | BusError::Stream(_)
            | BusError::Claim(_) => true,
            BusError::Config(_) | BusError::Encode(_) | BusError::Protocol(_) => false,
        }
    }
}

/// A failed NATS operation: its kind, and the client's error when there is one.
#[derive(Debug)]
pub struct NatsError<Kind> {
    kind: Kind,
    source: Option<BoxedSource>,
}

impl<Kind: Copy> NatsError<Kind> {
    pub fn new(kind: Kind, source: impl Into<BoxedSource>) -> Self {
        NatsError {
            kind,
            source: Some(source.into()),
        }
    }

    pub fn without_source(kind: Kind) -> Self {
        NatsError { kind, source: None }
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }
}

impl<Kind: fmt::Display> fmt::Display for NatsError<Kind> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.source {
            Some(source) => write!(f, "{}: {source}", self.kind),
            None => write!(f, "{}", self.kind),
        }
    }
}

impl<Kind: fmt::Debug + fmt::Display> std::error::Error for NatsError<Kind> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|boxed| boxed.as_ref() as &(dyn std::error::Error + 'static))
    }
}

/// Why a JetStream publish got no positive PubAck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishErrorKind {
    /// No stream captures the subject.
    NoStream,
    /// The stream refused the message (an expected sequence or id that did not match, too
    /// many pending acks, a message over the server's payload limit).
    Refused,
    /// JetStream answered with an error of its own (e.g. `insufficient storage resources`,
    /// err_code 10047); the source is the server's text. Retryable: space may be freed.
    Rejected,
    /// The message could not be sent, or its answer could not be read.
    Send,
    /// No PubAck within the request timeout.
    TimedOut,
}

impl fmt::Display for PublishErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PublishErrorKind::NoStream => "no stream captures the subject",
            PublishErrorKind::Refused => "refused by the stream",
            PublishErrorKind::Rejected => "JetStream answered with an error",
            PublishErrorKind::Send => "not sent",
            PublishErrorKind::TimedOut => "no PubAck in time",
        })
    }
}

impl PublishErrorKind {
    /// The kind of an async-nats publish error: an error reply of JetStream's own (its
    /// source is the server's error) is `Rejected`.
    pub(crate) fn of(err: &async_nats::jetstream::context::PublishError) -> Self {
        use async_nats::jetstream::context::PublishErrorKind as Nats;
        let server_error = std::error::Error::source(err)
            .is_some_and(|source| source.is::<async_nats::jetstream::Error>());
        match err.kind() {
            Nats::Other if server_error => PublishErrorKind::Rejected,
            Nats::StreamNotFound => PublishErrorKind::NoStream,
            Nats::WrongLastMessageId
            | Nats::WrongLastSequence
            | Nats::MaxAckPending
            | Nats::MaxPayloadExceeded => PublishErrorKind::Refused,
            Nats::TimedOut => PublishErrorKind::TimedOut,
            Nats::BrokenPipe | Nats::Other => PublishErrorKind::Send,
        }
    }
}

pub type PublishError = NatsError<PublishErrorKind>;

/// One operation of a family: the words it goes by (in a timeout, and "<op> failed") and how
/// its failure becomes a [`BusError`].
pub(crate) trait Operation: Copy {
    fn op(self) -> &'static str;
    fn failed(self, source: BoxedSource) -> BusError;
}

/// A family of operations: its kind enum (each kind naming its operation in words), its
/// `NatsError` alias and its `BusError` variant.
macro_rules! operations {
    ($(#[$doc:meta])* $kind:ident, $alias:ident, $variant:ident { $($(#[$vdoc:meta])* $name:ident => $op:literal),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $kind {
            $($(#[$vdoc])* $name),+
        }

        impl $kind {
            /// The operation in words.
            pub fn op(self) -> &'static str {
                match self {
                    $($kind::$name => $op),+
                }
            }
        }

        impl fmt::Display for $kind {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{} failed", self.op())
            }
        }

        pub type $alias = NatsError<$kind>;

        impl Operation for $kind {
            fn op(self) -> &'static str {
                $kind::op(self)
            }

            fn failed(self, source: BoxedSource) -> BusError {
                BusError::$variant(NatsError::new(self, source))
            }
        }
    };
}

operations!(
    /// A core NATS operation.
    CoreErrorKind, CoreError, Core {
        Publish => "core publish",
        Subscribe => "subscribe",
        Flush => "flush",
    }
);

operations!(
    /// An operation on a durable work consumer.
    ConsumerErrorKind, ConsumerError, Consumer {
        /// Binding an existing durable (it may not exist yet).
        Bind => "bind consumer",
        /// Creating (or updating) the durable.
        Create => "create consumer",
        /// Looking up the `audit` durable's settings.
        Info => "audit consumer info",
        /// Asking for the next message.
        PullRequest => "pull request",
        /// Receiving it.
        Pull => "pull",
    }
);

operations!(
    /// Settling one delivery.
    AckErrorKind, AckError, Ack {
        Ack => "ack",
        Nak => "nak",
        Term => "term",
        Progress => "progress ack",
    }
);

operations!(
    /// Creating, looking up or sizing the deployment's streams and buckets.
    TopologyErrorKind, TopologyError, Topology {
        Stream => "ensure stream",
        SnapshotBucket => "ensure snapshot bucket",
        EvidenceBucket => "ensure evidence bucket",
        EpisodeBucket => "ensure episode bucket",
        BucketInfo => "bucket stream info",
        ResizeBucket => "resize bucket",
    }
);

operations!(
    /// Reading back or removing a message of a work stream.
    StreamErrorKind, StreamError, Stream {
        Lookup => "stream lookup",
        GetMessage => "get work message",
        DeleteMessage => "delete work message",
    }
);

operations!(
    /// The episode-claim bucket (`lg-episodes`).
    ClaimErrorKind, ClaimError, Claim {
        OpenBucket => "episode bucket",
        Read => "episode claim read",
        Create => "episode claim",
        Update => "episode claim update",
    }
);

/// A failure that happened to a named thing (a stream), keeping the client's error.
#[derive(Debug, thiserror::Error)]
#[error("{name}: {source}")]
pub(crate) struct Named {
    pub(crate) name: String,
    #[source]
    pub(crate) source: BoxedSource,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_failure_reads_as_its_operation_and_keeps_its_source() {
        let err = ConsumerErrorKind::Bind.failed("consumer not found".into());
        assert_eq!(err.to_string(), "bind consumer failed: consumer not found");
        assert!(err.is_retryable());
        match &err {
            BusError::Consumer(inner) => {
                assert_eq!(inner.kind(), ConsumerErrorKind::Bind);
                let source = std::error::Error::source(inner).map(ToString::to_string);
                assert_eq!(source.as_deref(), Some("consumer not found"));
            }
            other => panic!("{other:?}"),
        }
        let publish = BusError::Publish {
            subject: "loopgate.exec.cli".into(),
            source: PublishError::without_source(PublishErrorKind::TimedOut),
        };
        assert_eq!(
            publish.to_string(),
            "publish to 'loopgate.exec.cli' was not acknowledged: no PubAck in time"
        );
        assert!(publish.is_retryable());
        assert!(!BusError::Protocol("x".into()).is_retryable());
    }

    /// JetStream's error reply when its store has no room for a stream.
    fn storage_full() -> async_nats::jetstream::Error {
        serde_json::from_str(
            r#"{"code": 500, "err_code": 10047, "description": "insufficient storage resources available"}"#,
        )
        .unwrap()
    }

    #[test]
    fn an_error_reply_of_jetstream_is_rejected_with_the_servers_text() {
        use async_nats::jetstream::context::{PublishError as Nats, PublishErrorKind as N};
        let parse = serde_json::from_str::<u32>("x").unwrap_err();
        for (err, want) in [
            (
                Nats::with_source(N::Other, storage_full()),
                PublishErrorKind::Rejected,
            ),
            (Nats::with_source(N::Other, parse), PublishErrorKind::Send),
            (Nats::new(N::TimedOut), PublishErrorKind::TimedOut),
            (Nats::new(N::StreamNotFound), PublishErrorKind::NoStream),
            (Nats::new(N::BrokenPipe), PublishErrorKind::Send),
            (Nats::new(N::WrongLastSequence), PublishErrorKind::Refused),
        ] {
            assert_eq!(PublishErrorKind::of(&err), want, "{err}");
        }
        let rejected = BusError::Publish {
            subject: "loopgate.exec.cli".into(),
            source: PublishError::new(
                PublishErrorKind::Rejected,
                Nats::with_source(N::Other, storage_full()),
            ),
        };
        assert_eq!(
            rejected.to_string(),
            "publish to 'loopgate.exec.cli' was not acknowledged: JetStream answered with an \
             error: publish failed: insufficient storage resources available (code 500, error \
             code 10047)"
        );
        assert!(rejected.is_retryable());
    }
}
