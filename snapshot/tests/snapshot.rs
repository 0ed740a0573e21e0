//! Integration tests for loopgate-snapshot against a real nats-server.
//! One test binary; the cases live in `suite/`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use loopgate_snapshot::SnapshotStore;
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

pub(crate) async fn nats_and_store() -> Result<(NatsServer, Bus, SnapshotStore)> {
    let server = NatsServer::start().await?;
    let bus = bus_on(&server).await?;
    let store = SnapshotStore::from_jetstream(bus.jetstream(), bus.request_timeout()).await?;
    Ok((server, bus, store))
}

pub(crate) fn write(root: &Path, rel: &str, content: &[u8], mode: u32) {
    let path = root.join(rel);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(&path, content).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
}

pub(crate) fn mode_of(path: &Path) -> u32 {
    fs::metadata(path).unwrap().permissions().mode() & 0o777
}

pub(crate) fn sample_workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(root, "README.md", b"# hello\n", 0o644);
    write(root, "src/lib.rs", b"pub fn f() {}\n", 0o644);
    write(root, "src/deep/nested/data.bin", &[0u8, 1, 2, 255], 0o600);
    write(root, "scripts/run.sh", b"#!/bin/sh\necho hi\n", 0o755);
    write(root, "dup_a.txt", b"same", 0o644);
    write(root, "dup_b.txt", b"same", 0o644);
    write(root, ".git/HEAD", b"ref: refs/heads/main\n", 0o644);
    write(root, "target/debug/out", b"build output", 0o644);
    write(root, "sub/node_modules/x/index.js", b"x", 0o644);
    std::os::unix::fs::symlink("src/lib.rs", root.join("lib_link.rs")).unwrap();
    dir
}
