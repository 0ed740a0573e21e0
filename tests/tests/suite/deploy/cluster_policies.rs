//! Cluster-wide policies in every render: three namespaces (app, exec, audit) with the app one
//! always "restricted", locked-down pods, network policies that keep auditors on NATS and let
//! executors reach it across namespaces (autoscaling: `deploy/scaling.rs`).

use std::collections::BTreeSet;

use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};

use super::{
    arr, find, kind_of, name_of, pod_templates, renders, s, workloads, Render, AUDIT_NAMESPACE,
    EXEC_NAMESPACE, NAMESPACE,
};

/// The only seccomp profile a container may set instead of the pod's RuntimeDefault
/// (components/auditor-sandbox/seccomp/bwrap.json, installed on the auditor nodes).
const BWRAP_PROFILE: &str = "loopgate/bwrap.json";

/// The namespace an object belongs in: the auditors' and the executors' trees in their own,
/// the rest in the app's.
fn home_namespace(o: &Value) -> &'static str {
    let name = s(o, "/metadata/name");
    let component = s(o, "/metadata/labels/app.kubernetes.io~1component");
    let of = |prefix: &str| name == prefix || name.starts_with(&format!("{prefix}-config"));
    if component == "auditor" || of("loopgate-auditor") {
        AUDIT_NAMESPACE
    } else if matches!(component, "executor" | "executor-gui")
        || of("loopgate-executor")
        || of("loopgate-executor-gui")
    {
        EXEC_NAMESPACE
    } else {
        NAMESPACE
    }
}

/// Pod Security per namespace: exactly the app, exec and audit Namespaces; the app namespace
/// enforces "restricted" in every render (the pods that need bubblewrap live elsewhere); the
/// exec namespace relaxes to "baseline" and the audit namespace to "privileged" exactly where a
/// sandbox component needs it (prod); warn and audit stay "restricted" everywhere (that every
/// pod passes its namespace's level: `pod_security.rs`).
#[test]
fn the_app_namespace_enforces_restricted_and_only_worker_namespaces_relax() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let names: BTreeSet<&str> = kind_of(r, "Namespace")
            .map(|n| s(n, "/metadata/name"))
            .collect();
        ensure!(
            names == BTreeSet::from([NAMESPACE, EXEC_NAMESPACE, AUDIT_NAMESPACE]),
            "{}: Namespaces {names:?}",
            r.name
        );
        let sandboxed = r.name.starts_with("prod");
        for ns in kind_of(r, "Namespace") {
            let name = s(ns, "/metadata/name");
            let level = |mode: &str| {
                s(
                    ns,
                    &format!("/metadata/labels/pod-security.kubernetes.io~1{mode}"),
                )
            };
            for mode in ["warn", "audit"] {
                ensure!(
                    level(mode) == "restricted",
                    "{}: {name} {mode}s {:?}",
                    r.name,
                    level(mode)
                );
            }
            let want = match (name, sandboxed) {
                (EXEC_NAMESPACE, true) => "baseline",
                (AUDIT_NAMESPACE, true) => "privileged",
                _ => "restricted",
            };
            ensure!(
                level("enforce") == want,
                "{}: {name} enforces {:?}, want {want}",
                r.name,
                level("enforce")
            );
        }
        // What admission would refuse under "restricted" (a user namespace, an unmasked /proc,
        // a Localhost profile) runs only in a worker namespace that relaxes it.
        let enforce = |ns: &str| {
            find(r, "Namespace", ns)
                .map(|n| s(n, "/metadata/labels/pod-security.kubernetes.io~1enforce").to_string())
        };
        for (workload, w, pod) in workloads(r) {
            let ns = s(w, "/metadata/namespace");
            let relaxed = pod.pointer("/spec/hostUsers") == Some(&Value::Bool(false))
                || arr(pod, "/spec/containers").iter().any(|c| {
                    c.pointer("/securityContext/procMount").is_some()
                        || c.pointer("/securityContext/appArmorProfile").is_some()
                        || c.pointer("/securityContext/seccompProfile").is_some()
                });
            if relaxed {
                ensure!(
                    ns != NAMESPACE && enforce(ns)? != "restricted",
                    "{}: {workload} is relaxed in {ns}, which enforces {}",
                    r.name,
                    enforce(ns)?
                );
            }
        }
    }
    Ok(())
}

