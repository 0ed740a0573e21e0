//! NATS JetStream bus: connection, publishing and plain subscriptions. The streams, buckets
//! and the `audit` durable are created in `topology.rs`; durable work consumers live in
//! `work_consumer.rs`.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_nats::header::{HeaderMap, HeaderName, HeaderValue};
use async_nats::jetstream::{self, message::PublishMessage};
use loopgate_common::redact::redact_urls_in;
use loopgate_protocol::subjects::Subjects;
use serde::Serialize;

use crate::bus_error::{
    BoxedSource, BusError, CoreErrorKind, Operation, PublishError, PublishErrorKind,
};
use crate::publish_watch::{Outcome, PublishWatch};

/// Plain core-NATS subscription (events, control). A `futures::Stream` of `async_nats::Message`.
pub use async_nats::Subscriber;

/// How long JetStream remembers a `Nats-Msg-Id` to drop duplicates.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
/// How long run events are kept in `LG_EVENTS`.
pub const EVENTS_MAX_AGE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Run `fut` with a deadline: its error becomes `operation`'s failure, expiry
/// `BusError::Timeout`.
pub(crate) async fn with_timeout<T, E, O>(
    operation: O,
    after: Duration,
    fut: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, BusError>
where
    E: Into<BoxedSource>,
    O: Operation,
{
    match tokio::time::timeout(after, fut).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(err)) => Err(operation.failed(err.into())),
        Err(_) => Err(BusError::Timeout {
            op: operation.op(),
            after,
        }),
    }
}

// async-nats panics on invalid header names/values given as &str; parse them instead.
fn parse_header_name(name: &str) -> Result<HeaderName, BusError> {
    HeaderName::from_str(name)
        .map_err(|_| BusError::Config(format!("invalid header name '{name}'")))
}

fn parse_header_value(value: &str) -> Result<HeaderValue, BusError> {
    HeaderValue::from_str(value).map_err(|_| {
        BusError::Config(format!(
            "invalid header value '{value}' (CR/LF not allowed)"
        ))
    })
}

/// Connection settings. At most one of `creds_file`, `user`/`password`, `token` may be set.
#[derive(Debug, Clone)]
pub struct BusOptions {
    /// Bound on establishing the initial TCP + NATS handshake.
    pub connect_timeout: Duration,
    /// Bound on every JetStream API request, publish ack and double ack.
    pub request_timeout: Duration,
    /// Connection name shown in server monitoring.
    pub name: Option<String>,
    pub user: Option<String>,
    pub password: Option<String>,
    /// NATS `.creds` file (JWT + nkey seed) for per-role users.
    pub creds_file: Option<PathBuf>,
    pub token: Option<String>,
    /// Prefix of this connection's reply subjects. `None`: `_INBOX_<user>` when `user` is a
    /// plain subject token (so per-user permissions can give each role an inbox nobody else
    /// may subscribe to, see deploy/nats/), else the NATS default `_INBOX`.
    pub inbox_prefix: Option<String>,
}

/// The inbox prefix a connection as `user` gets by default: `_INBOX_<user>`, when the name is
/// a plain subject token (letters, digits, `-`, `_`).
pub fn inbox_prefix_for_user(user: &str) -> Option<String> {
    let plain = !user.is_empty()
        && user
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    plain.then(|| format!("_INBOX_{user}"))
}

impl Default for BusOptions {
    fn default() -> Self {
        BusOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(10),
            name: None,
            user: None,
            password: None,
            creds_file: None,
            token: None,
            inbox_prefix: None,
        }
    }
}

impl BusOptions {
    async fn to_connect_options(&self) -> Result<async_nats::ConnectOptions, BusError> {
        let mut options = async_nats::ConnectOptions::new()
            .connection_timeout(self.connect_timeout)
            .request_timeout(Some(self.request_timeout));
        if let Some(name) = &self.name {
            options = options.name(name);
        }
        let inbox = self
            .inbox_prefix
            .clone()
            .or_else(|| self.user.as_deref().and_then(inbox_prefix_for_user));
        if let Some(prefix) = inbox {
            if prefix.is_empty() || prefix.contains(['*', '>', ' ']) || prefix.ends_with('.') {
                return Err(BusError::Config(format!("invalid inbox prefix '{prefix}'")));
            }
            options = options.custom_inbox_prefix(prefix);
        }
        let user_pass = match (&self.user, &self.password) {
            (Some(user), Some(password)) => Some((user.clone(), password.clone())),
            (None, None) => None,
            _ => {
                return Err(BusError::Config(
                    "user and password must be set together".into(),
                ))
            }
        };
        let methods = usize::from(user_pass.is_some())
            + usize::from(self.creds_file.is_some())
            + usize::from(self.token.is_some());
        if methods > 1 {
            return Err(BusError::Config(
                "set only one of creds_file, user/password, token".into(),
            ));
        }
        if let Some((user, password)) = user_pass {
            options = options.user_and_password(user, password);
        }
        if let Some(token) = &self.token {
            options = options.token(token.clone());
        }
        if let Some(path) = &self.creds_file {
            options = options.credentials_file(path).await.map_err(|err| {
                BusError::Config(format!("reading creds file {}: {err}", path.display()))
            })?;
        }
        Ok(options)
    }
}

