//! Namespaces as kustomize parameters (components/namespaces): a rename reaches every object
//! and every cross-namespace reference.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{ensure, Context};
use serde_json::Value;

use super::{arr, find, kind_of, name_of, render_dir, renders, repo, s, Render};

fn copy_dir(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Namespaces are kustomize parameters (components/namespaces): renaming the three literals
/// of an overlay moves every object and every reference (KEDA's endpoint, the executors' and
/// auditors' NATS URL, the cross-namespace policy peers, dev's ExternalName to the model
/// server); nothing is left in, or points at, the defaults, and each reference names the
/// renamed namespace it should.
#[test]
fn renamed_namespaces_reach_every_object_and_reference() -> anyhow::Result<()> {
    if renders()?.is_none() {
        return Ok(());
    }
    let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
    for overlay in ["dev", "prod"] {
        let tmp = tempfile::tempdir()?;
        let k8s = tmp.path().join("k8s");
        copy_dir(&repo().join("deploy/k8s"), &k8s)?;
        let file = k8s.join(format!("overlays/{overlay}/kustomization.yaml"));
        let text = std::fs::read_to_string(&file)?;
        let mut renamed = text.clone();
        for (from, to) in [
            ("app=loopgate", "app=team-a"),
            ("exec=loopgate-exec", "exec=team-a-exec"),
            ("audit=loopgate-audit", "audit=team-a-audit"),
        ] {
            let (from, to) = (format!("      - {from}\n"), format!("      - {to}\n"));
            ensure!(
                renamed.contains(&from),
                "{overlay}: no namespace parameter {from:?}"
            );
            renamed = renamed.replace(&from, &to);
        }
        std::fs::write(&file, renamed)?;
        let objects = render_dir(&kubectl, &k8s.join(format!("overlays/{overlay}")))?;
        for o in objects.iter().filter(|o| s(o, "/kind") != "PriorityClass") {
            let at = format!("{overlay}: {}", name_of(o));
            let ns = if s(o, "/kind") == "Namespace" {
                s(o, "/metadata/name")
            } else {
                s(o, "/metadata/namespace")
            };
            ensure!(
                ["team-a", "team-a-exec", "team-a-audit"].contains(&ns),
                "{at} in {ns:?}"
            );
            // References to the defaults, outside config file text (the auditor's TOML keeps
            // its default URL; the LOOPGATE_NATS_URL env var overrides it).
            let mut spec = o.clone();
            if s(o, "/kind") == "ConfigMap" {
                spec["data"] = Value::Null;
            }
            let text = serde_json::to_string(&spec)?;
            for stale in [
                "\"kubernetes.io/metadata.name\":\"loopgate\"",
                "\"kubernetes.io/metadata.name\":\"loopgate-audit\"",
                "\"kubernetes.io/metadata.name\":\"loopgate-exec\"",
                ".loopgate.svc",
            ] {
                ensure!(!text.contains(stale), "{at} still names {stale}");
            }
        }
        renamed_references_point_at_the_new_namespaces(overlay, &objects)?;
    }
    Ok(())
}

/// After the rename: the three Namespaces, the executors in the exec namespace and the auditor
/// in the audit one, reaching NATS in the app namespace by name and by policy, and NATS (and
/// dev's model server) admitting them from theirs.
fn renamed_references_point_at_the_new_namespaces(
    overlay: &str,
    objects: &[Value],
) -> anyhow::Result<()> {
    let r = Render {
        name: "renamed",
        objects: objects.to_vec(),
    };
    let namespaces: BTreeSet<&str> = kind_of(&r, "Namespace")
        .map(|n| s(n, "/metadata/name"))
        .collect();
    ensure!(
        namespaces == BTreeSet::from(["team-a", "team-a-exec", "team-a-audit"]),
        "{overlay}: Namespaces {namespaces:?}"
    );
    let nats_url = "nats://nats.team-a.svc.cluster.local:4222";
    for (deployment, ns) in [
        ("loopgate-executor", "team-a-exec"),
        ("loopgate-executor-gui", "team-a-exec"),
        ("loopgate-auditor", "team-a-audit"),
    ] {
        let d = find(&r, "Deployment", deployment)?;
        ensure!(
            s(d, "/metadata/namespace") == ns,
            "{overlay}: {deployment} in {}",
            s(d, "/metadata/namespace")
        );
        let env = arr(d, "/spec/template/spec/containers/0/env");
        let url = env
            .iter()
            .find(|e| s(e, "/name") == "LOOPGATE_NATS_URL")
            .map(|e| s(e, "/value"));
        ensure!(
            url == Some(nats_url),
            "{overlay}: {deployment} LOOPGATE_NATS_URL {url:?}"
        );
    }
    for so in kind_of(&r, "ScaledObject") {
        let endpoint = s(so, "/spec/triggers/0/metadata/natsServerMonitoringEndpoint");
        ensure!(
            endpoint == "nats-headless.team-a.svc.cluster.local:8222",
            "{overlay}: {} reads {endpoint}",
            name_of(so)
        );
    }
    // The peers by namespace: NATS admits both worker namespaces, each worker's egress names
    // the app namespace.
    let peer_namespaces = |policy: &Value, rules: &str, side: &str| -> BTreeSet<String> {
        arr(policy, rules)
            .iter()
            .flat_map(|rule| arr(rule, side))
            .map(|peer| {
                s(
                    peer,
                    "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                )
                .to_string()
            })
            .filter(|ns| !ns.is_empty())
            .collect()
    };
    let in_ns = |kind: &str, name: &str, ns: &str| {
        r.objects
            .iter()
            .find(|o| {
                s(o, "/kind") == kind
                    && s(o, "/metadata/name") == name
                    && s(o, "/metadata/namespace") == ns
            })
            .with_context(|| format!("{overlay}: {kind}/{name} not in {ns}"))
    };
    let nats = in_ns("NetworkPolicy", "nats", "team-a")?;
    let admitted = peer_namespaces(nats, "/spec/ingress", "/from");
    for ns in ["team-a-exec", "team-a-audit"] {
        ensure!(
            admitted.contains(ns),
            "{overlay}: NATS admits {admitted:?}, not {ns}"
        );
    }
    for (policy, ns) in [("executor", "team-a-exec"), ("auditor", "team-a-audit")] {
        let reached = peer_namespaces(in_ns("NetworkPolicy", policy, ns)?, "/spec/egress", "/to");
        ensure!(
            reached.contains("team-a"),
            "{overlay}: {policy} egress reaches {reached:?}"
        );
    }
    // components/local-model (dev): the executors' ExternalName and both policies follow.
    if overlay == "dev" {
        let alias = in_ns("Service", "model-server", "team-a-exec")?;
        ensure!(
            s(alias, "/spec/externalName") == "model-server.team-a.svc.cluster.local",
            "{overlay}: model-server alias -> {}",
            s(alias, "/spec/externalName")
        );
        let server = in_ns("NetworkPolicy", "model-server", "team-a")?;
        ensure!(
            peer_namespaces(server, "/spec/ingress", "/from").contains("team-a-exec"),
            "{overlay}: the model server does not admit the executors"
        );
        let clients = in_ns("NetworkPolicy", "allow-model-server-clients", "team-a-exec")?;
        ensure!(
            peer_namespaces(clients, "/spec/egress", "/to").contains("team-a"),
            "{overlay}: the executors cannot reach the model server"
        );
    }
    Ok(())
}
