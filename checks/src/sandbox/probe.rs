//! Deciding at start-up how checks run on this host: try each way, best first, with a real
//! check on a throwaway scratch dir, and keep the first that works (see the module docs of
//! `sandbox`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::run_check::{run_check, run_check_in, CheckEnd, CheckSpec, DEFAULT_CHECK_PATH};
use crate::sandbox::confine::{reachable_by, with_work_dir_and_sockets, HiddenPath};
use crate::sandbox::launch::{
    find_on_path, prepare_check_dir, resolve_user, Sandbox, SandboxError, SandboxMode,
    SandboxSettings, DEFAULT_CHECK_USER,
};
use crate::sandbox::overlay::{Layer, OverlayTools};

/// uid/gid used when `nobody` is not in /etc/passwd.
const NOBODY_ID: u32 = 65534;
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

/// The uid/gid sandboxed processes drop to when the worker runs as root (`is_root`): the
/// check user (`nobody` by default, 65534 where /etc/passwd has no `nobody`); `None` otherwise.
pub(crate) fn unprivileged_ids(
    settings: &SandboxSettings,
    is_root: bool,
) -> Result<Option<(u32, u32)>, SandboxError> {
    if !is_root {
        return Ok(None);
    }
    let name = settings.check_user.as_deref().unwrap_or(DEFAULT_CHECK_USER);
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    match resolve_user(name, &passwd) {
        Some(ids) => Ok(Some(ids)),
        None if settings.check_user.is_none() => Ok(Some((NOBODY_ID, NOBODY_ID))),
        None => Err(SandboxError::UnknownUser(name.to_string())),
    }
}

/// The bubblewrap binary the settings name, else `bwrap` on PATH.
pub(crate) fn bwrap_binary(settings: &SandboxSettings) -> Option<PathBuf> {
    settings.bwrap.clone().or_else(|| find_on_path("bwrap"))
}

struct Candidate {
    bwrap: Option<PathBuf>,
    run_as: Option<(u32, u32)>,
    /// What checks under this candidate must not see (with bubblewrap).
    hidden: Vec<HiddenPath>,
}

/// Try `candidate` on a throwaway scratch dir under `work_dir`: `Ok(())` when a check ran.
async fn try_candidate(candidate: &Candidate, work_dir: &Path) -> Result<(), String> {
    let scratch = tempfile::Builder::new()
        .prefix("sandbox-probe-")
        .tempdir_in(work_dir)
        .map_err(|e| format!("scratch dir: {e}"))?;
    let ws = scratch.path().join("ws");
    let home = scratch.path().join("home");
    let status = scratch.path().join("status");
    for dir in [&ws, &home] {
        std::fs::create_dir_all(dir).map_err(|e| format!("scratch dir: {e}"))?;
    }
    std::fs::write(&status, b"").map_err(|e| format!("scratch dir: {e}"))?;
    // The same layout as an audit's scratch dir (see `prepare_check_dir`).
    prepare_check_dir(scratch.path(), &[&ws, &home, &status], candidate.run_as)
        .map_err(|e| format!("preparing scratch: {e}"))?;
    let sandbox = Sandbox {
        bwrap: candidate.bwrap.clone(),
        run_as: candidate.run_as,
        required: false,
        limitations: Vec::new(),
        overlay: None,
        hidden: candidate.hidden.clone(),
        network: false,
    };
    let run = run_check(&CheckSpec {
        command: "echo ok > probe && test -s probe",
        cwd: &ws,
        home: &home,
        path_var: DEFAULT_CHECK_PATH,
        timeout: PROBE_TIMEOUT,
        sandbox: &sandbox,
        status_file: &status,
        extra_env: &[],
    })
    .await;
    match run.end {
        CheckEnd::Exited(Some(0)) => Ok(()),
        end => {
            let output = String::from_utf8_lossy(&run.output);
            let first = output.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            Err(format!("{end:?} {}", first.trim()).trim().to_string())
        }
    }
}

