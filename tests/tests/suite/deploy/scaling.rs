//! Autoscaling that never kills a running episode, in every render: each worker Deployment
//! (executors, gui executors, auditors) has exactly one autoscaler on its own work queue, whose
//! per-pod target is the worker's episodes per pod; rollouts add pods before removing any;
//! node consolidation leaves workers alone; outside dev the termination grace covers a default
//! episode. And the offline proof: for a table of (busy pods, queued steps, current replicas)
//! the replica count the Kubernetes HPA algorithm computes from the rendered numbers, on the
//! metric KEDA's nats-jetstream scaler reports (num_pending + num_ack_pending) or on the
//! manager's loopgate_queue_outstanding_messages, never drops below the busy pods.

use anyhow::{bail, ensure, Context};
use loopgate_common::budget::Budget;
use loopgate_protocol::subjects::Capability;
use loopgate_transport::runtime::EPISODES_PER_LOOP;
use loopgate_transport::Work;
use serde_json::Value;

use super::{arr, config_of, daemons, find, kind_of, renders, s, Render, Role, NAMESPACE};

/// The metric the HPA alternative reads (manager/src/gauges.rs), waiting plus in flight.
const HPA_METRIC: &str = "loopgate_queue_outstanding_messages";
/// The HPA controller's default `--horizontal-pod-autoscaler-tolerance`.
const TOLERANCE: f64 = 0.1;
/// Beyond the worker's shutdown grace: its drain margin and NATS/telemetry flush.
const GRACE_MARGIN_SECS: u64 = 40;

/// The numbers one autoscaler scales a worker with.
#[derive(Debug, Clone, Copy)]
struct Scaler {
    /// Per-pod target (`lagThreshold` / `averageValue`).
    target: f64,
    min: u64,
    max: u64,
    /// Pods one scale-down period may remove (behavior.scaleDown Pods policy).
    down_step: u64,
    /// Whether the metric includes in-flight messages (KEDA's always does).
    counts_in_flight: bool,
}

/// The Kubernetes HPA replica calculation for an External AverageValue metric
/// (pkg/controller/podautoscaler: ratio within tolerance keeps the current count, else
/// ceil(metric / target)), clamped to [min, max], then the scale-down rate limit. The
/// stabilization window only takes the highest recent recommendation, so it can only add pods.
fn desired_replicas(scaler: Scaler, metric: u64, current: u64) -> u64 {
    let metric = metric as f64;
    let ratio = metric / (scaler.target * current.max(1) as f64);
    let raw = if current > 0 && (ratio - 1.0).abs() <= TOLERANCE {
        current
    } else {
        (metric / scaler.target).ceil() as u64
    };
    let clamped = raw.clamp(scaler.min, scaler.max);
    clamped.max(current.saturating_sub(scaler.down_step))
}

/// The metric the scaler sees with `busy` pods each running one episode and `queued` waiting.
fn metric(scaler: Scaler, busy: u64, queued: u64) -> u64 {
    queued + if scaler.counts_in_flight { busy } else { 0 }
}

/// The first (busy, queued, current) row where the computed count drops below the busy pods.
fn first_kill(scaler: Scaler) -> Option<(u64, u64, u64, u64)> {
    let rows = (0..=scaler.max).flat_map(|busy| {
        (busy.max(1)..=scaler.max).flat_map(move |current| {
            (0..=3 * scaler.max).map(move |queued| (busy, queued, current))
        })
    });
    rows.map(|(busy, queued, current)| {
        let want = desired_replicas(scaler, metric(scaler, busy, queued), current);
        (busy, queued, current, want)
    })
    .find(|&(busy, _, _, want)| want < busy)
}

#[test]
fn the_replica_table_never_drops_below_busy_pods_and_the_old_settings_did() {
    let good = Scaler {
        target: EPISODES_PER_LOOP as f64,
        min: 1,
        max: 20,
        down_step: 2,
        counts_in_flight: true,
    };
    // (busy pods, queued steps, current replicas) -> replicas.
    let table = [
        (0, 0, 1, 1),
        (0, 0, 5, 3),    // idle: scale in, two pods per period
        (5, 0, 5, 5),    // every executor busy, empty queue: keep them all
        (5, 0, 8, 6),    // three idle: two go now
        (3, 4, 3, 7),    // backlog: one pod per waiting step
        (20, 9, 20, 20), // capped at max, nobody removed
        (10, 2, 10, 12),
    ];
    for (busy, queued, current, want) in table {
        let got = desired_replicas(good, metric(good, busy, queued), current);
        assert_eq!(got, want, "busy {busy}, queued {queued}, current {current}");
        assert!(got >= busy);
    }
    assert_eq!(first_kill(good), None);
    // The settings issue 20 found: lagThreshold "2" on KEDA's metric, and the HPA on waiting
    // steps only. The same table catches both.
    let old_keda = Scaler {
        target: 2.0,
        ..good
    };
    assert_eq!(first_kill(old_keda).map(|r| r.0), Some(2), "{old_keda:?}");
    let old_hpa = Scaler {
        target: 2.0,
        counts_in_flight: false,
        ..good
    };
    assert!(first_kill(old_hpa).is_some(), "{old_hpa:?}");
}