/// The servers of a `[nats] url`: one URL, or several separated by commas (blanks ignored).
fn server_list(url: &str) -> Vec<&str> {
    url.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect()
}

/// A connected NATS client plus JetStream context and subject names. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Bus {
    client: async_nats::Client,
    js: jetstream::Context,
    subjects: Subjects,
    request_timeout: Duration,
    topology: crate::sizing::TopologyOptions,
    /// What this connection's JetStream publishes came to (shared by its clones).
    publish_watch: Arc<Mutex<PublishWatch>>,
}

impl Bus {
    /// Connect to `url` (e.g. `nats://127.0.0.1:4222`), or to any of several comma-separated
    /// URLs (the nodes of a cluster: `nats://a:4222,nats://b:4222`). Fails fast if no server is
    /// reachable within `opts.connect_timeout`; afterwards the client reconnects on its own, to
    /// any listed node or any node the cluster announces.
    pub async fn connect(url: &str, prefix: &str, opts: BusOptions) -> Result<Bus, BusError> {
        let servers = server_list(url);
        let connect_options = opts.to_connect_options().await?;
        // The handshake is bounded by connection_timeout; the outer bound covers DNS and retries.
        let bound = opts.connect_timeout.saturating_mul(2);
        let client = match tokio::time::timeout(bound, connect_options.connect(servers)).await {
            Ok(Ok(client)) => client,
            Ok(Err(err)) => {
                return Err(BusError::Connect {
                    url: redact_urls_in(url),
                    reason: redact_urls_in(&err.to_string()),
                })
            }
            Err(_) => {
                return Err(BusError::Connect {
                    url: redact_urls_in(url),
                    reason: format!("timed out after {bound:?}"),
                })
            }
        };
        let js = jetstream::ContextBuilder::new()
            .timeout(opts.request_timeout)
            .build(client.clone());
        Ok(Bus {
            client,
            js,
            subjects: Subjects::new(prefix),
            request_timeout: opts.request_timeout,
            topology: crate::sizing::TopologyOptions::default(),
            publish_watch: Arc::new(Mutex::new(PublishWatch::new(opts.request_timeout))),
        })
    }

    /// The sizing [`Bus::ensure_topology`] creates streams and buckets with and keeps them at
    /// (the manager's `[jetstream]` keys). The default enforces nothing.
    pub fn with_topology(mut self, topology: crate::sizing::TopologyOptions) -> Bus {
        self.topology = topology;
        self
    }

    pub fn topology(&self) -> crate::sizing::TopologyOptions {
        self.topology
    }

    pub fn subjects(&self) -> &Subjects {
        &self.subjects
    }

    /// Whether the client holds a live connection now (it reconnects on its own otherwise).
    pub fn is_connected(&self) -> bool {
        self.client.connection_state() == async_nats::connection::State::Connected
    }

    pub fn client(&self) -> &async_nats::Client {
        &self.client
    }