/// Decide how the auditor's checks run here (see the module docs), hiding the work dir and
/// the host's sockets from them. Fails only when no way works at all.
pub async fn probe(settings: &SandboxSettings, work_dir: &Path) -> Result<Sandbox, SandboxError> {
    probe_hiding(settings, work_dir, "auditor", Vec::new()).await
}

/// [`probe`] for the worker named `role` (`auditor`, `executor`): the role only changes how
/// the limitations it finds are worded.
pub async fn probe_for(
    settings: &SandboxSettings,
    work_dir: &Path,
    role: &str,
) -> Result<Sandbox, SandboxError> {
    probe_hiding(settings, work_dir, role, Vec::new()).await
}

/// [`probe_for`], with `hidden` (the worker's secrets, from [`crate::hidden_paths`]) out of
/// every check's sight besides the work dir and the host's sockets: under bubblewrap each is
/// replaced by an empty directory or file, and the probe's own check runs so.
pub async fn probe_hiding(
    settings: &SandboxSettings,
    work_dir: &Path,
    role: &str,
    hidden: Vec<HiddenPath>,
) -> Result<Sandbox, SandboxError> {
    let io = |source| SandboxError::Io {
        path: work_dir.to_path_buf(),
        source,
    };
    std::fs::create_dir_all(work_dir).map_err(io)?;
    let hidden = with_work_dir_and_sockets(hidden, &work_dir.canonicalize().map_err(io)?);
    let is_root = rustix::process::geteuid().is_root();
    let run_as = unprivileged_ids(settings, is_root)?;
    let bwrap = match settings.mode {
        SandboxMode::Off => None,
        _ => bwrap_binary(settings),
    };
    let mut candidates = Vec::new();
    let candidate = |bwrap: &Option<PathBuf>, run_as| Candidate {
        bwrap: bwrap.clone(),
        run_as,
        hidden: reachable_by(&hidden, run_as),
    };
    if bwrap.is_some() {
        candidates.push(candidate(&bwrap, run_as));
        if run_as.is_some() {
            candidates.push(candidate(&bwrap, None));
        }
    }
    candidates.push(candidate(&None, run_as));
    if run_as.is_some() {
        candidates.push(candidate(&None, None));
    }
    let mut failures: Vec<String> = Vec::new();
    for candidate in &candidates {
        match try_candidate(candidate, work_dir).await {
            Ok(()) => {
                let mut sandbox = describe(
                    settings,
                    role,
                    is_root,
                    bwrap.is_some(),
                    candidate,
                    &failures,
                );
                sandbox.overlay = probe_layers(&sandbox, work_dir).await;
                return Ok(sandbox);
            }
            Err(reason) => {
                let how = match (&candidate.bwrap, candidate.run_as) {
                    (Some(_), Some((uid, _))) => format!("bubblewrap as uid {uid}"),
                    (Some(_), None) => format!("bubblewrap as the {role}'s user"),
                    (None, Some((uid, _))) => format!("plain shell as uid {uid}"),
                    (None, None) => "plain shell".to_string(),
                };
                tracing::warn!(how = %how, reason = %reason, "sandbox probe failed");
                failures.push(format!("{how}: {reason}"));
            }
        }
    }
    Err(SandboxError::Unusable(failures.join("; ")))
}

fn describe(
    settings: &SandboxSettings,
    role: &str,
    is_root: bool,
    bwrap_found: bool,
    chosen: &Candidate,
    failures: &[String],
) -> Sandbox {
    let mut limitations = Vec::new();
    let failed = if failures.is_empty() {
        String::new()
    } else {
        format!(" ({})", failures.join("; "))
    };
    if chosen.bwrap.is_none() {
        let why = match settings.mode {
            SandboxMode::Off => format!("sandbox = \"off\" in the {role} config"),
            _ if !bwrap_found => "bubblewrap (bwrap) is not installed".to_string(),
            _ => format!("bubblewrap cannot run on this host{failed}"),
        };
        limitations.push(format!(
            "acceptance checks ran without network isolation: {why}"
        ));
    }
    if is_root && chosen.run_as.is_none() {
        limitations.push(format!(
            "acceptance checks ran as root: the check user cannot use the work dir{failed}"
        ));
    }
    Sandbox {
        bwrap: chosen.bwrap.clone(),
        run_as: chosen.run_as,
        required: settings.mode == SandboxMode::Required,
        limitations,
        overlay: None,
        hidden: chosen.hidden.clone(),
        network: false,
    }
}

