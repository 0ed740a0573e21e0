//! Where the run store's primary is, and the connection to it: a fixed URL, or the primary the
//! Redis Sentinels name for `master_name`. In the sentinel case an error that may mean the
//! primary moved (unreachable, `READONLY`, `MASTERDOWN`) makes the store ask the sentinels
//! again; when they name another node, and that node says it is a master, the connection is
//! replaced. The failing call itself still fails (its caller retries, as for any retryable
//! error).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use tokio::time::Instant;

use super::error::{bounded, StoreError};

/// Asking the sentinels again sooner than this after the last time is skipped.
const REDISCOVER_INTERVAL: Duration = Duration::from_millis(250);

/// Where to find the run store's primary. Its `Debug` shows no password.
#[derive(Clone, PartialEq, Eq)]
pub enum RedisTarget {
    /// `redis://host:port/db` (or `rediss://`), as configured.
    Url(String),
    /// Ask these sentinels (`host:port`) for the primary of `master_name`; `AUTH` to the data
    /// nodes with `password`, to the sentinels with `sentinel_password`.
    Sentinel {
        sentinels: Vec<String>,
        master_name: String,
        password: Option<String>,
        sentinel_password: Option<String>,
    },
}

impl std::fmt::Debug for RedisTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl RedisTarget {
    /// For logs: the URL without its password, or the sentinels and the name.
    pub fn describe(&self) -> String {
        match self {
            RedisTarget::Url(url) => loopgate_common::redact::redact_url(url),
            RedisTarget::Sentinel {
                sentinels,
                master_name,
                password,
                sentinel_password,
            } => format!(
                "sentinel {master_name} via {}{}{}",
                sentinels.join(","),
                if password.is_some() {
                    " (password)"
                } else {
                    ""
                },
                if sentinel_password.is_some() {
                    " (sentinel password)"
                } else {
                    ""
                }
            ),
        }
    }
}

#[derive(Clone)]
struct Primary {
    /// `host:port` the sentinels named (None for a URL target).
    addr: Option<String>,
    client: redis::Client,
    conn: ConnectionManager,
}

/// The current primary's client and connection, shared by every clone of the store.
#[derive(Clone)]
pub(super) struct Link {
    target: RedisTarget,
    timeout: Duration,
    current: Arc<RwLock<Primary>>,
    /// When the sentinels were last asked; held while asking, so one caller asks at a time.
    asked: Arc<tokio::sync::Mutex<Option<Instant>>>,
}

impl Link {
    pub(super) async fn connect(
        target: RedisTarget,
        timeout: Duration,
    ) -> Result<Link, StoreError> {
        let primary = match &target {
            RedisTarget::Url(url) => open(None, client_for(url, None)?, timeout).await?,
            RedisTarget::Sentinel {
                sentinels,
                master_name,
                password,
                sentinel_password,
            } => {
                let addr = ask_sentinels(
                    sentinels,
                    master_name,
                    sentinel_password.as_deref(),
                    timeout,
                )
                .await?;
                let client = client_for(&format!("redis://{addr}"), password.as_deref())?;
                check_master(&addr, &client, timeout).await?;
                open(Some(addr), client, timeout).await?
            }
        };
        Ok(Link {
            target,
            timeout,
            current: Arc::new(RwLock::new(primary)),
            asked: Arc::new(tokio::sync::Mutex::new(None)),
        })
    }

