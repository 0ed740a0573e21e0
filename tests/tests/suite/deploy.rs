//! Offline checks of the Kubernetes deployment in `deploy/k8s`, on what `kubectl kustomize`
//! renders for each overlay (dev, prod, prod-ha) and for prod with the optional components: every
//! role's ConfigMap is parsed and resolved by that binary's own config code with the env its
//! container gets, env vars are ones the binaries read, grace periods cover the drains, pods
//! are locked down, auditors reach only NATS, KEDA scales executors on the real exec queue.
//! `scripts/check-deploy.sh --manifests-only` (run by the first test) adds
//! `kubernetes-validate --strict` and the KEDA schema. Without kubectl: a SKIP line.
//! The per-container checks are in `deploy/daemon_configs.rs`, the cluster-wide policies
//! (security contexts, network policies) in `deploy/cluster_policies.rs`, autoscaling and the
//! never-below-busy-pods replica table in `deploy/scaling.rs`, the renamed namespaces in
//! `deploy/namespaces.rs`, Pod Security admission and the executors' sandbox profiles and
//! grace in `deploy/pod_security.rs`, NATS's monitoring port in `deploy/nats_monitor.rs`,
//! Redis with failover (overlays/prod-ha) in `deploy/redis_ha.rs`.

mod cluster_policies;
mod daemon_configs;
mod namespaces;
mod nats_monitor;
mod pod_security;
mod redis_ha;
mod scaling;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use anyhow::{bail, ensure, Context};
use base64::Engine as _;
use serde_json::Value;

const NAMESPACE: &str = "loopgate";
/// The auditor signing key that stands in for a Secret the render does not hold.
const PLACEHOLDER_SEED: &str = "1111111111111111111111111111111111111111111111111111111111111111";
/// The auditors' own namespace (deploy/k8s/audit).
const AUDIT_NAMESPACE: &str = "loopgate-audit";
/// The executors' own namespace (deploy/k8s/exec).
const EXEC_NAMESPACE: &str = "loopgate-exec";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Manager,
    Executor,
    Auditor,
}

struct Render {
    name: &'static str,
    objects: Vec<Value>,
}

struct Daemon<'a> {
    role: Role,
    at: String,
    workload: &'a Value,
    pod: &'a Value,
    container: &'a Value,
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn parse_docs(text: &str) -> anyhow::Result<Vec<Value>> {
    let mut docs = Vec::new();
    for doc in text.split("\n---\n").filter(|d| !d.trim().is_empty()) {
        docs.push(serde_yaml_ng::from_str::<Value>(doc).context("rendered YAML")?);
    }
    Ok(docs)
}

fn render_dir(kubectl: &str, dir: &Path) -> anyhow::Result<Vec<Value>> {
    let out = Command::new(kubectl).arg("kustomize").arg(dir).output()?;
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "kubectl kustomize {}: {err}",
        dir.display()
    );
    parse_docs(&String::from_utf8(out.stdout)?)
}

/// `prod` plus every optional component, the way an operator adds them to an overlay.
fn render_prod_optional(kubectl: &str) -> anyhow::Result<Vec<Value>> {
    let tmp = tempfile::tempdir()?;
    let dir = tmp.path().canonicalize()?;
    let k8s = repo().join("deploy/k8s").canonicalize()?;
    // kustomize takes only relative paths: climb from the temp dir to `/`.
    let rel = format!(
        "{}{}",
        "../".repeat(dir.components().count() - 1),
        k8s.strip_prefix("/")?.display()
    );
    let text = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n\
         resources: [{rel}/overlays/prod]\n\
         components: [{rel}/components/executor-hpa, {rel}/components/otel, {rel}/components/monitoring]\n"
    );
    std::fs::write(dir.join("kustomization.yaml"), text)?;
    render_dir(kubectl, &dir)
}