fn number(v: Option<&Value>) -> Option<f64> {
    let v = v?;
    v.as_f64().or_else(|| v.as_str()?.parse().ok())
}

fn down_step(behavior: Option<&Value>) -> u64 {
    let policies = behavior.map_or(&[][..], |b| arr(b, "/scaleDown/policies"));
    let steps = policies
        .iter()
        .filter(|p| s(p, "/type") == "Pods")
        .filter_map(|p| p.get("value")?.as_u64());
    steps.max().unwrap_or(u64::MAX)
}

/// The autoscaler of `deployment` (exactly one, in the Deployment's own namespace: a
/// scaleTargetRef never crosses namespaces) and the queue it reads.
fn scaler_of(r: &Render, deployment: &str) -> anyhow::Result<(Scaler, String, String)> {
    let ns = s(find(r, "Deployment", deployment)?, "/metadata/namespace");
    let target = |o: &&Value| {
        s(o, "/spec/scaleTargetRef/name") == deployment && s(o, "/metadata/namespace") == ns
    };
    let scaled: Vec<&Value> = kind_of(r, "ScaledObject").filter(target).collect();
    let hpas: Vec<&Value> = kind_of(r, "HorizontalPodAutoscaler")
        .filter(target)
        .collect();
    match (scaled.as_slice(), hpas.as_slice()) {
        ([so], []) => {
            let trigger = &so["spec"]["triggers"][0];
            ensure!(s(trigger, "/type") == "nats-jetstream", "trigger type");
            let meta = &trigger["metadata"];
            let monitor = format!("nats-headless.{NAMESPACE}.svc.cluster.local:8222");
            ensure!(
                s(meta, "/natsServerMonitoringEndpoint") == monitor && s(meta, "/account") == "$G",
                "KEDA must read {monitor}, account $G"
            );
            let behavior = so.pointer("/spec/advanced/horizontalPodAutoscalerConfig/behavior");
            let scaler = Scaler {
                target: number(meta.get("lagThreshold")).context("lagThreshold")?,
                min: so
                    .pointer("/spec/minReplicaCount")
                    .and_then(Value::as_u64)
                    .unwrap_or(0),
                max: so
                    .pointer("/spec/maxReplicaCount")
                    .and_then(Value::as_u64)
                    .unwrap_or(100),
                down_step: down_step(behavior),
                counts_in_flight: true,
            };
            ensure!(scaler.min >= 1, "at 0 the worker's consumer may not exist");
            Ok((
                scaler,
                s(meta, "/stream").into(),
                s(meta, "/consumer").into(),
            ))
        }
        ([], [hpa]) => {
            let metrics = arr(hpa, "/spec/metrics");
            ensure!(
                metrics.len() == 1,
                "one metric (the HPA takes the max of several)"
            );
            let external = &metrics[0]["external"];
            ensure!(
                s(external, "/target/type") == "AverageValue",
                "AverageValue target"
            );
            let name = s(external, "/metric/name");
            let labels = &external["metric"]["selector"]["matchLabels"];
            let scaler = Scaler {
                target: number(external.pointer("/target/averageValue")).context("target")?,
                min: hpa
                    .pointer("/spec/minReplicas")
                    .and_then(Value::as_u64)
                    .unwrap_or(1),
                max: hpa
                    .pointer("/spec/maxReplicas")
                    .and_then(Value::as_u64)
                    .context("maxReplicas")?,
                down_step: down_step(hpa.pointer("/spec/behavior")),
                counts_in_flight: name == HPA_METRIC,
            };
            Ok((
                scaler,
                s(labels, "/stream").into(),
                s(labels, "/consumer").into(),
            ))
        }
        _ => bail!(
            "{deployment}: {} ScaledObjects and {} HPAs (want exactly one autoscaler)",
            scaled.len(),
            hpas.len()
        ),
    }
}

