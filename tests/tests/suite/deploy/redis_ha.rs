//! Redis with failover on Kubernetes (overlays/prod-ha, components/redis-ha): two data pods
//! with stable names, three sentinels, and a manager that finds the primary through exactly
//! those sentinels, waits for a replica, and gets the password but no URL; its manager.toml is
//! the base's plus the [redis] table. The single-Redis overlays (dev, prod) stay one node
//! reached by URL.

use anyhow::{ensure, Context};
use serde_json::Value;

use super::{arr, find, renders, repo, s, Render};

fn manager_env(r: &Render) -> anyhow::Result<Vec<Value>> {
    let manager = find(r, "Deployment", "loopgate-manager")?;
    let container = arr(manager, "/spec/template/spec/containers")
        .iter()
        .find(|c| s(c, "/name") == "manager")
        .context("manager container")?;
    Ok(arr(container, "/env").to_vec())
}

fn manager_toml(r: &Render) -> anyhow::Result<toml::Table> {
    let manager = find(r, "Deployment", "loopgate-manager")?;
    let cm = arr(manager, "/spec/template/spec/volumes")
        .iter()
        .find_map(|v| v.pointer("/configMap/name").and_then(Value::as_str))
        .context("manager config volume")?;
    Ok(toml::from_str(s(
        find(r, "ConfigMap", cm)?,
        "/data/manager.toml",
    ))?)
}

fn replicas(workload: &Value) -> u64 {
    workload
        .pointer("/spec/replicas")
        .and_then(Value::as_u64)
        .unwrap_or(1)
}

#[test]
fn prod_ha_runs_redis_with_sentinels_and_the_manager_follows_them() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let r = renders
        .iter()
        .find(|r| r.name == "prod-ha")
        .context("prod-ha render")?;
    let nodes = find(r, "StatefulSet", "redis")?;
    ensure!(
        replicas(nodes) >= 2,
        "prod-ha: {} data pods",
        replicas(nodes)
    );
    ensure!(s(nodes, "/spec/serviceName") == "redis-nodes");
    let sentinels = find(r, "StatefulSet", "redis-sentinel")?;
    ensure!(
        replicas(sentinels) == 3,
        "prod-ha: {} sentinels",
        replicas(sentinels)
    );
    for service in ["redis-nodes", "redis-sentinel"] {
        let svc = find(r, "Service", service)?;
        ensure!(
            s(svc, "/spec/clusterIP") == "None",
            "{service} must be headless"
        );
    }
    // The manager: the password, no URL (a URL and sentinels together are refused).
    let env = manager_env(r)?;
    let names: Vec<&str> = env.iter().map(|e| s(e, "/name")).collect();
    ensure!(!names.contains(&"LOOPGATE_REDIS_URL"), "prod-ha: {names:?}");
    let password = env
        .iter()
        .find(|e| s(e, "/name") == "LOOPGATE_REDIS_PASSWORD")
        .context("LOOPGATE_REDIS_PASSWORD")?;
    ensure!(s(password, "/valueFrom/secretKeyRef/name") == "loopgate-redis");
    ensure!(s(password, "/valueFrom/secretKeyRef/key") == "password");
    // [redis]: every sentinel pod by its stable name, the name they monitor, one replica ack.
    let config = manager_toml(r)?;
    let redis = config.get("redis").context("[redis]")?;
    let listed: Vec<&str> = redis
        .get("sentinels")
        .and_then(toml::Value::as_array)
        .context("redis.sentinels")?
        .iter()
        .filter_map(toml::Value::as_str)
        .collect();
    let expected: Vec<String> = (0..replicas(sentinels))
        .map(|i| format!("redis-sentinel-{i}.redis-sentinel:26379"))
        .collect();
    ensure!(listed == expected, "redis.sentinels {listed:?}");
    ensure!(redis.get("master_name").and_then(toml::Value::as_str) == Some("loopgate"));
    for key in ["password_env", "sentinel_password_env"] {
        ensure!(
            redis.get(key).and_then(toml::Value::as_str) == Some("LOOPGATE_REDIS_PASSWORD"),
            "redis.{key}"
        );
    }
    let acks = redis
        .get("min_replicas_acked")
        .and_then(toml::Value::as_integer)
        .unwrap_or(0);
    ensure!(
        acks >= 1 && u64::try_from(acks)? < replicas(nodes),
        "redis.min_replicas_acked {acks} with {} data pods",
        replicas(nodes)
    );
    let scripts = repo().join("deploy/k8s/components/redis-ha");
    let sentinel_start = std::fs::read_to_string(scripts.join("sentinel-start.sh"))?;
    ensure!(
        sentinel_start.contains("sentinel monitor loopgate $primary 6379 2"),
        "sentinel-start.sh must monitor `loopgate` with quorum 2"
    );
    // The rest of manager.toml is the base's.
    let base: toml::Table = toml::from_str(&std::fs::read_to_string(
        repo().join("deploy/k8s/base/config/manager.toml"),
    )?)?;
    let mut rest = config.clone();
    rest.remove("redis");
    ensure!(
        rest == base,
        "overlays/prod-ha/config/manager.toml drifted from base/config/manager.toml beyond [redis]"
    );
    Ok(())
}

#[test]
fn the_single_redis_overlays_stay_one_node_reached_by_url() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders.iter().filter(|r| r.name != "prod-ha") {
        let redis = find(r, "StatefulSet", "redis")?;
        ensure!(
            replicas(redis) == 1,
            "{}: {} redis pods",
            r.name,
            replicas(redis)
        );
        ensure!(
            find(r, "StatefulSet", "redis-sentinel").is_err(),
            "{}: sentinels",
            r.name
        );
        let env = manager_env(r)?;
        ensure!(
            env.iter().any(|e| s(e, "/name") == "LOOPGATE_REDIS_URL"),
            "{}: the manager has no LOOPGATE_REDIS_URL",
            r.name
        );
        ensure!(
            manager_toml(r)?.get("redis").is_none(),
            "{}: a [redis] table",
            r.name
        );
    }
    Ok(())
}
