//! Pod Security as admission enforces it, and the executors' part of it (issue 38 item 11), on
//! every render:
//! - an evaluator of the "baseline" and "restricted" Pod Security Standards (policy version
//!   "latest", at least 1.35: baseline lets a pod in its own user namespace unmask /proc)
//!   admits every workload under the level its namespace enforces;
//! - the executors' namespace enforces "baseline" or stricter everywhere, never "privileged";
//! - sandboxed executor pods run in their own user namespace (`hostUsers: false`) with the
//!   Localhost seccomp and AppArmor profiles shipped in deploy/;
//! - outside dev an executor's shutdown grace covers a default episode plus 60 s to freeze and
//!   publish it, and its pod's termination grace covers that plus the drain.

use std::path::PathBuf;

use anyhow::{ensure, Context};
use loopgate_common::budget::Budget;
use serde_json::{json, Value};

use super::{arr, config_of, daemons, find, renders, repo, s, workloads, Role};
use super::{EXEC_NAMESPACE, NAMESPACE};

/// Time an executor needs after its episode's budget to freeze and publish the snapshot.
const FREEZE_AND_PUBLISH_SECS: u64 = 60;
/// Beyond the executor's shutdown grace: its drain margin and the NATS/telemetry flush.
const DRAIN_SECS: u64 = 40;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Level {
    Privileged,
    Baseline,
    Restricted,
}

fn level(name: &str) -> Option<Level> {
    match name {
        "privileged" => Some(Level::Privileged),
        "baseline" => Some(Level::Baseline),
        "restricted" => Some(Level::Restricted),
        _ => None,
    }
}

/// Capabilities baseline lets a container add (the runtimes' defaults).
const BASELINE_CAPS: &[&str] = &[
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
];
const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];
const RESTRICTED_VOLUMES: &[&str] = &[
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
];

fn containers(spec: &Value) -> impl Iterator<Item = &Value> {
    ["/containers", "/initContainers", "/ephemeralContainers"]
        .into_iter()
        .flat_map(move |p| arr(spec, p).iter())
}