/// The renders, once per test binary; `None` (after a SKIP line) without kubectl.
fn renders() -> anyhow::Result<Option<&'static [Render]>> {
    static RENDERS: OnceLock<Result<Option<Vec<Render>>, String>> = OnceLock::new();
    let cached = RENDERS.get_or_init(|| {
        let kubectl = std::env::var("KUBECTL").unwrap_or_else(|_| "kubectl".into());
        let found = Command::new(&kubectl)
            .args(["version", "--client"])
            .output();
        if !found.is_ok_and(|o| o.status.success()) {
            println!("SKIP: deploy manifest checks: kubectl not found (set KUBECTL)");
            return Ok(None);
        }
        let k8s = repo().join("deploy/k8s");
        let all = || -> anyhow::Result<Vec<Render>> {
            Ok(vec![
                Render {
                    name: "dev",
                    objects: render_dir(&kubectl, &k8s.join("overlays/dev"))?,
                },
                Render {
                    name: "prod",
                    objects: render_dir(&kubectl, &k8s.join("overlays/prod"))?,
                },
                Render {
                    name: "prod-ha",
                    objects: render_dir(&kubectl, &k8s.join("overlays/prod-ha"))?,
                },
                Render {
                    name: "prod+optional",
                    objects: render_prod_optional(&kubectl)?,
                },
            ])
        };
        all().map(Some).map_err(|e| format!("{e:#}"))
    });
    match cached {
        Ok(renders) => Ok(renders.as_deref()),
        Err(e) => bail!("{e}"),
    }
}

fn s<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

fn arr<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

fn name_of(v: &Value) -> String {
    format!("{}/{}", s(v, "/kind"), s(v, "/metadata/name"))
}

fn find<'a>(r: &'a Render, kind: &str, name: &str) -> anyhow::Result<&'a Value> {
    let found = r
        .objects
        .iter()
        .find(|o| s(o, "/kind") == kind && s(o, "/metadata/name") == name);
    found.with_context(|| format!("{}: {kind}/{name} not rendered", r.name))
}

fn kind_of<'a>(r: &'a Render, kind: &'a str) -> impl Iterator<Item = &'a Value> {
    r.objects.iter().filter(move |o| s(o, "/kind") == kind)
}

/// (workload, pod template) of every Deployment and StatefulSet.
fn pod_templates(r: &Render) -> impl Iterator<Item = (String, &Value)> {
    workloads(r).map(|(name, _, pod)| (name, pod))
}

/// (name, workload, pod template) of every Deployment and StatefulSet.
fn workloads(r: &Render) -> impl Iterator<Item = (String, &Value, &Value)> {
    let workloads = r
        .objects
        .iter()
        .filter(|o| matches!(s(o, "/kind"), "Deployment" | "StatefulSet"));
    workloads.filter_map(|o| Some((name_of(o), o, o.pointer("/spec/template")?)))
}

/// The loopgate containers (by the binary they run); every role must be present.
fn daemons(r: &Render) -> anyhow::Result<Vec<Daemon<'_>>> {
    let mut out = Vec::new();
    for (name, workload, pod) in workloads(r) {
        for container in arr(pod, "/spec/containers") {
            let role = match s(container, "/command/0").rsplit('/').next().unwrap_or("") {
                "loopgate-manager" => Role::Manager,
                "loopgate-executor" => Role::Executor,
                "loopgate-auditor" => Role::Auditor,
                _ => continue,
            };
            out.push(Daemon {
                role,
                at: format!("{} {name}", r.name),
                workload,
                pod,
                container,
            });
        }
    }
    for role in [Role::Manager, Role::Executor, Role::Auditor] {
        ensure!(
            out.iter().any(|d| d.role == role),
            "{}: no {role:?} container",
            r.name
        );
    }
    Ok(out)
}

