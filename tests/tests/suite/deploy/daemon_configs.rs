//! Per loopgate container in every render: config, env, grace period, NATS identity.

use std::collections::BTreeSet;
use std::path::Path;

use anyhow::{ensure, Context};
use base64::Engine as _;
use serde_json::Value;

use super::{arr, config_of, daemons, env_of, find, kind_of, renders, s, Role};

/// Env vars the binaries read themselves (besides those a config `*_env` key names).
const COMMON_ENV: &[&str] = &[
    "LOOPGATE_NATS_URL",
    "LOOPGATE_LOG",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_SERVICE_NAME",
];
const MANAGER_ENV: &[&str] = &["LOOPGATE_REDIS_URL", "LOOPGATE_HTTP_ADDR"];
/// Time a binary needs after its own drain to nak, drain NATS and flush telemetry.
const DRAIN_MARGIN_SECS: u64 = 20;
/// The manager drains in about 15 s (the workers' drain is their resolved shutdown grace).
const MANAGER_DRAIN_SECS: u64 = 15;

/// Env var names a config file names: every `*_env` string and `agents.*.env` lists.
fn env_named_by(value: &toml::Value, key: &str, out: &mut BTreeSet<String>) {
    match value {
        toml::Value::String(v) if key.ends_with("_env") => {
            out.insert(v.clone());
        }
        toml::Value::Array(items) if key == "env" => {
            out.extend(items.iter().filter_map(|i| i.as_str().map(String::from)))
        }
        toml::Value::Table(t) => t.iter().for_each(|(k, v)| env_named_by(v, k, out)),
        _ => {}
    }
}

fn container_port(container: &Value, name: &str) -> Option<u64> {
    let port = arr(container, "/ports")
        .iter()
        .find(|p| s(p, "/name") == name)?;
    port.get("containerPort")?.as_u64()
}

fn writable_mount(container: &Value, path: &Path) -> bool {
    arr(container, "/volumeMounts").iter().any(|m| {
        path.starts_with(s(m, "/mountPath")) && m.get("readOnly") != Some(&Value::Bool(true))
    })
}

fn toml_str<'a>(v: &'a toml::Value, table: &str, key: &str) -> &'a str {
    v.get(table)
        .and_then(|t| t.get(key))
        .and_then(toml::Value::as_str)
        .unwrap_or("")
}

