//! Cluster-wide policies in every render: locked-down pods, network policies that keep
//! auditors on NATS (autoscaling: `deploy/scaling.rs`).

use std::collections::BTreeSet;

use anyhow::{bail, ensure, Context};
use serde_json::{json, Value};

use super::{
    arr, find, kind_of, name_of, pod_templates, renders, s, Render, AUDIT_NAMESPACE, NAMESPACE,
};

/// The only seccomp profile a container may set instead of the pod's RuntimeDefault
/// (components/auditor-sandbox/seccomp/bwrap.json, installed on the auditor nodes).
const BWRAP_PROFILE: &str = "loopgate/bwrap.json";

/// The namespace an object belongs in: the auditors' tree in its own, the rest in the app's.
fn home_namespace(o: &Value) -> &'static str {
    if s(o, "/metadata/labels/app.kubernetes.io~1component") == "auditor"
        || s(o, "/metadata/name") == "loopgate-auditor-config"
        || s(o, "/metadata/name").starts_with("loopgate-auditor-config-")
        || s(o, "/metadata/name") == "loopgate-auditor"
    {
        AUDIT_NAMESPACE
    } else {
        NAMESPACE
    }
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
                ns == NAMESPACE || ns == AUDIT_NAMESPACE,
                "{}: {} in {ns:?}",
                r.name,
                name_of(o)
            );
            // Auditor objects only in the audit namespace; the audit namespace holds nothing
            // else but its policies and the auditor's one Secret.
            let audit_only = matches!(s(o, "/kind"), "NetworkPolicy" | "Secret");
            ensure!(
                ns == home_namespace(o) || (audit_only && ns == AUDIT_NAMESPACE),
                "{}: {} belongs in {}",
                r.name,
                name_of(o),
                home_namespace(o)
            );
        }
        // The app namespace enforces "restricted", except where components/executor-sandbox
        // runs the executors' agents in bubblewrap (prod): that needs the executor pods
        // relaxed, which Pod Security admission allows only at "privileged" (warn and audit
        // stay "restricted"; every other pod is still checked as restricted below). Moving the
        // executors into their own namespace, as the auditors are, is what would lift this.
        let app = find(r, "Namespace", NAMESPACE)?;
        let executor_sandbox = r.name.starts_with("prod");
        let enforce = s(app, "/metadata/labels/pod-security.kubernetes.io~1enforce");
        ensure!(
            enforce == "restricted" || (executor_sandbox && enforce == "privileged"),
            "{}: {NAMESPACE} must enforce restricted",
            r.name
        );
        find(r, "Namespace", AUDIT_NAMESPACE)?;
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
        for ns in [NAMESPACE, AUDIT_NAMESPACE] {
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
