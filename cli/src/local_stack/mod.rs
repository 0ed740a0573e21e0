//! `loopgate up`: a foreground local stack (nats-server, redis-server, one manager, N executors,
//! one auditor) with data, configs and logs under one directory.

mod auditor_key;
mod binaries;
mod config_files;
mod error;
mod nats_users;
mod readiness;
mod redis_auth;
mod redis_ha;
mod redis_nodes;
mod stack_guard;
mod supervisor;

use std::ffi::OsString;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use loopgate_protocol::report::signing::ReportSigningKey;
use tokio::signal::unix::{signal, Signal, SignalKind};

pub use binaries::{AUDITOR_BIN, EXECUTOR_BIN, MANAGER_BIN};
pub use config_files::{LocalStack, ModelProfileToml, SIGNING_KEY_ENV};
use error::io_err;
pub use error::StackError;
pub use nats_users::{NatsPasswords, Role};
pub use redis_auth::{RedisPassword, REDIS_URL_ENV};
pub use redis_ha::{HaPorts, REDIS_PASSWORD_ENV};
pub use stack_guard::{serve as serve_stack_guard, GUARD_COMMAND};
use supervisor::{Stage, Supervisor};

use crate::api_client::ApiClient;
use crate::cli_args::UpArgs;
use crate::errors::CliError;
use crate::output;

const SERVER_READY_TIMEOUT: Duration = Duration::from_secs(30);
const MANAGER_READY_TIMEOUT: Duration = Duration::from_secs(90);
/// The daemons finish in-flight work on SIGTERM (their own grace defaults to 20s).
const DAEMON_STOP_GRACE: Duration = Duration::from_secs(25);
const SERVER_STOP_GRACE: Duration = Duration::from_secs(10);

/// Every program the stack runs, found before anything starts.
struct Programs {
    nats: PathBuf,
    redis: PathBuf,
    manager: PathBuf,
    executor: PathBuf,
    auditor: PathBuf,
}

fn process_env(key: &str) -> Option<String> {
    std::env::var(key).ok()
}

fn find_programs() -> Result<Programs, StackError> {
    let nats = binaries::find_server("nats-server", "LOOPGATE_NATS_SERVER", &process_env)?;
    let redis = binaries::find_server("redis-server", "LOOPGATE_REDIS_SERVER", &process_env)?;
    let dir = binaries::daemon_dir(&process_env)?;
    Ok(Programs {
        nats,
        redis,
        manager: binaries::find_daemon(&dir, MANAGER_BIN)?,
        executor: binaries::find_daemon(&dir, EXECUTOR_BIN)?,
        auditor: binaries::find_daemon(&dir, AUDITOR_BIN)?,
    })
}

/// SIGINT (Ctrl-C) or SIGTERM.
struct ShutdownSignals {
    interrupt: Signal,
    terminate: Signal,
}

impl ShutdownSignals {
    fn install() -> Result<ShutdownSignals, StackError> {
        Ok(ShutdownSignals {
            interrupt: signal(SignalKind::interrupt())
                .map_err(io_err("installing the SIGINT handler"))?,
            terminate: signal(SignalKind::terminate())
                .map_err(io_err("installing the SIGTERM handler"))?,
        })
    }