/// The decoded value a secretKeyRef names, where that Secret is rendered in `namespace`.
fn secret_value(r: &super::Render, namespace: &str, key_ref: &Value) -> Option<String> {
    let name = s(key_ref, "/name");
    let secret = kind_of(r, "Secret")
        .find(|o| s(o, "/metadata/namespace") == namespace && s(o, "/metadata/name") == name)?;
    let data = s(secret, &format!("/data/{}", s(key_ref, "/key")));
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(data)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// Per loopgate container: its config parses and resolves with the binary's own code and the
/// env it gets; its env holds only variables the binary reads; its grace period covers the
/// drain; it connects as its own NATS user with the password the server expects.
#[test]
fn daemons_get_configs_env_and_grace_their_binaries_accept() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        let nats = find(r, "StatefulSet", "nats")?;
        let nats_env = arr(nats, "/spec/template/spec/containers/0/env");
        let nats_conf = find(
            r,
            "ConfigMap",
            s(nats, "/spec/template/spec/volumes/0/configMap/name"),
        )?;
        let users = s(nats_conf, "/data/loopgate-users.conf");
        ensure!(
            s(nats_conf, "/data/nats-server.conf").contains("include ./loopgate-users.conf"),
            "{}",
            r.name
        );
        let mut trusted_ids = BTreeSet::new();
        let mut signing_ids = Vec::new();
        for d in daemons(r)? {
            let at = &d.at;
            let text = config_of(r, &d).with_context(|| at.clone())?;
            let env = env_of(r, d.container).with_context(|| at.clone())?;
            let get = |k: &str| env.get(k).cloned();
            let raw: toml::Value = toml::from_str(&text).with_context(|| at.clone())?;
            let drain = match d.role {
                Role::Manager => {
                    use loopgate_manager::config::{parse_file, resolve, EnvOverrides};
                    let file = parse_file(&text, "manager.toml").with_context(|| at.clone())?;
                    let overrides = EnvOverrides {
                        nats_url: get("LOOPGATE_NATS_URL"),
                        redis_url: get("LOOPGATE_REDIS_URL"),
                        redis_sentinels: get("LOOPGATE_REDIS_SENTINELS"),
                        redis_master_name: get("LOOPGATE_REDIS_MASTER_NAME"),
                        http_addr: get("LOOPGATE_HTTP_ADDR"),
                    };
                    let settings = resolve(file, overrides, &get).with_context(|| at.clone())?;
                    ensure!(
                        settings.token.is_some(),
                        "{at}: the API must require a bearer token"
                    );
                    ensure!(
                        !settings.auditor_keys.is_empty(),
                        "{at}: the manager must trust auditor keys (and refuse unsigned reports)"
                    );
                    trusted_ids.extend(
                        settings
                            .auditor_keys
                            .keys()
                            .iter()
                            .map(|k| k.key_id().to_string()),
                    );
                    let port = Some(u64::from(settings.http_addr.port()));
                    ensure!(
                        port == container_port(d.container, "http"),
                        "{at}: http port"
                    );
                    MANAGER_DRAIN_SECS
                }
                Role::Executor => {
                    use loopgate_executor::{ExecutorFile, ExternalInputs};
                    let file =
                        ExecutorFile::parse(&text, "executor.toml").with_context(|| at.clone())?;
                    let inputs = ExternalInputs {
                        hostname: Some("pod".into()),
                        pid: 1,
                        env: env.clone(),
                        temp_dir: "/tmp".into(),
                        ..Default::default()
                    };
                    let settings = file.resolve(&inputs).with_context(|| at.clone())?;
                    ensure!(
                        writable_mount(d.container, &settings.work_dir),
                        "{at}: work_dir read-only"
                    );
                    // Prod sandboxes the agent (components/executor-sandbox); elsewhere the
                    // executor says so explicitly, since without bubblewrap it refuses to start.
                    let mode = format!("{:?}", settings.sandbox.mode);
                    let want = if r.name.starts_with("prod") {
                        "Required"
                    } else {
                        "Off"
                    };
                    ensure!(mode == want, "{at}: executor sandbox {mode}, want {want}");
                    settings.shutdown_grace.as_secs()
                }
                Role::Auditor => {
                    use loopgate_auditor::{parse_config, HostFacts};
                    let redis =
                        raw.get("redis").is_some() || env.contains_key("LOOPGATE_REDIS_URL");
                    ensure!(!redis, "{at}: the auditor must get no Redis settings");
                    let file = parse_config(&text).with_context(|| at.clone())?;
                    let host = HostFacts {
                        hostname: "pod".into(),
                        pid: 1,
                        temp_dir: "/tmp".into(),
                    };
                    let settings = file.resolve(&get, &host).with_context(|| at.clone())?;
                    let key = settings.signing_key.as_ref();
                    let key =
                        key.with_context(|| format!("{at}: the auditor must sign reports"))?;
                    signing_ids.push((at.clone(), key.key_id().to_string()));
                    ensure!(
                        writable_mount(d.container, &settings.work_dir),
                        "{at}: work_dir read-only"
                    );
                    settings.shutdown_grace.as_secs()
                }
            };
            if d.role != Role::Manager {
                let addr = toml_str(&raw, "metrics", "addr");
                let port = addr
                    .rsplit_once(':')
                    .and_then(|(_, p)| p.parse::<u64>().ok());
                let exposed = container_port(d.container, "metrics");
                ensure!(
                    port.is_some() && port == exposed,
                    "{at}: [metrics] addr {addr:?} vs metrics port"
                );
            }

            let mut allowed: BTreeSet<String> = COMMON_ENV.iter().map(|v| v.to_string()).collect();
            if d.role == Role::Manager {
                allowed.extend(MANAGER_ENV.iter().map(|v| v.to_string()));
            }
            env_named_by(&raw, "", &mut allowed);
            for name in env.keys() {
                ensure!(
                    allowed.contains(name),
                    "{at}: env {name} is read by no binary, named by no *_env key"
                );
            }

            let grace = d
                .pod
                .pointer("/spec/terminationGracePeriodSeconds")
                .and_then(Value::as_u64);
            let grace = grace.unwrap_or(30);
            ensure!(
                grace >= drain + DRAIN_MARGIN_SECS,
                "{at}: grace {grace} s < drain {drain} s + margin"
            );

            let role = format!("{:?}", d.role).to_lowercase();
            ensure!(
                toml_str(&raw, "nats", "user") == role,
                "{at}: must connect as NATS user {role}"
            );
            let var = format!("LOOPGATE_NATS_{}_PASSWORD", role.to_uppercase());
            let user_defined =
                users.contains(&format!("user: {role}")) && users.contains(&format!("${var}"));
            ensure!(
                user_defined,
                "{}: the NATS config defines no user {role}",
                r.name
            );
            let secret_of = |env: &[Value], name: &str| {
                env.iter()
                    .find(|e| s(e, "/name") == name)?
                    .pointer("/valueFrom/secretKeyRef")
                    .cloned()
            };
            let mine = secret_of(
                arr(d.container, "/env"),
                toml_str(&raw, "nats", "password_env"),
            );
            let servers = secret_of(nats_env, &var);
            // Rendered Secrets (dev) must hold the same value; Secrets made out of band (prod)
            // must be the same name and key (the auditors' copy lives in their namespace).
            let pod_ns = s(d.workload, "/metadata/namespace");
            let nats_ns = s(nats, "/metadata/namespace");
            let same = match (&mine, &servers) {
                (Some(a), Some(b)) => {
                    match (secret_value(r, pod_ns, a), secret_value(r, nats_ns, b)) {
                        (Some(x), Some(y)) => x == y,
                        _ => a == b,
                    }
                }
                _ => false,
            };
            ensure!(same, "{at}: password differs from {var}");
        }
        // Every auditor signs with a key every manager trusts.
        for (at, id) in &signing_ids {
            ensure!(
                trusted_ids.contains(id),
                "{at}: signs with key {id}, which the managers do not trust ({trusted_ids:?})"
            );
        }
        // Where the Secret is rendered (dev), the manager's Redis URL carries Redis's password.
        let mut secrets = kind_of(r, "Secret");
        if let Some(secret) = secrets.find(|o| s(o, "/metadata/name").starts_with("loopgate-redis"))
        {
            let password =
                base64::engine::general_purpose::STANDARD.decode(s(secret, "/data/password"))?;
            let url = base64::engine::general_purpose::STANDARD.decode(s(secret, "/data/url"))?;
            let (password, url) = (String::from_utf8(password)?, String::from_utf8(url)?);
            ensure!(
                url.contains(&format!(":{password}@")),
                "{}: Redis URL and password disagree",
                r.name
            );
        }
    }
    Ok(())
}

