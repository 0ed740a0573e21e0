//! NATS's monitoring port (issue 38 item 10): it needs no password and names every connection,
//! subscription and stream, so it listens on loopback in deploy/nats; where Kubernetes needs it
//! on the pod network (KEDA's nats-jetstream scaler, the kubelet's probes) only the keda and
//! monitoring namespaces may reach it, in every render.

use std::collections::BTreeSet;

use anyhow::{ensure, Context};
use serde_json::Value;

use super::{arr, find, kind_of, renders, repo, s, NAMESPACE};

/// The monitor address of a nats-server config (`http:`/`http_port:`/`monitor_port:`).
fn monitor_listen(conf: &str) -> Option<String> {
    conf.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .find_map(|l| {
            [
                "http:",
                "https:",
                "http_port:",
                "https_port:",
                "monitor_port:",
            ]
            .iter()
            .find_map(|k| l.strip_prefix(k))
            .map(|v| v.trim().trim_matches('"').to_string())
        })
}

/// NATS's monitoring port: loopback in deploy/nats; in Kubernetes, where KEDA and the probes
/// read it on the pod network, only the keda and monitoring namespaces may reach it.
#[test]
fn nats_monitoring_is_on_loopback_or_fenced_to_keda_and_monitoring() -> anyhow::Result<()> {
    let standalone = std::fs::read_to_string(repo().join("deploy/nats/nats-server.conf"))?;
    let listen = monitor_listen(&standalone).unwrap_or_default();
    ensure!(
        listen.starts_with("127.0.0.1:"),
        "deploy/nats/nats-server.conf: monitoring listens on {listen:?}, not loopback"
    );
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let conf = s(
            find(r, "ConfigMap", "nats-config").or_else(|_| {
                kind_of(r, "ConfigMap")
                    .find(|c| s(c, "/metadata/name").starts_with("nats-config"))
                    .context("nats-config")
            })?,
            "/data/nats-server.conf",
        );
        let listen = monitor_listen(conf).context("no monitoring listener")?;
        if listen.starts_with("127.0.0.1:") {
            continue;
        }
        let port = listen.rsplit(':').next().unwrap_or("").parse::<u64>()?;
        let mut peers = BTreeSet::new();
        for p in kind_of(r, "NetworkPolicy") {
            let selects_nats = s(
                p,
                "/spec/podSelector/matchLabels/app.kubernetes.io~1component",
            ) == "nats";
            if !selects_nats || s(p, "/metadata/namespace") != NAMESPACE {
                continue;
            }
            for rule in arr(p, "/spec/ingress") {
                let ports = arr(rule, "/ports");
                let covers = ports.is_empty()
                    || ports
                        .iter()
                        .any(|q| q.get("port").and_then(Value::as_u64) == Some(port));
                if !covers {
                    continue;
                }
                for peer in arr(rule, "/from") {
                    let ns = s(
                        peer,
                        "/namespaceSelector/matchLabels/kubernetes.io~1metadata.name",
                    );
                    let only_namespace = peer.get("podSelector").is_none()
                        && peer.get("ipBlock").is_none()
                        && !ns.is_empty();
                    peers.insert(if only_namespace {
                        ns.to_string()
                    } else {
                        peer.to_string()
                    });
                }
                if arr(rule, "/from").is_empty() {
                    peers.insert("anyone".into());
                }
            }
        }
        let want = BTreeSet::from(["keda".to_string(), "monitoring".to_string()]);
        ensure!(
            peers == want,
            "{}: NATS monitoring ({listen}) is reachable from {peers:?}, want only {want:?}",
            r.name
        );
    }
    Ok(())
}