    async fn recv(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}

/// Runs the stack until a signal (exit 0) or an unexpected child exit (error, exit 1).
pub async fn up(args: &UpArgs) -> Result<(), CliError> {
    let mut signals = ShutdownSignals::install()?;
    let programs = find_programs()?;
    for (what, port, flag) in [
        ("nats", args.nats_port, "nats-port"),
        ("redis", args.redis_port, "redis-port"),
    ] {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        if readiness::port_in_use(addr).await {
            return Err(StackError::PortInUse { what, addr, flag }.into());
        }
    }
    let (stack, signing_key) = prepare_dir(args)?;
    let passwords = NatsPasswords::generate().map_err(io_err("generating the NATS passwords"))?;
    let redis_password = RedisPassword::generate()?;
    redis_auth::write_redis_conf(&stack.redis_config_path(), &redis_password)?;
    if let Some(ha) = &stack.redis_ha {
        redis_ha::write_sentinel_confs(&stack.dir, ha, stack.redis_port, &redis_password)?;
    }
    let secrets = Secrets {
        nats: passwords,
        redis: redis_password,
        signing_key,
    };
    let mut supervisor = Supervisor::guarded(&stack.logs_dir().join("stack-guard.log"));
    let started = tokio::select! {
        result = start(&stack, &programs, &secrets, &mut supervisor) => Some(result),
        _ = signals.recv() => None,
    };
    let outcome = match started {
        None => Ok(()),
        Some(Err(e)) => Err(e),
        Some(Ok(())) => {
            announce(&stack)?;
            tokio::select! {
                exit = supervisor.wait_any_exit() => Err(StackError::from(exit)),
                _ = signals.recv() => Ok(()),
            }
        }
    };
    let names: Vec<String> = supervisor.names().map(str::to_string).collect();
    if !names.is_empty() {
        output::note(format!(
            "stopping {} (Ctrl-C again to kill them now)",
            names.join(", ")
        ));
    }
    tokio::select! {
        _ = supervisor.shutdown(DAEMON_STOP_GRACE, SERVER_STOP_GRACE) => {}
        _ = signals.recv() => output::note("killing everything"),
    }
    supervisor.kill_all().await;
    outcome.map_err(CliError::from)
}

/// Creates the directory layout, this start's audit-report key and the config files.
fn prepare_dir(args: &UpArgs) -> Result<(LocalStack, ReportSigningKey), StackError> {
    std::fs::create_dir_all(&args.dir)
        .map_err(io_err(format!("creating {}", args.dir.display())))?;
    let dir = std::fs::canonicalize(&args.dir)
        .map_err(io_err(format!("resolving {}", args.dir.display())))?;
    let mut stack = LocalStack {
        dir,
        nats_port: args.nats_port,
        redis_port: args.redis_port,
        http_addr: args.http_addr,
        executors: args.executors,
        gui: args.gui,
        model: ModelProfileToml::from_env(&process_env),
        auditor_keys: Vec::new(),
        redis_ha: if args.ha {
            Some(HaPorts::pick(&[args.nats_port, args.redis_port])?)
        } else {
            None
        },
    };
    let (signing_key, trusted) = auditor_key::start_key(&stack.auditor_keys_path())?;
    stack.auditor_keys = trusted;
    let mut dirs = vec![
        stack.dir.join("nats"),
        stack.dir.join("redis"),
        stack.logs_dir(),
        stack.auditor_work_dir(),
    ];
    if stack.redis_ha.is_some() {
        dirs.push(redis_ha::replica_dir(&stack.dir));
    }
    dirs.extend((1..=stack.all_executors()).map(|n| stack.executor_work_dir(n)));
    for dir in &dirs {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    }
    let files = stack
        .config_files()
        .map_err(|e| StackError::Config(e.to_string()))?;
    for file in files {
        std::fs::write(&file.path, file.text)
            .map_err(io_err(format!("writing {}", file.path.display())))?;
    }
    Ok((stack, signing_key))
}

fn os_args(args: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<OsString> {
    args.iter().map(|a| a.as_ref().to_os_string()).collect()
}

/// This start's secrets: the NATS passwords, the Redis password and the audit-report key.
struct Secrets {
    nats: NatsPasswords,
    redis: RedisPassword,
    signing_key: ReportSigningKey,
}

/// Servers first, then the manager (which creates the NATS topology and the `audit` durable),
/// then, once it is ready, the executors and the auditor, whose users may only use that
/// topology.
async fn start(
    stack: &LocalStack,
    programs: &Programs,
    secrets: &Secrets,
    sup: &mut Supervisor,
) -> Result<(), StackError> {
    let passwords = &secrets.nats;
    let role_env = |role: Role| {
        [(
            nats_users::NATS_PASSWORD_ENV,
            passwords.of(role).to_string(),
        )]
    };
    let log = |name: &str| stack.logs_dir().join(format!("{name}.log"));
    let nats_dir = stack.dir.join("nats");
    let nats_port = stack.nats_port.to_string();
    let nats_conf = stack.nats_config_path();
    output::note(format!(
        "starting nats-server on 127.0.0.1:{nats_port} (users manager, executor, auditor)"
    ));
    sup.spawn_with_env(
        "nats-server",
        Stage::Servers,
        &programs.nats,
        &os_args(&[
            &"-js",
            &"-a",
            &"127.0.0.1",
            &"-p",
            &nats_port,
            &"-sd",
            &nats_dir,
            &"-c",
            &nats_conf,
        ]),
        &log("nats-server"),
        &passwords.server_env(),
    )?;
    let port = stack.nats_port;
    wait_ready(
        sup,
        "nats-server",
        &log("nats-server"),
        SERVER_READY_TIMEOUT,
        || readiness::nats_ready(port),
    )
    .await?;
    redis_nodes::start_redis(stack, &programs.redis, &secrets.redis, sup).await?;

    let config = |path: PathBuf| os_args(&[&"--config", &path]);
    output::note(format!("starting the manager on {}", stack.http_addr));
    let mut manager_env = role_env(Role::Manager).to_vec();
    manager_env.push(redis_nodes::manager_env(stack, &secrets.redis));
    sup.spawn_with_env(
        "manager",
        Stage::Daemons,
        &programs.manager,
        &config(stack.manager_config_path()),
        &log("manager"),
        &manager_env,
    )?;
    let client = ApiClient::new(&manager_url(stack.http_addr), None)
        .map_err(|e| StackError::Config(e.to_string()))?;
    wait_ready(
        sup,
        "manager",
        &log("manager"),
        MANAGER_READY_TIMEOUT,
        || client.ready(),
    )
    .await?;

    for n in 1..=stack.all_executors() {
        let name = LocalStack::executor_id(n);
        sup.spawn_with_env(
            &name,
            Stage::Daemons,
            &programs.executor,
            &config(stack.executor_config_path(n)),
            &log(&name),
            &role_env(Role::Executor),
        )?;
    }
    let mut auditor_env = role_env(Role::Auditor).to_vec();
    auditor_env.push((SIGNING_KEY_ENV, secrets.signing_key.to_secret_hex()));
    sup.spawn_with_env(
        "auditor",
        Stage::Daemons,
        &programs.auditor,
        &config(stack.auditor_config_path()),
        &log("auditor"),
        &auditor_env,
    )?;
    output::note(format!(
        "started {} executor(s){} and the auditor",
        stack.executors,
        if stack.gui {
            " plus a gui executor"
        } else {
            ""
        }
    ));
    Ok(())
}

pub fn manager_url(addr: SocketAddr) -> String {
    format!("http://{addr}")
}

/// Polls `probe` until it passes, failing fast when any child exits.
async fn wait_ready<F, Fut>(
    sup: &mut Supervisor,
    name: &str,
    log_path: &Path,
    timeout: Duration,
    mut probe: F,
) -> Result<(), StackError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    loop {
        if let Some(exit) = sup.find_exited() {
            return Err(exit.into());
        }
        if probe().await {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(StackError::NotReady {
                name: name.to_string(),
                timeout,
                log_path: log_path.to_path_buf(),
                log_tail: supervisor::log_tail(log_path),
            });
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(500));
    }
}

fn announce(stack: &LocalStack) -> Result<(), CliError> {
    let url = manager_url(stack.http_addr);
    let mut lines = vec![
        format!("loopgate is up: {url}"),
        format!("  logs:    {}/", stack.logs_dir().display()),
        format!("  configs: {}/*.toml", stack.dir.display()),
        format!(
            "  reports: signed; verify a run with: loopgate verify RUN --key {}",
            stack.auditor_keys_path().display()
        ),
        format!(
            "  model:   {} at {}, {} (change with LOOPGATE_MODEL / LOOPGATE_MODEL_URL / LOOPGATE_API_KEY)",
            stack.model.model,
            stack.model.base_url,
            if stack.model.api_key_env.is_some() {
                "key from LOOPGATE_API_KEY"
            } else {
                "no API key"
            }
        ),
        format!(
            "  manager: structured_output = {} (change with LOOPGATE_STRUCTURED_OUTPUT=json_schema|off)",
            stack.model.structured_output.as_deref().unwrap_or("off")
        ),
    ];
    if let Some(ha) = &stack.redis_ha {
        lines.push(format!(
            "  redis:   primary 127.0.0.1:{}, replica 127.0.0.1:{}, sentinels {} (master name {}; failover once the primary is down {} ms)",
            stack.redis_port,
            ha.replica,
            ha.sentinel_addrs().join(" "),
            redis_ha::MASTER_NAME,
            redis_ha::DOWN_AFTER_MS,
        ));
    }
    if url != crate::cli_args::DEFAULT_SERVER {
        lines.push(format!("  use it:  export LOOPGATE_SERVER={url}"));
    }
    lines.push("Ctrl-C stops everything.".to_string());
    output::block(&lines)
}
