//! Integration tests for loopgate-transport against a real nats-server.
//! One test binary; the cases live in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use anyhow::{Context, Result};
use loopgate_test_support::NatsServer;
use loopgate_transport::{Bus, BusOptions};

mod suite;

pub(crate) const TEST_TIMEOUT: Duration = Duration::from_secs(90);

pub(crate) async fn bounded<F: std::future::Future<Output = Result<()>>>(test: F) -> Result<()> {
    tokio::time::timeout(TEST_TIMEOUT, test)
        .await
        .context("test timed out")?
}

pub(crate) async fn bus_on(server: &NatsServer) -> Result<Bus> {
    let opts = BusOptions {
        request_timeout: Duration::from_secs(5),
        ..BusOptions::default()
    };
    let bus = Bus::connect(&server.url(), "lgtest", opts).await?;
    bus.ensure_topology().await?;
    Ok(bus)
}
