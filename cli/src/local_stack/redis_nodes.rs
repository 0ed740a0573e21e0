//! Starting the stack's Redis: one redis-server, or with `--ha` a primary, a replica and three
//! sentinels (`redis_ha.rs`), each waited on until ready; and the manager's environment for it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::config_files::LocalStack;
use super::error::StackError;
use super::readiness;
use super::redis_auth::{create_private_dir, write_redis_conf, RedisPassword, REDIS_URL_ENV};
use super::redis_ha::{self, HaPorts, MASTER_NAME, REDIS_PASSWORD_ENV};
use super::supervisor::{Stage, Supervisor};
use super::{os_args, wait_ready, SERVER_READY_TIMEOUT};
use crate::output;

/// Where each node keeps its data, and on which port it listens.
/// A data node's config: `DIR/redis.conf`'s text in the node's own data directory, which is
/// made private (see `redis_auth::create_private_dir`: a failover rewrites it world-readable).
fn node_config(dir: &Path, password: &RedisPassword) -> Result<PathBuf, StackError> {
    create_private_dir(dir)?;
    let path = dir.join("redis.conf");
    write_redis_conf(&path, password)?;
    Ok(path)
}

fn data_node_args(config: &Path, port: u16, dir: &Path) -> Vec<OsString> {
    let port = port.to_string();
    os_args(&[
        &config,
        &"--port",
        &port,
        &"--bind",
        &"127.0.0.1",
        &"--dir",
        &dir,
        &"--appendonly",
        &"yes",
        // fsync before answering: with everysec a killed redis-server can lose writes it
        // acknowledged while a slow fsync ran (docs/reliability.md).
        &"--appendfsync",
        &"always",
        // A replica cut off from its primary (or restarted, before its first sync) answers
        // reads with an error instead of its own, possibly old, data.
        &"--replica-serve-stale-data",
        &"no",
    ])
}

/// Starts Redis (one node, or the `--ha` group) and waits until the manager can use it.
pub(super) async fn start_redis(
    stack: &LocalStack,
    program: &Path,
    password: &RedisPassword,
    sup: &mut Supervisor,
) -> Result<(), StackError> {
    let log = |name: &str| stack.logs_dir().join(format!("{name}.log"));
    let primary = stack.redis_port;
    output::note(format!(
        "starting redis-server on 127.0.0.1:{primary} (password in {})",
        stack.redis_config_path().display()
    ));
    let primary_dir = stack.dir.join("redis");
    let config = node_config(&primary_dir, password)?;
    let args = data_node_args(&config, primary, &primary_dir);
    // With sentinels a node that dies is failed over and started again (it rejoins as a
    // replica), not a reason to stop the stack.
    let spawn = if stack.redis_ha.is_some() {
        Supervisor::spawn_restarted_on_exit
    } else {
        Supervisor::spawn
    };
    spawn(
        sup,
        "redis-server",
        Stage::Servers,
        program,
        &args,
        &log("redis-server"),
    )?;
    wait_ready(
        sup,
        "redis-server",
        &log("redis-server"),
        SERVER_READY_TIMEOUT,
        || readiness::redis_ready(primary, password.as_str()),
    )
    .await?;
    match &stack.redis_ha {
        None => Ok(()),
        Some(ha) => start_replica_and_sentinels(stack, ha, program, password, sup).await,
    }
}

async fn start_replica_and_sentinels(
    stack: &LocalStack,
    ha: &HaPorts,
    program: &Path,
    password: &RedisPassword,
    sup: &mut Supervisor,
) -> Result<(), StackError> {
    let log = |name: &str| stack.logs_dir().join(format!("{name}.log"));
    let primary = stack.redis_port.to_string();
    let replica = ha.replica;
    output::note(format!(
        "starting a redis replica on 127.0.0.1:{replica} and {} sentinels on {} (master name {MASTER_NAME})",
        ha.sentinels.len(),
        ha.sentinel_addrs().join(", ")
    ));
    let replica_dir = redis_ha::replica_dir(&stack.dir);
    let config = node_config(&replica_dir, password)?;
    let mut args = data_node_args(&config, replica, &replica_dir);
    args.extend(os_args(&[&"--replicaof", &"127.0.0.1", &primary]));
    sup.spawn_restarted_on_exit(
        "redis-replica",
        Stage::Servers,
        program,
        &args,
        &log("redis-replica"),
    )?;
    wait_ready(
        sup,
        "redis-replica",
        &log("redis-replica"),
        SERVER_READY_TIMEOUT,
        || readiness::redis_replica_synced(replica, password.as_str()),
    )
    .await?;
    for (i, port) in ha.sentinels.iter().enumerate() {
        let name = format!("redis-sentinel-{}", i + 1);
        let conf: PathBuf = redis_ha::sentinel_conf_path(&stack.dir, i + 1);
        sup.spawn_restarted_on_exit(
            &name,
            Stage::Servers,
            program,
            &os_args(&[&conf, &"--sentinel"]),
            &log(&name),
        )?;
        let port = *port;
        wait_ready(sup, &name, &log(&name), SERVER_READY_TIMEOUT, || {
            readiness::redis_ready(port, password.as_str())
        })
        .await?;
    }
    Ok(())
}

/// The manager's Redis secret: the primary's URL with the password, or with `--ha` the
/// password alone (the sentinels name the primary).
pub(super) fn manager_env(stack: &LocalStack, password: &RedisPassword) -> (&'static str, String) {
    match stack.redis_ha {
        None => (REDIS_URL_ENV, password.url(stack.redis_port)),
        Some(_) => (REDIS_PASSWORD_ENV, password.as_str().to_string()),
    }
}