/// The config file a daemon reads: `--config PATH`, from the ConfigMap mounted on its folder.
fn config_of(r: &Render, d: &Daemon) -> anyhow::Result<String> {
    let args: Vec<&str> = arr(d.container, "/args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let path = args
        .windows(2)
        .find(|w| w[0] == "--config")
        .map(|w| w[1])
        .context("no --config")?;
    let (dir, file) = path.rsplit_once('/').context("config path")?;
    let mounts = arr(d.container, "/volumeMounts");
    let mount = mounts
        .iter()
        .find(|m| s(m, "/mountPath") == dir)
        .context("config mount")?;
    let volumes = arr(d.pod, "/spec/volumes");
    let volume = volumes
        .iter()
        .find(|v| s(v, "/name") == s(mount, "/name"))
        .context("volume")?;
    let cm = find(r, "ConfigMap", s(volume, "/configMap/name"))?;
    let text = s(cm, &format!("/data/{file}"));
    ensure!(!text.is_empty(), "{path}: no key {file} in {}", name_of(cm));
    Ok(text.to_string())
}

/// The container's env as its process sees it: literal values, Secret values where the Secret
/// is rendered (dev), a placeholder where it is created out of band (prod).
fn env_of(r: &Render, container: &Value) -> anyhow::Result<BTreeMap<String, String>> {
    ensure!(
        container.get("envFrom").is_none(),
        "envFrom hides which variables are set"
    );
    let mut env = BTreeMap::new();
    for e in arr(container, "/env") {
        let name = s(e, "/name").to_string();
        let value = match (e.get("value"), e.pointer("/valueFrom/secretKeyRef")) {
            (Some(v), None) => v.as_str().context("env value")?.to_string(),
            (None, Some(secret)) => match find(r, "Secret", s(secret, "/name")) {
                Ok(obj) => {
                    let data = s(obj, &format!("/data/{}", s(secret, "/key")));
                    ensure!(
                        !data.is_empty(),
                        "{name}: the Secret lacks key {}",
                        s(secret, "/key")
                    );
                    // kustomize wraps long values over lines (Kubernetes, like Go's decoder,
                    // ignores the line breaks).
                    let data: String = data.split_whitespace().collect();
                    String::from_utf8(base64::engine::general_purpose::STANDARD.decode(data)?)?
                }
                Err(_) if name.ends_with("_URL") => "redis://:placeholder@redis:6379/0".into(),
                // An operator's key pair (overlays/prod creates no Secrets): the signing key
                // is a seed, the trusted list its public key.
                Err(_) if name.ends_with("_SIGNING_KEY") => PLACEHOLDER_SEED.into(),
                Err(_) if name.ends_with("_AUDITOR_KEYS") => {
                    loopgate_protocol::report::signing::ReportSigningKey::parse(PLACEHOLDER_SEED)?
                        .public_key()
                        .to_hex()
                }
                Err(_) => "placeholder".into(),
            },
            _ => bail!("{name}: only value and secretKeyRef are used"),
        };
        env.insert(name, value);
    }
    Ok(env)
}

#[test]
fn check_deploy_script_passes() -> anyhow::Result<()> {
    let script = repo().join("scripts/check-deploy.sh");
    let out = Command::new(script).arg("--manifests-only").output()?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    let err = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "scripts/check-deploy.sh failed:\n{err}"
    );
    Ok(())
}

#[test]
fn copies_in_deploy_k8s_match_their_sources() -> anyhow::Result<()> {
    for (source, copy) in [
        (
            "deploy/nats/loopgate-users.conf",
            "deploy/k8s/base/nats/loopgate-users.conf",
        ),
        (
            "deploy/llama/qwen-fenced-tools.jinja",
            "deploy/k8s/components/local-model/qwen-fenced-tools.jinja",
        ),
    ] {
        let same = std::fs::read(repo().join(source))? == std::fs::read(repo().join(copy))?;
        ensure!(
            same,
            "{copy} differs from {source}: run scripts/check-deploy.sh --sync"
        );
    }
    Ok(())
}

/// Metric names in a PromQL expression: identifiers outside label matchers and `by (...)`.
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut outside_braces = String::new();
    let mut depth = 0;
    for ch in expr.chars() {
        match ch {
            '{' => depth += 1,
            '}' => depth -= 1,
            _ if depth == 0 => outside_braces.push(ch),
            _ => {}
        }
    }
    let mut rest = outside_braces.as_str();
    let mut kept = String::new();
    while let Some((at, len)) = ["by (", "without ("]
        .iter()
        .filter_map(|k| Some((rest.find(k)?, k.len())))
        .min()
    {
        kept.push_str(&rest[..at]);
        rest = rest[at + len..]
            .split_once(')')
            .map_or("", |(_, after)| after);
    }
    kept.push_str(rest);
    let words = kept.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'));
    words
        .filter(|w| w.starts_with("loopgate_") || w.starts_with("gen_ai_"))
        .map(String::from)
        .collect()
}

fn collect_exprs(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| match (k.as_str(), v.as_str()) {
            ("expr", Some(expr)) => out.extend(metric_names(expr)),
            _ => collect_exprs(v, out),
        }),
        Value::Array(items) => items.iter().for_each(|i| collect_exprs(i, out)),
        _ => {}
    }
}

#[test]
fn dashboard_metric_list_matches_its_queries() -> anyhow::Result<()> {
    let example = r#"sum by (le, loopgate_role) (rate(a_b[5m])) + loopgate_x{gen_ai_y="z"}"#;
    assert_eq!(
        metric_names(example),
        BTreeSet::from(["loopgate_x".to_string()])
    );
    let grafana = repo().join("deploy/grafana");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(
        grafana.join("loopgate-dashboard.json"),
    )?)?;
    let mut queried = BTreeSet::new();
    collect_exprs(&dashboard, &mut queried);
    let listed = std::fs::read_to_string(grafana.join("metrics.txt"))?;
    let listed: BTreeSet<String> = listed
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect();
    ensure!(
        queried == listed,
        "dashboard queries {queried:?}\nmetrics.txt lists {listed:?}"
    );
    Ok(())
}