    pub fn jetstream(&self) -> &jetstream::Context {
        &self.js
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// `Err(why)` while this connection's JetStream publishes to some subject have gone
    /// unacknowledged for two request timeouts or longer (no PubAck: a store on a full disk,
    /// an overloaded server; or an error reply), until one to that subject is acknowledged.
    /// For a `/readyz` reason.
    pub fn publish_stall(&self) -> Result<(), String> {
        match self.publish_watch.lock() {
            Ok(watch) => watch.verdict(Instant::now()),
            Err(_) => Err("publish watch poisoned".into()),
        }
    }

    /// How long the longest-unacknowledged subject has gone without a PubAck (zero if none).
    pub fn publish_unacked_for(&self) -> Duration {
        self.publish_watch
            .lock()
            .map(|watch| watch.unacked_for(Instant::now()))
            .unwrap_or_default()
    }

    /// JetStream publish with `Nats-Msg-Id` (dedup within `DUPLICATE_WINDOW`); waits for the
    /// stream's PubAck. A duplicate publish succeeds without storing a second message.
    pub async fn publish_json<T: Serialize + ?Sized>(
        &self,
        subject: &str,
        value: &T,
        msg_id: &str,
        headers: &[(&str, &str)],
    ) -> Result<(), BusError> {
        let payload = serde_json::to_vec(value)?;
        self.publish_bytes(subject, payload, msg_id, headers).await
    }

    /// [`Bus::publish_json`] of bytes as they are (e.g. a dead letter's original payload).
    pub async fn publish_bytes(
        &self,
        subject: &str,
        payload: Vec<u8>,
        msg_id: &str,
        headers: &[(&str, &str)],
    ) -> Result<(), BusError> {
        let started = Instant::now();
        let result = self.publish_once(subject, payload, msg_id, headers).await;
        let rejected;
        let outcome = match &result {
            Ok(()) => Some(Outcome::Acked),
            Err(BusError::Publish { source, .. }) => match source.kind() {
                PublishErrorKind::TimedOut => Some(Outcome::NoAck),
                PublishErrorKind::Rejected => {
                    rejected = source.to_string();
                    Some(Outcome::Rejected(&rejected))
                }
                PublishErrorKind::NoStream | PublishErrorKind::Refused | PublishErrorKind::Send => {
                    None
                }
            },
            Err(_) => None,
        };
        if let Some(outcome) = outcome {
            if let Ok(mut watch) = self.publish_watch.lock() {
                watch.record(subject, started, outcome, Instant::now());
            }
        }
        result
    }

    async fn publish_once(
        &self,
        subject: &str,
        payload: Vec<u8>,
        msg_id: &str,
        headers: &[(&str, &str)],
    ) -> Result<(), BusError> {
        let mut header_map = HeaderMap::new();
        header_map.insert(
            async_nats::header::NATS_MESSAGE_ID,
            parse_header_value(msg_id)?,
        );
        for (name, value) in headers {
            header_map.insert(parse_header_name(name)?, parse_header_value(value)?);
        }
        let message = PublishMessage::build()
            .payload(payload.into())
            .headers(header_map);
        let publish_error = |source: PublishError| BusError::Publish {
            subject: subject.to_string(),
            source,
        };
        let failed = |err: async_nats::jetstream::context::PublishError| {
            publish_error(PublishError::new(PublishErrorKind::of(&err), err))
        };
        let ack_future = match tokio::time::timeout(
            self.request_timeout,
            self.js.send_publish(subject.to_string(), message),
        )
        .await
        {
            Ok(Ok(ack_future)) => ack_future,
            Ok(Err(err)) => return Err(failed(err)),
            Err(_) => {
                return Err(publish_error(PublishError::new(
                    PublishErrorKind::TimedOut,
                    format!("not sent within {:?}", self.request_timeout),
                )))
            }
        };
        match tokio::time::timeout(
            self.request_timeout,
            std::future::IntoFuture::into_future(ack_future),
        )
        .await
        {
            Ok(Ok(ack)) => {
                if ack.duplicate {
                    tracing::debug!(subject, msg_id, "duplicate publish dropped by JetStream");
                }
                Ok(())
            }
            Ok(Err(err)) => Err(failed(err)),
            Err(_) => Err(publish_error(PublishError::new(
                PublishErrorKind::TimedOut,
                format!("no PubAck within {:?}", self.request_timeout),
            ))),
        }
    }

    /// Best-effort core NATS publish (no persistence guarantee beyond the `LG_EVENTS` stream
    /// capturing it when the subject falls under it).
    pub async fn publish_core_json<T: Serialize + ?Sized>(
        &self,
        subject: &str,
        value: &T,
    ) -> Result<(), BusError> {
        let payload = serde_json::to_vec(value)?;
        with_timeout(
            CoreErrorKind::Publish,
            self.request_timeout,
            self.client.publish(subject.to_string(), payload.into()),
        )
        .await
    }

    /// Plain core NATS subscription.
    pub async fn subscribe_core(&self, subject: &str) -> Result<Subscriber, BusError> {
        with_timeout(
            CoreErrorKind::Subscribe,
            self.request_timeout,
            self.client.subscribe(subject.to_string()),
        )
        .await
    }

    /// Wait until everything published so far has reached the server.
    pub async fn flush(&self) -> Result<(), BusError> {
        with_timeout(
            CoreErrorKind::Flush,
            self.request_timeout,
            self.client.flush(),
        )
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::server_list;

    #[test]
    fn a_url_names_one_server_or_several_separated_by_commas() {
        for (url, want) in [
            ("nats://a:4222", vec!["nats://a:4222"]),
            ("nats://a:1,nats://b:2", vec!["nats://a:1", "nats://b:2"]),
            (
                " nats://a:1 , nats://b:2 ,",
                vec!["nats://a:1", "nats://b:2"],
            ),
            ("", vec![]),
        ] {
            assert_eq!(server_list(url), want, "{url:?}");
        }
    }
}