#[test]
fn pods_run_locked_down_with_resources_in_the_namespace() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let cluster_scoped = |o: &&Value| matches!(s(o, "/kind"), "Namespace" | "PriorityClass");
        for o in r.objects.iter().filter(|o| !cluster_scoped(o)) {
            let ns = s(o, "/metadata/namespace");
            ensure!(
                [NAMESPACE, EXEC_NAMESPACE, AUDIT_NAMESPACE].contains(&ns),
                "{}: {} in {ns:?}",
                r.name,
                name_of(o)
            );
            // Executor and auditor objects only in their namespaces; those hold nothing else
            // but their policies, their Secrets and (exec, components/local-model) the
            // ExternalName alias of the model server.
            let worker_ns = ns == EXEC_NAMESPACE || ns == AUDIT_NAMESPACE;
            let alias = s(o, "/kind") == "Service" && s(o, "/spec/type") == "ExternalName";
            let shared = matches!(s(o, "/kind"), "NetworkPolicy" | "Secret")
                || (alias && ns == EXEC_NAMESPACE);
            ensure!(
                ns == home_namespace(o) || (shared && worker_ns),
                "{}: {} belongs in {}",
                r.name,
                name_of(o),
                home_namespace(o)
            );
            // A worker namespace's NATS Secret (dev renders it) holds only its role's password.
            let nats_users = s(o, "/metadata/name").starts_with("loopgate-nats-users");
            if s(o, "/kind") == "Secret" && nats_users && worker_ns {
                let keys: Vec<&String> = o
                    .get("data")
                    .and_then(Value::as_object)
                    .map(|d| d.keys().collect())
                    .unwrap_or_default();
                let role = if ns == EXEC_NAMESPACE {
                    "executor"
                } else {
                    "auditor"
                };
                ensure!(
                    keys.len() == 1 && keys[0] == role,
                    "{}: {} in {ns} holds {keys:?}, want only {role}",
                    r.name,
                    name_of(o)
                );
            }
        }
        // The executors, their autoscalers and their disruption budgets are in the exec
        // namespace (the Pod Security levels: the test above).
        for name in ["loopgate-executor", "loopgate-executor-gui"] {
            let deployment = find(r, "Deployment", name)?;
            ensure!(
                s(deployment, "/metadata/namespace") == EXEC_NAMESPACE,
                "{}: Deployment/{name} in {}",
                r.name,
                s(deployment, "/metadata/namespace")
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
                // (bubblewrap), each inside a user namespace, with the Localhost bubblewrap
                // profile (never Unconfined).
                if sc.get("seccompProfile").is_some() || sc.get("procMount").is_some() {
                    let sandboxed = [
                        "Deployment/loopgate-auditor",
                        "Deployment/loopgate-executor",
                        "Deployment/loopgate-executor-gui",
                    ]
                    .contains(&workload.as_str())
                        && spec.get("hostUsers") == no;
                    ensure!(
                        sandboxed,
                        "{at}: seccomp/procMount relaxed outside a sandboxed worker's user namespace"
                    );
                    let profile = sc.get("seccompProfile");
                    ensure!(
                        profile.is_none_or(|p| s(p, "/type") == "Localhost"
                            && s(p, "/localhostProfile") == BWRAP_PROFILE),
                        "{at}: seccomp {profile:?}, want Localhost {BWRAP_PROFILE}"
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
pub(super) fn selects(selector: &Value, labels: &Value) -> bool {
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

/// Whether a NetworkPolicy peer (in a policy of namespace `policy_ns`) admits pods with
/// `labels` in namespace `pod_ns`.
fn peer_selects(peer: &Value, policy_ns: &str, pod_ns: &str, labels: &Value) -> bool {
    let in_namespace = match peer.get("namespaceSelector") {
        None => pod_ns == policy_ns,
        Some(ns) => {
            let named = s(ns, "/matchLabels/kubernetes.io~1metadata.name");
            named == pod_ns || (ns == &json!({}))
        }
    };
    peer.get("ipBlock").is_none()
        && in_namespace
        && peer
            .get("podSelector")
            .is_none_or(|sel| selects(sel, labels))
}

#[test]
fn auditors_reach_only_nats_and_dns_from_their_own_pool() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let policies: Vec<&Value> = kind_of(r, "NetworkPolicy").collect();
        for ns in [NAMESPACE, EXEC_NAMESPACE, AUDIT_NAMESPACE] {
            let default_deny = policies.iter().any(|p| {
                s(p, "/metadata/namespace") == ns
                    && p["spec"]["podSelector"] == json!({})
                    && arr(p, "/spec/policyTypes").len() == 2
                    && p.pointer("/spec/ingress").is_none()
                    && p.pointer("/spec/egress").is_none()
            });
            ensure!(default_deny, "{}: no default-deny policy in {ns}", r.name);
        }
        let auditor = pod_labels(r, "Deployment", "loopgate-auditor")?;
        let nats = pod_labels(r, "StatefulSet", "nats")?;
        let namespace_is = |peer: &Value, ns: &str| {
            s(
                peer,
                "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
            ) == ns
        };
        let guarding = |target: &'_ Value, ns: &'_ str| {
            let target = target.clone();
            let ns = ns.to_string();
            policies.iter().copied().filter(move |p| {
                s(p, "/metadata/namespace") == ns && selects(&p["spec"]["podSelector"], &target)
            })
        };
        for p in guarding(auditor, AUDIT_NAMESPACE) {
            for rule in arr(p, "/spec/egress") {
                let to = arr(rule, "/to");
                ensure!(
                    !to.is_empty() && !ports(rule).is_empty(),
                    "{}: {} opens auditors",
                    r.name,
                    name_of(p)
                );
                for peer in to {
                    let to_nats = namespace_is(peer, NAMESPACE)
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
        // NATS lets auditors in (from their namespace); Redis lets in the manager only.
        let manager = pod_labels(r, "Deployment", "loopgate-manager")?;
        let redis = pod_labels(r, "StatefulSet", "redis")?;
        let admits = |target: &Value, client: &Value, client_ns: &str, port: u64| {
            guarding(target, NAMESPACE)
                .flat_map(|p| arr(p, "/spec/ingress"))
                .any(|rule| {
                    ports(rule).contains(&port)
                        && arr(rule, "/from")
                            .iter()
                            .any(|f| peer_selects(f, NAMESPACE, client_ns, client))
                })
        };
        ensure!(
            admits(nats, auditor, AUDIT_NAMESPACE, 4222),
            "{}: auditors cannot reach NATS",
            r.name
        );
        ensure!(
            !admits(redis, auditor, AUDIT_NAMESPACE, 6379),
            "{}: auditors can reach Redis",
            r.name
        );
        ensure!(
            admits(redis, manager, NAMESPACE, 6379),
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

/// The NetworkPolicies of namespace `ns` whose pod selector picks pods with `labels`.
fn guarding<'a>(r: &'a Render, labels: &Value, ns: &str) -> Vec<&'a Value> {
    kind_of(r, "NetworkPolicy")
        .filter(|p| s(p, "/metadata/namespace") == ns && selects(&p["spec"]["podSelector"], labels))
        .collect()
}

/// Whether the policies guarding `target` (in `target_ns`) admit `client` from `client_ns`.
fn admits(
    r: &Render,
    (target, target_ns): (&Value, &str),
    (client, client_ns): (&Value, &str),
    port: u64,
) -> bool {
    guarding(r, target, target_ns)
        .into_iter()
        .flat_map(|p| arr(p, "/spec/ingress"))
        .any(|rule| {
            ports(rule).contains(&port)
                && arr(rule, "/from")
                    .iter()
                    .any(|f| peer_selects(f, target_ns, client_ns, client))
        })
}

/// Whether the policies guarding `client` (in `client_ns`) let it send to `target` in
/// `target_ns` on `port`.
fn reaches(
    r: &Render,
    (client, client_ns): (&Value, &str),
    (target, target_ns): (&Value, &str),
    port: u64,
) -> bool {
    guarding(r, client, client_ns)
        .into_iter()
        .flat_map(|p| arr(p, "/spec/egress"))
        .any(|rule| {
            ports(rule).contains(&port)
                && arr(rule, "/to")
                    .iter()
                    .any(|t| peer_selects(t, client_ns, target_ns, target))
        })
}

/// The executors (cli and gui) live in the exec namespace and reach NATS in the app namespace
/// across it: NATS admits them from there and their egress names NATS's namespace. Their
/// egress is otherwise NATS, DNS, public 80/443 (private ranges excluded), dev's in-cluster
/// model server and, with components/otel, the collector; never Redis or the manager.
#[test]
fn executors_reach_nats_across_namespaces_and_nothing_else_in_the_cluster() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let private = ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"];
    for r in renders {
        let nats = pod_labels(r, "StatefulSet", "nats")?;
        let nats_ns = s(find(r, "StatefulSet", "nats")?, "/metadata/namespace");
        let redis = pod_labels(r, "StatefulSet", "redis")?;
        let manager = pod_labels(r, "Deployment", "loopgate-manager")?;
        for name in ["loopgate-executor", "loopgate-executor-gui"] {
            let at = format!("{} {name}", r.name);
            let executor = pod_labels(r, "Deployment", name)?;
            let ns = s(find(r, "Deployment", name)?, "/metadata/namespace");
            ensure!(ns == EXEC_NAMESPACE, "{at} in {ns}");
            ensure!(
                admits(r, (nats, nats_ns), (executor, ns), 4222),
                "{at}: NATS does not admit the executors from {ns}"
            );
            ensure!(
                reaches(r, (executor, ns), (nats, nats_ns), 4222),
                "{at}: the executors' egress does not reach NATS in {nats_ns}"
            );
            ensure!(
                !admits(r, (redis, nats_ns), (executor, ns), 6379)
                    && !reaches(r, (executor, ns), (redis, nats_ns), 6379),
                "{at}: executors can reach Redis"
            );
            ensure!(
                !reaches(r, (executor, ns), (manager, nats_ns), 7600),
                "{at}: executors can reach the manager"
            );
            for p in guarding(r, executor, ns) {
                for rule in arr(p, "/spec/egress") {
                    let to = arr(rule, "/to");
                    ensure!(
                        !to.is_empty() && !ports(rule).is_empty(),
                        "{at}: {} opens the executors",
                        name_of(p)
                    );
                    for peer in to {
                        let named = s(
                            peer,
                            "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                        );
                        let component = s(
                            peer,
                            "/podSelector/matchLabels/app.kubernetes.io~1component",
                        );
                        let public = peer.get("ipBlock").is_some_and(|b| {
                            s(b, "/cidr") == "0.0.0.0/0"
                                && private
                                    .iter()
                                    .all(|p| arr(b, "/except").contains(&json!(p)))
                        });
                        let allowed: BTreeSet<u64> = match (named, component) {
                            _ if public => [80, 443].into(),
                            (ns, "nats") if ns == nats_ns => [4222].into(),
                            (ns, "model-server") if ns == nats_ns => [8080].into(),
                            ("kube-system", _) => [53].into(),
                            ("observability", _) if r.name.contains("optional") => {
                                [4317, 4318].into()
                            }
                            _ => bail!("{at}: {} lets executors reach {peer}", name_of(p)),
                        };
                        ensure!(
                            ports(rule).is_subset(&allowed),
                            "{at}: {} executor ports",
                            name_of(p)
                        );
                    }
                }
            }
        }
    }
    Ok(())
}

/// The Localhost profile that replaces `Unconfined` for bubblewrap: deny by default, the
/// runtime's usual allow-list plus the sandbox's own syscalls, and the dangerous ones still
/// refused.
#[test]
fn the_bwrap_seccomp_profile_allows_the_sandbox_and_refuses_the_dangerous() -> anyhow::Result<()> {
    let path = super::repo().join("deploy/k8s/components/auditor-sandbox/seccomp/bwrap.json");
    let profile: Value = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
    ensure!(
        s(&profile, "/defaultAction") == "SCMP_ACT_ERRNO",
        "deny by default"
    );
    let mut allowed = BTreeSet::new();
    for rule in arr(&profile, "/syscalls") {
        ensure!(
            s(rule, "/action") == "SCMP_ACT_ALLOW" && rule.get("args").is_none(),
            "only plain allow rules: {rule}"
        );
        allowed.extend(arr(rule, "/names").iter().filter_map(Value::as_str));
    }
    for (syscall, want) in [
        // bubblewrap: user/mount/pid namespaces, bind mounts, a fresh /proc, the new root.
        ("unshare", true),
        ("clone", true),
        ("clone3", true),
        ("mount", true),
        ("umount2", true),
        ("pivot_root", true),
        ("setns", true),
        ("sethostname", true),
        // what checks need anyway
        ("execve", true),
        ("openat", true),
        ("socket", true),
        // still refused: kernel attack surface a sandbox never needs
        ("bpf", false),
        ("keyctl", false),
        ("add_key", false),
        ("ptrace", false),
        ("perf_event_open", false),
        ("init_module", false),
        ("finit_module", false),
        ("kexec_load", false),
        ("open_by_handle_at", false),
        ("userfaultfd", false),
        ("fsopen", false),
        ("move_mount", false),
        ("reboot", false),
        ("swapon", false),
    ] {
        ensure!(
            allowed.contains(syscall) == want,
            "{syscall}: allowed {} (want {want})",
            !want
        );
    }
    Ok(())
}