/// The metric names loopgate exports, from the list in telemetry/src/metrics.rs (histograms
/// also as `_bucket`, `_sum`, `_count`).
fn exported_metrics() -> anyhow::Result<BTreeSet<String>> {
    let text = std::fs::read_to_string(repo().join("telemetry/src/metrics.rs"))?;
    let doc: String = text
        .lines()
        .take_while(|l| l.starts_with("//!"))
        .collect::<Vec<_>>()
        .join(" ");
    let mut names = BTreeSet::new();
    for name in doc.split('`').skip(1).step_by(2) {
        let name = name.split('{').next().unwrap_or(name);
        if name.starts_with("loopgate_") {
            names.insert(name.to_string());
            if name.ends_with("_seconds") {
                for suffix in ["_bucket", "_sum", "_count"] {
                    names.insert(format!("{name}{suffix}"));
                }
            }
        }
    }
    ensure!(
        names.contains("loopgate_queue_dead_letters"),
        "metric list not found"
    );
    Ok(names)
}

/// components/monitoring: the PodMonitors cover the three namespaces and the alert rules (queue
/// age, dead letters, failed rounds, audit latency) query only metrics loopgate exports.
#[test]
fn alert_rules_query_exported_metrics_and_cover_the_issue() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let exported = exported_metrics()?;
    let r = renders
        .iter()
        .find(|r| r.name == "prod+optional")
        .context("prod+optional render")?;
    let monitored: BTreeSet<&str> = kind_of(r, "PodMonitor")
        .map(|m| s(m, "/metadata/namespace"))
        .collect();
    ensure!(
        monitored == BTreeSet::from([NAMESPACE, EXEC_NAMESPACE, AUDIT_NAMESPACE]),
        "PodMonitors in {monitored:?}"
    );
    // Every loopgate pod is selected by the PodMonitor of its own namespace, on a port it has.
    for (workload, w, pod) in workloads(r) {
        let component = s(pod, "/metadata/labels/app.kubernetes.io~1component");
        if !matches!(
            component,
            "manager" | "executor" | "executor-gui" | "auditor"
        ) {
            continue;
        }
        let ns = s(w, "/metadata/namespace");
        let ports: BTreeSet<&str> = arr(pod, "/spec/containers")
            .iter()
            .flat_map(|c| arr(c, "/ports"))
            .map(|p| s(p, "/name"))
            .collect();
        let scraped = kind_of(r, "PodMonitor").any(|m| {
            s(m, "/metadata/namespace") == ns
                && cluster_policies::selects(&m["spec"]["selector"], &pod["metadata"]["labels"])
                && arr(m, "/spec/podMetricsEndpoints")
                    .iter()
                    .any(|e| ports.contains(s(e, "/port")))
        });
        ensure!(scraped, "{workload} in {ns}: no PodMonitor scrapes it");
    }
    let mut alerts = BTreeSet::new();
    for rule_set in kind_of(r, "PrometheusRule") {
        for group in arr(rule_set, "/spec/groups") {
            for rule in arr(group, "/rules") {
                let alert = s(rule, "/alert");
                let mut used = BTreeSet::new();
                collect_exprs(rule, &mut used);
                ensure!(!used.is_empty(), "{alert}: queries no loopgate metric");
                for metric in &used {
                    ensure!(
                        exported.contains(metric),
                        "{alert}: {metric} is not exported"
                    );
                }
                ensure!(
                    !s(rule, "/labels/severity").is_empty()
                        && !s(rule, "/annotations/summary").is_empty(),
                    "{alert}: severity and summary"
                );
                alerts.insert(alert.to_string());
            }
        }
    }
    for wanted in [
        "LoopgateQueueStale",
        "LoopgateDeadLetters",
        "LoopgateRoundsFailing",
        "LoopgateAuditLatencyHigh",
    ] {
        ensure!(alerts.contains(wanted), "no alert {wanted}");
    }
    Ok(())
}

