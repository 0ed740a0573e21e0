//! Cluster-wide policies in every render: locked-down pods, network policies that keep
//! auditors on NATS, executor autoscaling on the exec queue.

use std::collections::BTreeSet;

use anyhow::{bail, ensure, Context};
use loopgate_common::subjects::Capability;
use loopgate_transport::Work;
use serde_json::{json, Value};

use super::{arr, find, kind_of, name_of, pod_templates, renders, s, Render, NAMESPACE};

#[test]
fn pods_run_locked_down_with_resources_in_the_namespace() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        for o in r.objects.iter().filter(|o| s(o, "/kind") != "Namespace") {
            ensure!(
                s(o, "/metadata/namespace") == NAMESPACE,
                "{}: {} not in {NAMESPACE}",
                r.name,
                name_of(o)
            );
        }
        for (workload, pod) in pod_templates(r) {
            let at = format!("{} {workload}", r.name);
            let spec = pod.get("spec").context("pod spec")?;
            let yes = Some(&Value::Bool(true));
            let no = Some(&Value::Bool(false));
            ensure!(
                spec.get("automountServiceAccountToken") == no,
                "{at}: mounts an API token"
            );
            ensure!(
                spec.pointer("/securityContext/runAsNonRoot") == yes,
                "{at}: runAsNonRoot"
            );
            let uid = spec
                .pointer("/securityContext/runAsUser")
                .and_then(Value::as_u64);
            ensure!(uid.unwrap_or(0) > 0, "{at}: runAsUser");
            ensure!(
                s(spec, "/securityContext/seccompProfile/type") == "RuntimeDefault",
                "{at}: seccomp"
            );
            for c in arr(spec, "/containers") {
                let sc = c
                    .get("securityContext")
                    .context("container securityContext")?;
                ensure!(
                    sc.get("allowPrivilegeEscalation") == no,
                    "{at}: privilege escalation"
                );
                ensure!(
                    sc.get("readOnlyRootFilesystem") == yes,
                    "{at}: writable root filesystem"
                );
                ensure!(sc.get("privileged") != yes, "{at}: privileged");
                ensure!(
                    arr(sc, "/capabilities/drop").contains(&json!("ALL")),
                    "{at}: capabilities kept"
                );
                ensure!(
                    sc.pointer("/capabilities/add").is_none(),
                    "{at}: capabilities added"
                );
                // The one relaxation: components/auditor-sandbox and components/executor-sandbox
                // (bubblewrap), each inside a user namespace.
                if sc.get("seccompProfile").is_some() || sc.get("procMount").is_some() {
                    let sandboxed = [
                        "Deployment/loopgate-auditor",
                        "Deployment/loopgate-executor",
                    ]
                    .contains(&workload.as_str())
                        && spec.get("hostUsers") == no;
                    ensure!(
                        sandboxed,
                        "{at}: seccomp/procMount relaxed outside a sandboxed worker's user namespace"
                    );
                }
                for res in [
                    "requests/cpu",
                    "requests/memory",
                    "limits/cpu",
                    "limits/memory",
                ] {
                    ensure!(
                        c.pointer(&format!("/resources/{res}")).is_some(),
                        "{at}: no {res}"
                    );
                }
            }
        }
    }
    Ok(())
}

/// Whether a LabelSelector selects these labels (matchLabels + matchExpressions).
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let by_labels = match_labels.is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_exprs = arr(selector, "/matchExpressions").iter().all(|e| {
        let values: Vec<&str> = arr(e, "/values").iter().filter_map(Value::as_str).collect();
        let have = label(s(e, "/key"));
        match s(e, "/operator") {
            "In" => have.is_some_and(|h| values.contains(&h)),
            "NotIn" => have.is_none_or(|h| !values.contains(&h)),
            "Exists" => have.is_some(),
            "DoesNotExist" => have.is_none(),
            _ => false,
        }
    });
    by_labels && by_exprs
}

fn pod_labels<'a>(r: &'a Render, kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    find(r, kind, name)?
        .pointer("/spec/template/metadata/labels")
        .context("pod labels")
}

fn ports(rule: &Value) -> BTreeSet<u64> {
    arr(rule, "/ports")
        .iter()
        .filter_map(|p| p.get("port")?.as_u64())
        .collect()
}