/// The manager offers a route only while a live executor serves it, with its `capabilities`
/// as the upper bound: in every render that bound is exactly what the executors deployed
/// there serve (no route nobody could serve, none served but never offered), and `gui` is
/// among them: the gui executor is deployed.
#[test]
fn manager_capabilities_are_what_the_deployed_executors_serve() -> anyhow::Result<()> {
    let Some(renders) = renders()? else {
        return Ok(());
    };
    let list = |v: &toml::Value, table: &str| -> BTreeSet<String> {
        v.get(table)
            .and_then(|t| t.get("capabilities"))
            .and_then(toml::Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|c| c.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    for r in renders {
        let mut served = BTreeSet::new();
        let mut offered: Vec<(String, BTreeSet<String>)> = Vec::new();
        for d in daemons(r)? {
            let config: toml::Value =
                toml::from_str(&config_of(r, &d)?).with_context(|| format!("{}: config", d.at))?;
            match d.role {
                Role::Executor => served.extend(list(&config, "executor")),
                Role::Manager => offered.push((d.at.clone(), list(&config, "manager"))),
                Role::Auditor => {}
            }
        }
        ensure!(
            served.contains("gui"),
            "{}: no gui executor: {served:?}",
            r.name
        );
        for (at, capabilities) in offered {
            ensure!(
                capabilities == served,
                "{at}: manager capabilities {capabilities:?}, executors serve {served:?}"
            );
        }
    }
    Ok(())
}

/// Issue 38 item 2: an auditor signs reports with checks outside bubblewrap only where the
/// render says so (`allow_unsandboxed_signing`, the base and dev pods without user
/// namespaces); prod runs its checks in bubblewrap (`sandbox = "required"`) and never allows
/// it.
#[test]
fn prod_auditors_never_sign_with_unsandboxed_checks() -> anyhow::Result<()> {
    use loopgate_auditor::{parse_config, HostFacts};
    let Some(renders) = renders()? else {
        return Ok(());
    };
    for r in renders {
        for d in daemons(r)?.iter().filter(|d| d.role == Role::Auditor) {
            let at = &d.at;
            let text = config_of(r, d).with_context(|| at.clone())?;
            let env = env_of(r, d.container).with_context(|| at.clone())?;
            let host = HostFacts {
                hostname: "pod".into(),
                pid: 1,
                temp_dir: "/tmp".into(),
            };
            let settings = parse_config(&text)
                .with_context(|| at.clone())?
                .resolve(&|k| env.get(k).cloned(), &host)
                .with_context(|| at.clone())?;
            let unsandboxed = settings.sandbox.mode != loopgate_auditor::SandboxMode::Required;
            if r.name.starts_with("prod") {
                ensure!(
                    !unsandboxed && !settings.allow_unsandboxed_signing,
                    "{at}: prod auditors sign only with checks in bubblewrap"
                );
            } else {
                ensure!(
                    !unsandboxed || settings.allow_unsandboxed_signing,
                    "{at}: checks may run unsandboxed, so a signing auditor refuses to start \
                     without allow_unsandboxed_signing"
                );
            }
        }
    }
    Ok(())
}