/// What the pod template `pod` (metadata and spec) violates of `level`; empty: admitted.
fn violations(pod: &Value, level: Level) -> Vec<String> {
    let mut out = Vec::new();
    if level == Level::Privileged {
        return out;
    }
    let spec = &pod["spec"];
    let user_namespace = spec.get("hostUsers") == Some(&json!(false));
    let yes = Some(&json!(true));
    let mut bad = |what: String| out.push(what);
    // Baseline.
    for field in ["hostNetwork", "hostPID", "hostIPC"] {
        if spec.get(field) == yes {
            bad(field.to_string());
        }
    }
    for v in arr(spec, "/volumes") {
        if v.get("hostPath").is_some() {
            bad(format!("hostPath volume {}", s(v, "/name")));
        }
    }
    if let Some(sysctls) = spec.pointer("/securityContext/sysctls") {
        for name in arr(sysctls, "").iter().map(|c| s(c, "/name")) {
            if !SAFE_SYSCTLS.contains(&name) {
                bad(format!("sysctl {name}"));
            }
        }
    }
    let contexts: Vec<(String, &Value)> =
        std::iter::once(("pod".to_string(), &spec["securityContext"]))
            .chain(containers(spec).map(|c| (s(c, "/name").to_string(), &c["securityContext"])))
            .collect();
    for (who, sc) in &contexts {
        if sc.pointer("/windowsOptions/hostProcess") == yes {
            bad(format!("{who}: hostProcess"));
        }
        let apparmor = s(sc, "/appArmorProfile/type");
        if !matches!(apparmor, "" | "RuntimeDefault" | "Localhost") {
            bad(format!("{who}: AppArmor {apparmor}"));
        }
        if s(sc, "/seccompProfile/type") == "Unconfined" {
            bad(format!("{who}: seccomp Unconfined"));
        }
        let selinux = &sc["seLinuxOptions"];
        if !SELINUX_TYPES.contains(&s(selinux, "/type"))
            || !s(selinux, "/user").is_empty()
            || !s(selinux, "/role").is_empty()
        {
            bad(format!("{who}: SELinux options"));
        }
    }
    for (key, value) in pod["metadata"]["annotations"]
        .as_object()
        .into_iter()
        .flatten()
    {
        let value = value.as_str().unwrap_or("");
        let apparmor = key.starts_with("container.apparmor.security.beta.kubernetes.io/");
        if apparmor && !(value == "runtime/default" || value.starts_with("localhost/")) {
            bad(format!("AppArmor annotation {key}: {value}"));
        }
    }
    for c in containers(spec) {
        let name = s(c, "/name");
        let sc = &c["securityContext"];
        if sc.get("privileged") == yes {
            bad(format!("{name}: privileged"));
        }
        for cap in arr(sc, "/capabilities/add")
            .iter()
            .filter_map(Value::as_str)
        {
            if !BASELINE_CAPS.contains(&cap) {
                bad(format!("{name}: adds {cap}"));
            }
        }
        for p in arr(c, "/ports") {
            if p.get("hostPort").and_then(Value::as_u64).unwrap_or(0) != 0 {
                bad(format!("{name}: hostPort"));
            }
        }
        let proc_mount = s(sc, "/procMount");
        if !matches!(proc_mount, "" | "Default") && !user_namespace {
            bad(format!(
                "{name}: procMount {proc_mount} outside a user namespace"
            ));
        }
        for probe in ["livenessProbe", "readinessProbe", "startupProbe"] {
            for handler in ["httpGet", "tcpSocket"] {
                if c.pointer(&format!("/{probe}/{handler}/host")).is_some() {
                    bad(format!("{name}: {probe} host"));
                }
            }
        }
    }
    if level == Level::Baseline {
        return out;
    }
    // Restricted.
    for v in arr(spec, "/volumes") {
        let kind = v
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, _)| k.as_str())
            .find(|k| *k != "name")
            .unwrap_or("");
        if !RESTRICTED_VOLUMES.contains(&kind) {
            out.push(format!("volume {} of type {kind}", s(v, "/name")));
        }
    }
    let pod_sc = &spec["securityContext"];
    for c in containers(spec) {
        let name = s(c, "/name");
        let sc = &c["securityContext"];
        if sc.get("allowPrivilegeEscalation") != Some(&json!(false)) {
            out.push(format!("{name}: allowPrivilegeEscalation"));
        }
        if !user_namespace {
            let non_root = sc
                .get("runAsNonRoot")
                .or_else(|| pod_sc.get("runAsNonRoot"));
            if non_root != yes {
                out.push(format!("{name}: runAsNonRoot"));
            }
            let uid = sc.get("runAsUser").or_else(|| pod_sc.get("runAsUser"));
            if uid == Some(&json!(0)) {
                out.push(format!("{name}: runAsUser 0"));
            }
        }
        let seccomp = match s(sc, "/seccompProfile/type") {
            "" => s(pod_sc, "/seccompProfile/type"),
            own => own,
        };
        if !matches!(seccomp, "RuntimeDefault" | "Localhost") {
            out.push(format!("{name}: seccomp {seccomp:?}"));
        }
        if !arr(sc, "/capabilities/drop").contains(&json!("ALL")) {
            out.push(format!("{name}: capabilities not dropped"));
        }
        if arr(sc, "/capabilities/add")
            .iter()
            .any(|c| c != &json!("NET_BIND_SERVICE"))
        {
            out.push(format!("{name}: capabilities added"));
        }
        if !matches!(s(sc, "/procMount"), "" | "Default") {
            out.push(format!("{name}: procMount"));
        }
    }
    out
}

fn enforced(r: &super::Render, ns: &str) -> anyhow::Result<Level> {
    let label = s(
        find(r, "Namespace", ns)?,
        "/metadata/labels/pod-security.kubernetes.io~1enforce",
    );
    level(label).with_context(|| format!("{}: {ns} enforces {label:?}", r.name))
}