#[test]
fn auditors_reach_only_nats_and_dns_from_their_own_pool() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let policies: Vec<&Value> = kind_of(r, "NetworkPolicy").collect();
        let default_deny = policies.iter().any(|p| {
            p["spec"]["podSelector"] == json!({})
                && arr(p, "/spec/policyTypes").len() == 2
                && p.pointer("/spec/ingress").is_none()
                && p.pointer("/spec/egress").is_none()
        });
        ensure!(default_deny, "{}: no default-deny policy", r.name);
        let auditor = pod_labels(r, "Deployment", "loopgate-auditor")?;
        let nats = pod_labels(r, "StatefulSet", "nats")?;
        let namespace_is = |peer: &Value, ns: &str| {
            s(
                peer,
                "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
            ) == ns
        };
        for p in policies
            .iter()
            .filter(|p| selects(&p["spec"]["podSelector"], auditor))
        {
            for rule in arr(p, "/spec/egress") {
                let to = arr(rule, "/to");
                ensure!(
                    !to.is_empty() && !ports(rule).is_empty(),
                    "{}: {} opens auditors",
                    r.name,
                    name_of(p)
                );
                for peer in to {
                    let same_namespace =
                        peer.get("namespaceSelector").is_none() && peer.get("ipBlock").is_none();
                    let to_nats = same_namespace
                        && peer
                            .get("podSelector")
                            .is_some_and(|sel| selects(sel, nats));
                    let to_dns = namespace_is(peer, "kube-system")
                        && s(peer, "/podSelector/matchLabels/k8s-app") == "kube-dns";
                    // components/otel: the documented exception, the OTLP collector.
                    let to_otlp =
                        r.name.contains("optional") && namespace_is(peer, "observability");
                    let allowed: BTreeSet<u64> = match (to_nats, to_dns, to_otlp) {
                        (true, _, _) => [4222].into(),
                        (_, true, _) => [53].into(),
                        (_, _, true) => [4317, 4318].into(),
                        _ => bail!("{}: {} lets auditors reach {peer}", r.name, name_of(p)),
                    };
                    ensure!(
                        ports(rule).is_subset(&allowed),
                        "{}: {} auditor ports",
                        r.name,
                        name_of(p)
                    );
                }
            }
        }
        // NATS lets auditors in; Redis lets in the manager and not the auditors.
        let manager = pod_labels(r, "Deployment", "loopgate-manager")?;
        let redis = pod_labels(r, "StatefulSet", "redis")?;
        let admits = |target: &Value, client: &Value, port: u64| {
            let guarding = policies
                .iter()
                .filter(|p| selects(&p["spec"]["podSelector"], target));
            guarding.flat_map(|p| arr(p, "/spec/ingress")).any(|rule| {
                let from = arr(rule, "/from");
                ports(rule).contains(&port)
                    && from
                        .iter()
                        .any(|f| f.get("podSelector").is_some_and(|sel| selects(sel, client)))
            })
        };
        ensure!(
            admits(nats, auditor, 4222),
            "{}: auditors cannot reach NATS",
            r.name
        );
        ensure!(
            !admits(redis, auditor, 6379),
            "{}: auditors can reach Redis",
            r.name
        );
        ensure!(
            admits(redis, manager, 6379),
            "{}: the manager cannot reach Redis",
            r.name
        );
        // The isolated node pool: only auditors select and tolerate it.
        for (workload, pod) in pod_templates(r) {
            let on_pool = s(pod, "/spec/nodeSelector/loopgate.dev~1pool") == "auditor";
            let tolerates = arr(pod, "/spec/tolerations")
                .iter()
                .any(|t| s(t, "/key") == "loopgate.dev/pool");
            let auditor = workload == "Deployment/loopgate-auditor";
            ensure!(
                on_pool == auditor && tolerates == auditor,
                "{}: {workload} vs the auditor pool",
                r.name
            );
        }
    }
    Ok(())
}

#[test]
fn executor_autoscaling_follows_the_exec_queue() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let stream = Work::Exec(Capability::Cli).stream_name();
    let consumer = Work::Exec(Capability::Cli).durable_name();
    for r in renders {
        let executor = find(r, "Deployment", "loopgate-executor")?;
        ensure!(
            executor.pointer("/spec/replicas").is_none(),
            "{}: replicas would fight the autoscaler",
            r.name
        );
        let scaled: Vec<&Value> = kind_of(r, "ScaledObject").collect();
        let hpas: Vec<&Value> = kind_of(r, "HorizontalPodAutoscaler").collect();
        ensure!(
            scaled.len() + hpas.len() == 1,
            "{}: want exactly one executor autoscaler",
            r.name
        );
        for hpa in hpas {
            ensure!(
                s(hpa, "/spec/scaleTargetRef/name") == "loopgate-executor",
                "{}: HPA target",
                r.name
            );
            let selector =
                &hpa["spec"]["metrics"][0]["external"]["metric"]["selector"]["matchLabels"];
            ensure!(
                selector["stream"] == stream && selector["consumer"] == consumer.as_str(),
                "{}",
                r.name
            );
        }
        for so in scaled {
            ensure!(
                s(so, "/spec/scaleTargetRef/name") == "loopgate-executor",
                "{}: target",
                r.name
            );
            let min = so.pointer("/spec/minReplicaCount").and_then(Value::as_u64);
            ensure!(
                min >= Some(1),
                "{}: executors create {consumer}; at 0 KEDA never sees a backlog",
                r.name
            );
            let trigger = &so["spec"]["triggers"][0];
            let meta = trigger["metadata"]
                .as_object()
                .context("trigger metadata")?;
            ensure!(
                s(trigger, "/type") == "nats-jetstream",
                "{}: trigger type",
                r.name
            );
            ensure!(
                meta.values().all(Value::is_string),
                "{}: KEDA metadata values are strings",
                r.name
            );
            ensure!(
                meta["stream"] == stream && meta["consumer"] == consumer.as_str(),
                "{}: queue",
                r.name
            );
            ensure!(
                meta["account"] == "$G",
                "{}: users without accounts live in $G",
                r.name
            );
            let service = find(r, "Service", "nats")?;
            let monitor = arr(service, "/spec/ports")
                .iter()
                .find(|p| s(p, "/name") == "monitor");
            let port = monitor
                .and_then(|p| p.get("port")?.as_u64())
                .context("nats monitor port")?;
            let endpoint = format!("nats.{NAMESPACE}.svc.cluster.local:{port}");
            ensure!(
                meta["natsServerMonitoringEndpoint"] == endpoint.as_str(),
                "{}: endpoint",
                r.name
            );
        }
    }
    Ok(())
}
