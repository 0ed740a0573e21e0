//! Integration tests for loopgate-manager's own parts against real servers (the Redis run
//! store against a real redis-server). One test binary; the cases live in `suite/`. The
//! manager as a whole, with workers, is tested in `tests/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use anyhow::{Context, Result};
use loopgate_manager::run_store::{CasWrite, RunStore};
use loopgate_test_support::RedisServer;

mod suite;

pub(crate) const TEST_TIMEOUT: Duration = Duration::from_secs(90);
pub(crate) const STORE_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn bounded<F: std::future::Future<Output = Result<()>>>(test: F) -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .context("test timed out")?
}

pub(crate) async fn redis_store() -> Result<(RedisServer, RunStore)> {
    let server = RedisServer::start().await?;
    let store = RunStore::connect(&server.url(), STORE_TIMEOUT).await?;
    store.ping().await?;
    Ok((server, store))
}

pub(crate) fn cas(expected_version: u64, record: &str) -> CasWrite {
    CasWrite {
        expected_version,
        record: record.to_string(),
        ..CasWrite::default()
    }
}