/// Every workload passes the level its namespace enforces, and the executors' namespace
/// enforces baseline or stricter: a compromised executor pod can do no more than that.
#[test]
fn every_pod_is_admitted_and_executors_never_need_privileged() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let exec = enforced(r, EXEC_NAMESPACE)?;
        ensure!(
            exec >= Level::Baseline,
            "{}: {EXEC_NAMESPACE} enforces {exec:?}; the executors must run under baseline \
             or stricter",
            r.name
        );
        ensure!(enforced(r, NAMESPACE)? == Level::Restricted, "{}", r.name);
        for (workload, w, pod) in workloads(r) {
            let ns = s(w, "/metadata/namespace");
            let level = enforced(r, ns)?;
            let found = violations(pod, level);
            ensure!(
                found.is_empty(),
                "{}: {workload} in {ns} would be refused by Pod Security {level:?}: {found:?}",
                r.name
            );
        }
    }
    Ok(())
}

/// The file under deploy/k8s/components/*/`dir`/ named `name`.
fn shipped(dir: &str, name: &str) -> Option<PathBuf> {
    let components = repo().join("deploy/k8s/components");
    std::fs::read_dir(&components)
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.path().join(dir).join(name))
        .find(|p| p.is_file())
}

/// Sandboxed executors (prod: every executor) run in their own user namespace under the
/// Localhost seccomp and AppArmor profiles deploy/ ships, never unconfined.
#[test]
fn sandboxed_executors_use_a_user_namespace_and_the_shipped_profiles() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let mut sandboxed = 0;
        for d in daemons(r)?.iter().filter(|d| d.role == Role::Executor) {
            let raw: toml::Value = toml::from_str(&config_of(r, d)?)?;
            let mode = raw
                .get("executor")
                .and_then(|e| e.get("sandbox"))
                .and_then(toml::Value::as_str)
                .unwrap_or("auto");
            if mode == "off" {
                continue;
            }
            sandboxed += 1;
            let at = &d.at;
            ensure!(
                d.pod.pointer("/spec/hostUsers") == Some(&json!(false)),
                "{at}: sandbox {mode} without its own user namespace (hostUsers: false)"
            );
            let sc = &d.container["securityContext"];
            ensure!(
                s(sc, "/seccompProfile/type") == "Localhost",
                "{at}: seccomp {:?}",
                sc.get("seccompProfile")
            );
            let seccomp = s(sc, "/seccompProfile/localhostProfile");
            let file = seccomp
                .strip_prefix("loopgate/")
                .and_then(|name| shipped("seccomp", name))
                .with_context(|| format!("{at}: seccomp profile {seccomp} is not in deploy/"))?;
            let profile: Value = serde_json::from_str(&std::fs::read_to_string(&file)?)?;
            ensure!(
                s(&profile, "/defaultAction") == "SCMP_ACT_ERRNO",
                "{}: not deny-by-default",
                file.display()
            );
            ensure!(
                s(sc, "/appArmorProfile/type") == "Localhost",
                "{at}: AppArmor {:?}",
                sc.get("appArmorProfile")
            );
            let apparmor = s(sc, "/appArmorProfile/localhostProfile");
            let file = shipped("apparmor", apparmor)
                .with_context(|| format!("{at}: AppArmor profile {apparmor} is not in deploy/"))?;
            let text = std::fs::read_to_string(&file)?;
            ensure!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(&format!("profile {apparmor} "))),
                "{}: does not define profile {apparmor}",
                file.display()
            );
        }
        if r.name.starts_with("prod") {
            ensure!(
                sandboxed == 2,
                "{}: {sandboxed} sandboxed executor(s)",
                r.name
            );
        }
    }
    Ok(())
}

