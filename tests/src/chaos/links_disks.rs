//! The faults that hit no process: a link cut at a fault proxy (a partition) and the
//! executors' work-dir tmpfs filled (a full disk).

use std::time::Duration;

use loopgate_test_support::{FaultProxy, Tmpfs};

use super::{pick_worker, ChaosConfig, Component, Rng};
use crate::{Stack, Worker};

/// Cut one link for `1..=max_freeze`, then heal it (one time in two resetting every open
/// connection as it heals, as a NAT or firewall that forgot them would): an executor's link
/// to nats-server (a busy one preferred, like a killed worker) two times in three, else the
/// managers' link to redis-server. Gives what was hit and its name.
pub(super) async fn partition(
    stack: &mut Stack,
    rng: &mut Rng,
    config: &ChaosConfig,
) -> anyhow::Result<(Component, String)> {
    let cut = rng.between(Duration::from_secs(1), config.max_freeze);
    let reset = rng.below(2) == 0;
    let executors = stack.executor_nats_proxies.len();
    let to_redis = stack.redis_proxy.is_some() && (executors == 0 || rng.below(3) == 0);
    let (component, target, proxy): (Component, String, &FaultProxy) = if to_redis {
        let Some(proxy) = stack.redis_proxy.as_ref() else {
            anyhow::bail!("the chaos stack has no Redis proxy");
        };
        (Component::Redis, "redis-server".to_string(), proxy)
    } else {
        let worker = pick_worker(stack, Component::Executor, rng, config).await;
        let Worker::Executor(i) = worker else {
            anyhow::bail!("drew {worker:?} for an executor partition");
        };
        let Some(proxy) = stack.executor_nats_proxies.get(i) else {
            anyhow::bail!("the chaos stack has no NATS proxy for executor {i}");
        };
        (Component::Executor, stack.worker_id(worker), proxy)
    };
    proxy.drop_traffic();
    tokio::time::sleep(cut).await;
    if reset {
        proxy.reset();
    }
    proxy.heal();
    Ok((component, target))
}

/// Fill the executors' work-dir tmpfs for `1..=max_freeze`, then free it.
pub(super) async fn fill_disk(
    disk: &Tmpfs,
    rng: &mut Rng,
    config: &ChaosConfig,
) -> anyhow::Result<()> {
    let full = rng.between(Duration::from_secs(1), config.max_freeze);
    // Writing the ballast blocks (up to the tmpfs's size, in RAM): off the runtime's workers.
    tokio::task::block_in_place(|| disk.fill())?;
    tokio::time::sleep(full).await;
    disk.free()
}
