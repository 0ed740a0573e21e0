//! The faults that hit no process: a link cut at a fault proxy (a partition) and the
//! executors' work-dir tmpfs filled (a full disk).

use std::time::Duration;

use loopgate_test_support::{FaultProxy, Tmpfs};

use super::{pick_worker, ChaosConfig, Component, Rng};
use crate::{Stack, Worker};

/// The link a partition cuts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    /// The managers' shared link to redis-server.
    Redis,
    /// One manager replica's link to nats-server.
    ManagerNats,
    /// One executor's link to nats-server.
    ExecutorNats,
    /// One auditor's link to nats-server.
    AuditorNats,
}

/// The link of one draw `v`: redis-server, a manager's or an auditor's NATS link one time in
/// six each, an executor's NATS link one time in two. `v % 3 == 0` gives redis-server or a
/// manager and anything else an executor or an auditor, so a seed that cut the managers'
/// Redis link (`v % 3 == 0`) before managers' NATS links were drawn now cuts that or a
/// manager's NATS link, and one that cut an executor's link that or an auditor's.
fn link_of(v: u64) -> Link {
    match v % 12 {
        0 | 6 => Link::Redis,
        3 | 9 => Link::ManagerNats,
        2 | 8 => Link::AuditorNats,
        _ => Link::ExecutorNats,
    }
}

/// Cut one link for `1..=max_freeze`, then heal it (one time in two resetting every open
/// connection as it heals, as a NAT or firewall that forgot them would): the managers' link
/// to redis-server, one manager's, executor's or auditor's link to nats-server (see
/// `link_of`; a busy worker preferred, like a killed one). A link the stack has no proxy for
/// falls back to the other kind of manager link (the managers' Redis link and a manager's
/// NATS link stand in for each other) or an executor's. Gives what was hit and its name.
pub(super) async fn partition(
    stack: &mut Stack,
    rng: &mut Rng,
    config: &ChaosConfig,
) -> anyhow::Result<(Component, String)> {
    let cut = rng.between(Duration::from_secs(1), config.max_freeze);
    let reset = rng.below(2) == 0;
    let executors = stack.executor_nats_proxies.len();
    // One draw picks the link and, for a manager, which one (as many draws as before the
    // managers' and auditors' links were drawn, so a seed's other faults stay the same).
    let has_redis = stack.redis_proxy.is_some();
    let has_managers = stack.managers.iter().any(|m| m.nats_proxy.is_some());
    let (link, v) = if !has_redis && !has_managers {
        (Link::ExecutorNats, 0)
    } else if executors == 0 {
        (Link::Redis, 0)
    } else {
        let v = rng.next();
        (link_of(v), v / 12)
    };
    // A link the stack has no proxy for (the managers' Redis link with Sentinel): the other
    // kind of manager link.
    let link = match link {
        Link::ManagerNats if !has_managers => Link::Redis,
        Link::Redis if !has_redis => Link::ManagerNats,
        Link::AuditorNats if stack.auditor_nats_proxies.is_empty() => Link::ExecutorNats,
        other => other,
    };
    let (component, target, proxy): (Component, String, &FaultProxy) = match link {
        Link::Redis => {
            let Some(proxy) = stack.redis_proxy.as_ref() else {
                anyhow::bail!("the chaos stack has no Redis proxy");
            };
            (Component::Redis, "redis-server".to_string(), proxy)
        }
        Link::ManagerNats => {
            let i = (v % stack.managers.len() as u64) as usize;
            let manager = &stack.managers[i];
            let Some(proxy) = manager.nats_proxy.as_ref() else {
                anyhow::bail!("the chaos stack has no NATS proxy for manager {i}");
            };
            (Component::Manager, manager.child.name().to_string(), proxy)
        }
        Link::ExecutorNats | Link::AuditorNats => {
            let (component, proxies) = if link == Link::ExecutorNats {
                (Component::Executor, &stack.executor_nats_proxies)
            } else {
                (Component::Auditor, &stack.auditor_nats_proxies)
            };
            let worker = pick_worker(stack, component, rng, config).await;
            let (Worker::Executor(i) | Worker::Auditor(i)) = worker;
            let Some(proxy) = proxies.get(i) else {
                anyhow::bail!("the chaos stack has no NATS proxy for {worker:?}");
            };
            (component, stack.worker_id(worker), proxy)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_draw_cuts_redis_or_a_manager_where_it_cut_redis_and_a_worker_where_it_cut_an_executor() {
        // (draw, link)
        let cases = [
            (0, Link::Redis),
            (6, Link::Redis),
            (3, Link::ManagerNats),
            (9, Link::ManagerNats),
            (21, Link::ManagerNats),
            (2, Link::AuditorNats),
            (8, Link::AuditorNats),
            (1, Link::ExecutorNats),
            (4, Link::ExecutorNats),
            (5, Link::ExecutorNats),
            (7, Link::ExecutorNats),
            (10, Link::ExecutorNats),
            (11, Link::ExecutorNats),
        ];
        for (v, want) in cases {
            let link = link_of(v);
            assert_eq!(link, want, "draw {v}");
            let was_redis = v % 3 == 0;
            assert_eq!(
                matches!(link, Link::Redis | Link::ManagerNats),
                was_redis,
                "draw {v}"
            );
        }
    }
}