    fn primary(&self) -> Primary {
        match self.current.read() {
            Ok(p) => p.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    pub(super) fn conn(&self) -> ConnectionManager {
        self.primary().conn
    }

    pub(super) fn client(&self) -> redis::Client {
        self.primary().client
    }

    /// After a failed call: with sentinels, and an error that may mean the primary moved, ask
    /// them where it is now and follow it. Errors here are logged, never returned: the call
    /// that failed reports its own.
    pub(super) async fn after_error(&self, err: &StoreError) {
        let RedisTarget::Sentinel {
            sentinels,
            master_name,
            password,
            sentinel_password,
        } = &self.target
        else {
            return;
        };
        if !err.may_mean_failover() {
            return;
        }
        let Ok(mut asked) = self.asked.try_lock() else {
            return;
        };
        if asked.is_some_and(|at| at.elapsed() < REDISCOVER_INTERVAL) {
            return;
        }
        *asked = Some(Instant::now());
        let asked_now = ask_sentinels(
            sentinels,
            master_name,
            sentinel_password.as_deref(),
            self.timeout,
        )
        .await;
        let addr = match asked_now {
            Ok(addr) => addr,
            Err(e) => {
                tracing::warn!(error = %e, "run store: the sentinels did not name a primary");
                return;
            }
        };
        if self.primary().addr.as_deref() == Some(addr.as_str()) {
            return;
        }
        let client = match client_for(&format!("redis://{addr}"), password.as_deref()) {
            Ok(client) => client,
            Err(e) => {
                tracing::warn!(%addr, error = %e, "run store: the named primary's address is unusable");
                return;
            }
        };
        if let Err(e) = check_master(&addr, &client, self.timeout).await {
            tracing::warn!(%addr, error = %e, "run store: the named primary is not a master (yet)");
            return;
        }
        match open(Some(addr.clone()), client, self.timeout).await {
            Ok(primary) => {
                tracing::warn!(%addr, master_name, "run store: following the new primary");
                if let Ok(mut current) = self.current.write() {
                    *current = primary;
                }
            }
            Err(e) => tracing::warn!(%addr, error = %e, "run store: cannot reach the new primary"),
        }
    }
}

/// A client for `url`, with `password` for `AUTH` when given.
fn client_for(url: &str, password: Option<&str>) -> Result<redis::Client, StoreError> {
    let refused = |source| StoreError::Redis { op: "open", source };
    let mut info = redis::IntoConnectionInfo::into_connection_info(url).map_err(refused)?;
    if let Some(password) = password {
        let settings = info.redis_settings().clone().set_password(password);
        info = info.set_redis_settings(settings);
    }
    redis::Client::open(info).map_err(refused)
}

async fn open(
    addr: Option<String>,
    client: redis::Client,
    timeout: Duration,
) -> Result<Primary, StoreError> {
    let config = ConnectionManagerConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout))
        .set_number_of_retries(3)
        .set_max_delay(Duration::from_secs(2));
    let conn = bounded(
        "connect",
        timeout.saturating_mul(2),
        ConnectionManager::new_with_config(client.clone(), config),
    )
    .await?;
    Ok(Primary { addr, client, conn })
}

/// One short-lived connection through `client`, bounded by `timeout`.
async fn direct(
    client: &redis::Client,
    timeout: Duration,
) -> Result<redis::aio::MultiplexedConnection, StoreError> {
    let config = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(timeout))
        .set_response_timeout(Some(timeout));
    bounded(
        "connect",
        timeout,
        client.get_multiplexed_async_connection_with_config(&config),
    )
    .await
}

/// `host:port` of the primary of `master_name`, from the first sentinel that names one
/// (`AUTH` with `password` first, when given).
async fn ask_sentinels(
    sentinels: &[String],
    master_name: &str,
    password: Option<&str>,
    timeout: Duration,
) -> Result<String, StoreError> {
    let mut last = String::from("no sentinel configured");
    for sentinel in sentinels {
        let answer = async {
            let mut conn = direct(
                &client_for(&format!("redis://{sentinel}"), password)?,
                timeout,
            )
            .await?;
            bounded::<Option<(String, u16)>>(
                "sentinel get-master-addr-by-name",
                timeout,
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(master_name)
                    .query_async(&mut conn),
            )
            .await
        }
        .await;
        match answer {
            Ok(Some((host, port))) => return Ok(format!("{host}:{port}")),
            Ok(None) => last = format!("{sentinel} does not monitor '{master_name}'"),
            Err(e) => last = format!("{sentinel}: {e}"),
        }
    }
    Err(StoreError::NoPrimary {
        master_name: master_name.to_string(),
        detail: last,
    })
}

/// Refuses a node that is not a master (the sentinels may name a replica they are still
/// promoting, or an old primary they have not yet seen fail).
/// The role a `ROLE` reply names first (`master`, `slave`, `sentinel`), if it names one.
pub(super) fn role_name(reply: &[redis::Value]) -> Option<String> {
    match reply.first() {
        Some(redis::Value::BulkString(b)) => Some(String::from_utf8_lossy(b).into_owned()),
        Some(redis::Value::SimpleString(s)) => Some(s.clone()),
        _ => None,
    }
}

async fn check_master(
    addr: &str,
    client: &redis::Client,
    timeout: Duration,
) -> Result<(), StoreError> {
    let mut conn = direct(client, timeout).await?;
    let role: Vec<redis::Value> =
        bounded("role", timeout, redis::cmd("ROLE").query_async(&mut conn)).await?;
    if role_name(&role).as_deref() == Some("master") {
        Ok(())
    } else {
        Err(StoreError::Protocol {
            op: "role",
            detail: format!("{addr} is not a master"),
        })
    }
}