/// Outside dev a stopping executor lets a default episode run out, freeze and publish, and its
/// pod is not killed before that and the drain.
#[test]
fn executor_grace_covers_an_episode_its_freeze_and_publish() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let episode = Budget::default().executor_episode_secs;
    for r in renders.iter().filter(|r| r.name != "dev") {
        for d in daemons(r)?.iter().filter(|d| d.role == Role::Executor) {
            let raw: toml::Value = toml::from_str(&config_of(r, d)?)?;
            let shutdown = raw
                .get("executor")
                .and_then(|e| e.get("shutdown_grace_secs"))
                .and_then(toml::Value::as_integer)
                .and_then(|v| u64::try_from(v).ok())
                .context("shutdown_grace_secs")?;
            let grace = d
                .pod
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_u64)
                .unwrap_or(30);
            let at = &d.at;
            ensure!(
                shutdown >= episode + FREEZE_AND_PUBLISH_SECS,
                "{at}: shutdown_grace_secs {shutdown} < a {episode} s episode + \
                 {FREEZE_AND_PUBLISH_SECS} s to freeze and publish"
            );
            ensure!(
                grace >= episode + FREEZE_AND_PUBLISH_SECS && grace >= shutdown + DRAIN_SECS,
                "{at}: terminationGracePeriodSeconds {grace} < shutdown grace {shutdown} s + \
                 {DRAIN_SECS} s drain"
            );
        }
    }
    Ok(())
}

/// The evaluator itself, on pods that each break one rule.
#[test]
fn the_pod_security_evaluator_knows_the_rules() {
    let base = || {
        json!({"metadata": {}, "spec": {
            "securityContext": {"runAsNonRoot": true, "runAsUser": 10001,
                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{"name": "c", "securityContext": {
                "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
            "volumes": [{"name": "tmp", "emptyDir": {}}]
        }})
    };
    type Change = fn(&mut Value);
    // (what, change, violates baseline, violates restricted)
    let cases: Vec<(&str, Change, bool, bool)> = vec![
        ("as is", |_| {}, false, false),
        (
            "privileged",
            |p| p["spec"]["containers"][0]["securityContext"]["privileged"] = json!(true),
            true,
            true,
        ),
        (
            "hostPID",
            |p| p["spec"]["hostPID"] = json!(true),
            true,
            true,
        ),
        (
            "hostPath",
            |p| p["spec"]["volumes"] = json!([{"name": "h", "hostPath": {"path": "/"}}]),
            true,
            true,
        ),
        (
            "SYS_ADMIN",
            |p| {
                p["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] =
                    json!(["SYS_ADMIN"])
            },
            true,
            true,
        ),
        (
            "AppArmor Unconfined",
            |p| {
                p["spec"]["containers"][0]["securityContext"]["appArmorProfile"] =
                    json!({"type": "Unconfined"})
            },
            true,
            true,
        ),
        (
            "AppArmor Localhost",
            |p| {
                p["spec"]["containers"][0]["securityContext"]["appArmorProfile"] =
                    json!({"type": "Localhost", "localhostProfile": "x"})
            },
            false,
            false,
        ),
        (
            "seccomp Unconfined",
            |p| {
                p["spec"]["containers"][0]["securityContext"]["seccompProfile"] =
                    json!({"type": "Unconfined"})
            },
            true,
            true,
        ),
        (
            "procMount Unmasked",
            |p| p["spec"]["containers"][0]["securityContext"]["procMount"] = json!("Unmasked"),
            true,
            true,
        ),
        (
            "procMount Unmasked in a user namespace",
            |p| {
                p["spec"]["hostUsers"] = json!(false);
                p["spec"]["containers"][0]["securityContext"]["procMount"] = json!("Unmasked");
            },
            false,
            true,
        ),
        (
            "root",
            |p| p["spec"]["securityContext"]["runAsUser"] = json!(0),
            false,
            true,
        ),
        (
            "escalation",
            |p| {
                p["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] =
                    json!(true)
            },
            false,
            true,
        ),
        (
            "hostPort",
            |p| {
                p["spec"]["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 80}])
            },
            true,
            true,
        ),
    ];
    for (what, change, baseline, restricted) in cases {
        let mut pod = base();
        change(&mut pod);
        assert_eq!(
            !violations(&pod, Level::Baseline).is_empty(),
            baseline,
            "{what} baseline"
        );
        assert_eq!(
            !violations(&pod, Level::Restricted).is_empty(),
            restricted,
            "{what} restricted"
        );
        assert!(violations(&pod, Level::Privileged).is_empty());
    }
}
