//! How acceptance checks are isolated on this host, decided once at start-up by probing (the
//! auditor before it audits, the executor before it runs self-checks: the same probe, the same
//! launch, so a self-check runs exactly as the audit's check will).
//!
//! Preferred: bubblewrap (`bwrap`, Debian package `bubblewrap`) with no network
//! (`--unshare-net`: only a private loopback), private pid/ipc/uts namespaces, a read-only view
//! of the host filesystem, a fresh `/tmp`, `/dev` and `/proc`, and only the check's scratch copy
//! and home writable; run as an unprivileged user (`check_user`, default `nobody`) when the
//! worker runs as root. Whatever the host cannot provide is dropped in this order — the
//! privilege drop (bwrap as root still has no network), then bubblewrap itself (e.g. user
//! namespaces unavailable to an unprivileged worker) — and every report then says so in its
//! gaps. `sandbox = "required"` turns a missing network sandbox into `inconclusive` checks
//! instead; `sandbox = "off"` skips bubblewrap. Timeouts, output caps, process-group kills and
//! the scrubbed environment (`run_check`) apply in every mode.
//!
//! Every sandbox hides the same kinds of host paths (`confine`: one definition of the flags
//! and of what is hidden): the worker's secrets (`worker_secrets`: its config file, key files,
//! credential directories), its work dir (a process gets its own directories bound back in)
//! and the host's UNIX sockets. The worker itself is sealed at start-up
//! (`worker_secrets::seal_process`): secret variables out of its environment, non-dumpable.
//!
//! The executor's agents (its `shell` tool, CLI agents) run in the same isolation with a few
//! differences of their own (`agent_launch`, probed by `agent_probe`): network as configured,
//! no fallback to running unsandboxed unless `sandbox = "off"`. Its self-checks run in the
//! agent's sandbox (`AgentSandbox::for_checks`): they see exactly what the agent's `shell`
//! sees.

pub(crate) mod agent_launch;
pub(crate) mod agent_probe;
pub(crate) mod confine;
pub(crate) mod launch;
pub(crate) mod overlay;
pub(crate) mod probe;
pub(crate) mod worker_secrets;

pub use agent_launch::{AgentLaunch, AgentSandbox, LaunchPlan};
pub use agent_probe::probe_agent_sandbox;
pub use confine::{hidden_paths, HiddenPath};
pub use launch::{is_valid_check_user, Sandbox, SandboxError, SandboxMode, SandboxSettings};
pub use overlay::OverlayTools;
pub use probe::{probe, probe_for, probe_hiding, probe_layers};
pub use worker_secrets::{seal_process, secret_paths, SealError};