/// Can checks under `sandbox` run on layered copies here? Only with bubblewrap and an
/// unprivileged check user (a root worker whose checks could not drop privileges keeps full
/// copies), tried for real in `work_dir`. The executor asks this of the sandbox its
/// self-checks share with its agent.
pub async fn probe_layers(sandbox: &Sandbox, work_dir: &Path) -> Option<OverlayTools> {
    let privileged = rustix::process::geteuid().is_root() && sandbox.run_as.is_none();
    if sandbox.bwrap.is_none() || privileged {
        return None;
    }
    probe_overlay(sandbox, work_dir).await
}

/// `name` on PATH, else in the usual system directories (a worker's PATH may be short).
fn find_tool(name: &str) -> Option<PathBuf> {
    find_on_path(name).or_else(|| {
        ["/usr/bin", "/bin", "/usr/sbin", "/sbin"]
            .iter()
            .map(|dir| Path::new(dir).join(name))
            .find(|candidate| candidate.is_file())
    })
}

/// Can checks under `sandbox` run on layered copies here (util-linux `unshare` and `mount`,
/// unprivileged overlayfs)? Tried for real: a check changes and adds files in its layered copy
/// of a throwaway tree, which must stay as it was. `None` (full copies) on any failure.
async fn probe_overlay(sandbox: &Sandbox, work_dir: &Path) -> Option<OverlayTools> {
    let tools = OverlayTools {
        unshare: find_tool("unshare")?,
        mount: find_tool("mount")?,
    };
    match try_overlay(sandbox, &tools, work_dir).await {
        Ok(()) => Some(tools),
        Err(reason) => {
            tracing::info!(reason = %reason, "checks get full copies: no layered copies here");
            None
        }
    }
}

async fn try_overlay(
    sandbox: &Sandbox,
    tools: &OverlayTools,
    work_dir: &Path,
) -> Result<(), String> {
    let io = |e: std::io::Error| format!("scratch dir: {e}");
    let scratch = tempfile::Builder::new()
        .prefix("sandbox-probe-")
        .tempdir_in(work_dir)
        .map_err(io)?;
    let root = scratch.path().canonicalize().map_err(io)?;
    let (base, check) = (root.join("base"), root.join("check"));
    let layer = Layer {
        lower: base.clone(),
        upper: check.join("upper"),
        work: check.join("work"),
    };
    let (ws, home, status) = (check.join("ws"), check.join("home"), check.join("status"));
    for dir in [&base, &ws, &home, &layer.upper, &layer.work] {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    std::fs::write(base.join("kept.txt"), b"base").map_err(io)?;
    std::fs::write(&status, b"").map_err(io)?;
    prepare_check_dir(&root, &[&base, &check], sandbox.run_as).map_err(io)?;
    let options = layer
        .options()
        .ok_or("the work dir's path cannot be mounted")?;
    let layered = Sandbox {
        overlay: Some(tools.clone()),
        ..sandbox.clone()
    };
    let run = run_check_in(
        &CheckSpec {
            command: "test \"$(cat kept.txt)\" = base && echo changed > kept.txt && echo new > added.txt",
            cwd: &ws,
            home: &home,
            path_var: DEFAULT_CHECK_PATH,
            timeout: PROBE_TIMEOUT,
            sandbox: &layered,
            status_file: &status,
            extra_env: &[],
        },
        Some(&options),
    )
    .await;
    if run.end != CheckEnd::Exited(Some(0)) {
        let output = String::from_utf8_lossy(&run.output);
        return Err(format!("{:?} {}", run.end, output.trim()));
    }
    let untouched = std::fs::read(base.join("kept.txt")).ok().as_deref()
        == Some(b"base".as_slice())
        && !base.join("added.txt").exists();
    let written = layer.upper.join("added.txt").is_file();
    if untouched && written {
        Ok(())
    } else {
        Err("the layered copy did not keep the base read-only".to_string())
    }
}
