//! Deciding at start-up how checks run on this host: try each way, best first, with a real
//! check on a throwaway scratch dir, and keep the first that works (see the module docs of
//! `sandbox`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::run_check::{run_check, CheckEnd, CheckSpec, DEFAULT_CHECK_PATH};
use crate::sandbox::launch::{
    find_on_path, prepare_check_dir, resolve_user, Sandbox, SandboxError, SandboxMode,
    SandboxSettings, DEFAULT_CHECK_USER,
};

/// uid/gid used when `nobody` is not in /etc/passwd.
const NOBODY_ID: u32 = 65534;
const PROBE_TIMEOUT: Duration = Duration::from_secs(15);

struct Candidate {
    bwrap: Option<PathBuf>,
    run_as: Option<(u32, u32)>,
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
    };
    let run = run_check(&CheckSpec {
        command: "echo ok > probe && test -s probe",
        cwd: &ws,
        home: &home,
        path_var: DEFAULT_CHECK_PATH,
        timeout: PROBE_TIMEOUT,
        sandbox: &sandbox,
        status_file: &status,
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

/// Decide how the auditor's checks run here (see the module docs). Fails only when no way
/// works at all.
pub async fn probe(settings: &SandboxSettings, work_dir: &Path) -> Result<Sandbox, SandboxError> {
    probe_for(settings, work_dir, "auditor").await
}

/// [`probe`] for the worker named `role` (`auditor`, `executor`): the role only changes how
/// the limitations it finds are worded.
pub async fn probe_for(
    settings: &SandboxSettings,
    work_dir: &Path,
    role: &str,
) -> Result<Sandbox, SandboxError> {
    std::fs::create_dir_all(work_dir).map_err(|source| SandboxError::Io {
        path: work_dir.to_path_buf(),
        source,
    })?;
    let is_root = rustix::process::geteuid().is_root();
    let run_as = if is_root {
        let name = settings.check_user.as_deref().unwrap_or(DEFAULT_CHECK_USER);
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        match resolve_user(name, &passwd) {
            Some(ids) => Some(ids),
            None if settings.check_user.is_none() => Some((NOBODY_ID, NOBODY_ID)),
            None => return Err(SandboxError::UnknownUser(name.to_string())),
        }
    } else {
        None
    };
    let bwrap = match settings.mode {
        SandboxMode::Off => None,
        _ => settings.bwrap.clone().or_else(|| find_on_path("bwrap")),
    };
    let mut candidates = Vec::new();
    if bwrap.is_some() {
        candidates.push(Candidate {
            bwrap: bwrap.clone(),
            run_as,
        });
        if run_as.is_some() {
            candidates.push(Candidate {
                bwrap: bwrap.clone(),
                run_as: None,
            });
        }
    }
    candidates.push(Candidate {
        bwrap: None,
        run_as,
    });
    if run_as.is_some() {
        candidates.push(Candidate {
            bwrap: None,
            run_as: None,
        });
    }
    let mut failures: Vec<String> = Vec::new();
    for candidate in &candidates {
        match try_candidate(candidate, work_dir).await {
            Ok(()) => {
                return Ok(describe(
                    settings,
                    role,
                    is_root,
                    bwrap.is_some(),
                    candidate,
                    &failures,
                ));
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
    }
}