/// The work queue a worker container takes from, by its own config.
fn work_of(r: &Render, d: &super::Daemon) -> anyhow::Result<Work> {
    let raw: toml::Value = toml::from_str(&config_of(r, d)?)?;
    match d.role {
        Role::Auditor => Ok(Work::Audit),
        Role::Executor => {
            let caps = raw
                .get("executor")
                .and_then(|e| e.get("capabilities"))
                .and_then(toml::Value::as_array)
                .context("[executor] capabilities")?;
            let [cap] = caps.as_slice() else {
                bail!("one capability per Deployment: one autoscaler, one queue");
            };
            match cap.as_str() {
                Some("cli") => Ok(Work::Exec(Capability::Cli)),
                Some("gui") => Ok(Work::Exec(Capability::Gui)),
                other => bail!("capability {other:?}"),
            }
        }
        Role::Manager => bail!("the manager is no worker"),
    }
}

/// Episodes one worker pod runs at once on its queue: its `concurrency` (one capability, one
/// loop per Deployment), `EPISODES_PER_LOOP` when unset.
fn episodes_per_pod(r: &Render, d: &super::Daemon) -> anyhow::Result<u64> {
    let raw: toml::Value = toml::from_str(&config_of(r, d)?)?;
    let table = if d.role == Role::Executor {
        "executor"
    } else {
        "auditor"
    };
    match raw.get(table).and_then(|t| t.get("concurrency")) {
        None => Ok(EPISODES_PER_LOOP as u64),
        Some(v) => v
            .as_integer()
            .and_then(|v| u64::try_from(v).ok())
            .context("concurrency"),
    }
}

#[test]
fn every_worker_scales_on_its_queue_without_killing_episodes() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let budget = Budget::default();
    for r in renders {
        let mut scaled = Vec::new();
        for d in daemons(r)?.iter().filter(|d| d.role != Role::Manager) {
            let at = d.at.clone();
            let deployment = at
                .rsplit_once("Deployment/")
                .map(|(_, name)| name.to_string())
                .with_context(|| format!("{at}: workers run as Deployments"))?;
            let workload = find(r, "Deployment", &deployment)?;
            ensure!(
                workload.pointer("/spec/replicas").is_none(),
                "{at}: replicas would fight the autoscaler"
            );
            let rolling = workload.pointer("/spec/strategy/rollingUpdate/maxUnavailable");
            ensure!(
                rolling == Some(&Value::from(0)),
                "{at}: a rollout must start new pods before it stops old ones"
            );
            let annotations = &d.pod["metadata"]["annotations"];
            ensure!(
                s(annotations, "/karpenter.sh~1do-not-disrupt") == "true"
                    && s(
                        annotations,
                        "/cluster-autoscaler.kubernetes.io~1safe-to-evict"
                    ) == "false",
                "{at}: node consolidation may evict a busy worker"
            );
            let work = work_of(r, d).with_context(|| at.clone())?;
            let (scaler, stream, consumer) =
                scaler_of(r, &deployment).with_context(|| at.clone())?;
            ensure!(
                stream == work.stream_name() && consumer == work.durable_name(),
                "{at}: scales on {stream}/{consumer}, takes work from {work:?}"
            );
            let per_pod = episodes_per_pod(r, d).with_context(|| at.clone())?;
            ensure!(
                scaler.target == per_pod as f64 && scaler.counts_in_flight,
                "{at}: the per-pod target must be the worker's {per_pod} episode(s) at once \
                 ([executor]/[auditor] concurrency) on waiting + in-flight messages ({scaler:?})"
            );
            if let Some(row) = first_kill(scaler) {
                bail!("{at}: (busy, queued, current) -> replicas {row:?} kills busy pods");
            }
            // Outside the throw-away dev cluster a stopping worker may finish a default episode.
            if r.name != "dev" {
                let raw: toml::Value = toml::from_str(&config_of(r, d)?)?;
                let table = if d.role == Role::Executor {
                    "executor"
                } else {
                    "auditor"
                };
                let shutdown = raw
                    .get(table)
                    .and_then(|t| t.get("shutdown_grace_secs"))
                    .and_then(toml::Value::as_integer)
                    .and_then(|v| u64::try_from(v).ok())
                    .context("shutdown_grace_secs")?;
                let episode = if d.role == Role::Executor {
                    budget.executor_episode_secs
                } else {
                    budget.auditor_episode_secs
                };
                let grace = d
                    .pod
                    .pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_u64)
                    .unwrap_or(30);
                ensure!(
                    shutdown >= episode && grace >= shutdown + GRACE_MARGIN_SECS,
                    "{at}: shutdown_grace_secs {shutdown} / grace {grace} s do not cover a \
                     {episode} s episode"
                );
            }
            scaled.push(work);
        }
        for work in [
            Work::Exec(Capability::Cli),
            Work::Exec(Capability::Gui),
            Work::Audit,
        ] {
            ensure!(
                scaled.contains(&work),
                "{}: nothing takes (and scales on) {work:?}",
                r.name
            );
        }
    }
    Ok(())
}