/// NATS and Redis survive a node: a 3-node JetStream StatefulSet with a quorum-keeping PDB,
/// GOMEMLIMIT, the exporter and a patient startup probe; the manager asks for replicas the
/// cluster can hold; Redis refuses writes (maxmemory, noeviction) before its memory limit.
#[test]
fn nats_is_a_cluster_and_redis_refuses_writes_before_its_limit() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    fn bytes(quantity: &str) -> Option<u64> {
        let units = [
            ("Gi", 1u64 << 30),
            ("Mi", 1 << 20),
            ("gb", 1 << 30),
            ("mb", 1 << 20),
        ];
        let (n, unit) = units
            .iter()
            .find_map(|(u, m)| Some((quantity.strip_suffix(u)?, *m)))?;
        n.parse::<u64>().ok().map(|n| n * unit)
    }
    for r in renders {
        let nats = find(r, "StatefulSet", "nats")?;
        let nodes = nats.pointer("/spec/replicas").and_then(Value::as_u64);
        ensure!(nodes == Some(3), "{}: NATS has {nodes:?} nodes", r.name);
        let pdb = find(r, "PodDisruptionBudget", "nats")?;
        ensure!(
            pdb.pointer("/spec/maxUnavailable") == Some(&Value::from(1)),
            "{}: the NATS PDB must keep a quorum",
            r.name
        );
        let pod = &nats["spec"]["template"]["spec"];
        let server = arr(pod, "/containers")
            .iter()
            .find(|c| s(c, "/name") == "nats")
            .context("nats container")?;
        ensure!(
            s(server, "/image").starts_with("nats:2.15"),
            "{}: NATS image {} (the tests use 2.15)",
            r.name,
            s(server, "/image")
        );
        let env: BTreeSet<&str> = arr(server, "/env").iter().map(|e| s(e, "/name")).collect();
        ensure!(
            env.contains("GOMEMLIMIT") && env.contains("SERVER_NAME"),
            "{}: NATS env",
            r.name
        );
        let patience = server
            .pointer("/startupProbe/failureThreshold")
            .and_then(Value::as_u64)
            .unwrap_or(0)
            * server
                .pointer("/startupProbe/periodSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(0);
        ensure!(
            patience >= 600,
            "{}: NATS startup probe {patience} s",
            r.name
        );
        ensure!(
            arr(pod, "/containers")
                .iter()
                .any(|c| s(c, "/image").contains("prometheus-nats-exporter")),
            "{}: no NATS exporter",
            r.name
        );
        // The manager's [jetstream] replicas fit the cluster.
        let manager = find(r, "Deployment", "loopgate-manager")?;
        let cm = arr(manager, "/spec/template/spec/volumes")
            .iter()
            .find_map(|v| v.pointer("/configMap/name").and_then(Value::as_str))
            .context("manager config volume")?;
        let text = s(find(r, "ConfigMap", cm)?, "/data/manager.toml");
        let raw: toml::Value = toml::from_str(text)?;
        let replicas = raw
            .get("jetstream")
            .and_then(|j| j.get("replicas"))
            .and_then(toml::Value::as_integer)
            .unwrap_or(1);
        ensure!(
            u64::try_from(replicas).is_ok_and(|n| n <= 3),
            "{}: {replicas} replicas on 3 nodes",
            r.name
        );
        // Redis: maxmemory (noeviction) below the container's limit, leaving room for the AOF
        // rewrite's fork and buffers.
        let redis = find(r, "StatefulSet", "redis")?;
        let container = &redis["spec"]["template"]["spec"]["containers"][0];
        let limit = bytes(s(container, "/resources/limits/memory")).context("redis limit")?;
        let config_volume = arr(redis, "/spec/template/spec/volumes")
            .iter()
            .find(|v| s(v, "/name") == "config")
            .context("redis config volume")?;
        let conf = s(
            find(r, "ConfigMap", s(config_volume, "/configMap/name"))?,
            "/data/redis.conf",
        );
        let setting = |key: &str| {
            conf.lines()
                .find_map(|l| l.strip_prefix(&format!("{key} ")))
                .map(str::trim)
        };
        // An argument (`--maxmemory 192mb`, an overlay's) wins over the file.
        let args: Vec<&str> = arr(container, "/args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let from_args = args
            .windows(2)
            .rev()
            .find(|w| w[0] == "--maxmemory")
            .map(|w| w[1]);
        let maxmemory = from_args
            .or_else(|| setting("maxmemory"))
            .and_then(bytes)
            .context("redis maxmemory")?;
        ensure!(
            setting("maxmemory-policy") == Some("noeviction") && maxmemory * 4 <= limit * 3,
            "{}: Redis maxmemory {maxmemory} vs limit {limit}",
            r.name
        );
    }
    Ok(())
}
