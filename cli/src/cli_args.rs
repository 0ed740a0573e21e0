//! The command line (clap derive).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use clap::{Args, Parser, Subcommand};
use loopgate_common::state::RunState;

use crate::exit_status::EXIT_CODES_HELP;

pub const DEFAULT_SERVER: &str = "http://127.0.0.1:7600";

#[derive(Debug, Parser)]
#[command(
    name = "loopgate",
    version,
    about = "Submit, watch and collect loopgate runs; start a local loopgate stack",
    after_help = EXIT_CODES_HELP
)]
pub struct Cli {
    /// Manager API base URL.
    #[arg(long, global = true, env = "LOOPGATE_SERVER", default_value = DEFAULT_SERVER)]
    pub server: String,
    /// Bearer token sent to the manager.
    #[arg(long, global = true, env = "LOOPGATE_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    #[command(subcommand)]
    pub command: Command,
    /// This machine's UTC offset in seconds, read by `main` before anything else runs (for
    /// `log`/`watch --local`); `None` when it could not be read.
    #[arg(skip)]
    pub local_offset: Option<i32>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a local stack in the foreground: nats-server, redis-server, manager, executors, auditor.
    ///
    /// Data, generated configs (manager.toml, executor-N.toml, auditor.toml) and logs
    /// (logs/NAME.log) live under --dir. nats-server / redis-server come from
    /// $LOOPGATE_NATS_SERVER / $LOOPGATE_REDIS_SERVER, else ~/.cache/loopgate/bin/, else PATH
    /// (install them with scripts/install-deps.sh services). The daemons are found next to
    /// this executable (or in $LOOPGATE_BIN_DIR). Every role uses the model profile `local`:
    /// $LOOPGATE_MODEL_URL (default http://127.0.0.1:8080/v1), $LOOPGATE_MODEL (default
    /// qwen2.5-coder), key from $LOOPGATE_API_KEY when set; the manager's copy asks for
    /// structured replies ($LOOPGATE_STRUCTURED_OUTPUT: json_schema, the default, or off);
    /// replies are capped at $LOOPGATE_MAX_TOKENS tokens (default 2048) and sampled at
    /// $LOOPGATE_TEMPERATURE (default 0.2).
    /// Ctrl-C or SIGTERM stops everything.
    Up(UpArgs),
    /// Validate a task file, upload the workspace and start a run; prints the run id.
    Submit(SubmitArgs),
    /// Follow a run's log until it ends (reconnects if the stream drops).
    Watch(WatchArgs),
    /// Show a run's state.
    Status(RunJsonArgs),
    /// List runs.
    Runs(RunsArgs),
    /// Print a run's log.
    Log(LogArgs),
    /// Cancel a run.
    Cancel(RunArg),
    /// Answer the question a run is waiting on.
    Answer(AnswerArgs),
    /// Show a run's contract: still being planned, proposed (waiting for approval) or frozen,
    /// with its spec hash, as a file `approve --edit` accepts.
    Contract(RunJsonArgs),
    /// Approve a planned run's proposed contract (task `require_approval = true`), or replace
    /// it with an edited file. Refused once the contract is frozen.
    Approve(ApproveArgs),
    /// Resume a blocked, budget_exhausted, cancelled or failed run as a new generation.
    ///
    /// Results still in flight from the old generation are recognised and dropped. Budget
    /// flags change the new generation's budget; `max_rounds` counts rounds per generation.
    Resume(ResumeArgs),
    /// Give a run an instruction without stopping it: it goes into the manager's next prompts
    /// (never to executors or auditors directly) until newer instructions push it out.
    Instruct(InstructArgs),
    /// Pause a queued or running run: the step in flight finishes and is recorded, no new
    /// step is taken, and the wall-clock budget stops running until `unpause`.
    Pause(RunArg),
    /// Unpause a paused run: it takes the step it held back and goes on.
    Unpause(RunArg),
    /// Continue a completed run with a new goal (and contract) as a new generation, from its
    /// completed snapshot; its earlier rounds and evidence stay in its history.
    ///
    /// --goal alone keeps the run's task otherwise (acceptance checks, roles, budget); --task
    /// FILE replaces the task (its goal, unless --goal is given too). Budget flags change the
    /// new generation's budget, as with `resume`.
    Continue(ContinueArgs),
    /// Download a run's snapshot into a directory, verifying every file's sha256.
    Checkout(CheckoutArgs),
    /// Drive headless Chromium as an acceptance check: open a page, fill fields and click
    /// controls by label, expect text, save a screenshot. Exit 0 when every step passed.
    ///
    /// Steps run in this order: --url, every --fill, every --click, every --expect-text (each
    /// field, control and text waited for up to --timeout-secs, so controls rendered after load
    /// are found); the --screenshot is written last, also on failure.
    /// --url is a path relative to the current directory (opened as a file), a path starting
    /// with / joined to --base-url when one is set, or an http URL on loopback. Chromium comes
    /// from $LOOPGATE_CHROMIUM, else /usr/lib/chromium/chromium, else PATH.
    Browse(BrowseArgs),
    /// Drive a desktop program on a private X display as an acceptance check: launch it, type
    /// into fields and click controls by their accessible label, expect text, save a
    /// screenshot. Exit 0 when every step passed, 1 when one failed, 2 on bad usage.
    ///
    /// Steps run in this order: --launch (waited on until it shows a window), every --type,
    /// every --click, every --expect-text (each field, control and text waited for up to
    /// --timeout-secs); the --screenshot is written last, also on failure. The display is Xvfb
    /// with matchbox-window-manager, the tree is read through AT-SPI, input is xdotool
    /// (`scripts/install-deps.sh desktop`); everything started dies with the check.
    DesktopCheck(DesktopCheckArgs),
    /// Show what a round changed: a unified diff from its base to its candidate snapshot.
    Diff(DiffArgs),
    /// Prove a run completed: check its certificate's signed completing report (a final
    /// audit, or a round audit signed as completing the run) against trusted auditor keys,
    /// re-hash every blob of the final snapshot, and check every blocking criterion has pass
    /// evidence on it under the frozen contract. Exits 0 only if all hold.
    ///
    /// Trust root: only keys you hold: --key FILE (the auditor pool's public key, obtained out
    /// of band; `loopgate up` keeps its keys in DIR/auditor-keys.pub), else the files in
    /// $LOOPGATE_TRUSTED_KEYS (FILE[:FILE...]), else the trust store
    /// ~/.config/loopgate/trusted-keys ($XDG_CONFIG_HOME). Without any, it exits 6 ("no
    /// trusted key"): the key list inside a certificate proves nothing. --offline FILE
    /// --snapshot DIR needs no server: FILE is a certificate (`--export FILE`, or GET
    /// /v1/runs/{id}/certificate) and DIR the checked-out final snapshot (`loopgate checkout
    /// RUN DIR`), which must hold exactly its files.
    Verify(VerifyArgs),
    /// Put a completed run started from a git repository (`submit --repo`) back into it: one
    /// commit whose parent is the run's start commit, on a new branch (default
    /// loopgate/<short run id>), or with --patch a `git format-patch` file.
    ///
    /// First runs every check of `loopgate verify RUN` (signature against your trusted keys,
    /// every blob re-hashed, evidence for every blocking criterion) and refuses with exit 6,
    /// writing nothing, when one fails. Never touches the working tree, the index, HEAD or an
    /// existing branch. The message carries the goal, the run id and the certificate digest
    /// (a `Loopgate-Certificate:` trailer).
    Apply(ApplyArgs),
    /// Generate an Ed25519 auditor signing key: FILE (secret, mode 0600) and FILE.pub (the
    /// public key for [manager] auditor_keys and `loopgate verify --key`).
    Keygen(KeygenArgs),
    /// Internal: started by `up`; stops the stack's children when `up` dies without doing so.
    #[command(name = "stack-guard", hide = true)]
    StackGuard,
}

impl Command {
    /// The RUN argument of a command that takes one (resolved from a short id before the
    /// command runs).
    pub fn run_mut(&mut self) -> Option<&mut String> {
        match self {
            Command::Watch(a) => Some(&mut a.run),
            Command::Status(a) | Command::Contract(a) => Some(&mut a.run),
            Command::Log(a) => Some(&mut a.run.run),
            Command::Cancel(a) | Command::Pause(a) | Command::Unpause(a) => Some(&mut a.run),
            Command::Answer(a) => Some(&mut a.run),
            Command::Approve(a) => Some(&mut a.run),
            Command::Resume(a) => Some(&mut a.run),
            Command::Instruct(a) => Some(&mut a.run),
            Command::Continue(a) => Some(&mut a.run),
            Command::Checkout(a) => Some(&mut a.run),
            Command::Diff(a) => Some(&mut a.run),
            Command::Verify(a) => a.run.as_mut(),
            Command::Apply(a) => Some(&mut a.run),
            Command::Up(_)
            | Command::Submit(_)
            | Command::Runs(_)
            | Command::Browse(_)
            | Command::DesktopCheck(_)
            | Command::Keygen(_)
            | Command::StackGuard => None,
        }
    }
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where data, configs and logs live.
    #[arg(long, default_value = ".loopgate")]
    pub dir: PathBuf,
    /// Number of executor workers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub executors: u32,
    /// Also start a gui executor (headless Chromium, the browser_* tools); the manager offers
    /// the `gui` route while it runs.
    #[arg(long)]
    pub gui: bool,
    #[arg(long, default_value_t = 14222)]
    pub nats_port: u16,
    /// The Redis primary's port (with --ha the replica and the sentinels take free ports).
    #[arg(long, default_value_t = 16379)]
    pub redis_port: u16,
    /// Redis with failover: a primary, a replica and three Redis Sentinels; the manager finds
    /// the primary through the sentinels and acknowledges a transition once the replica holds it.
    #[arg(long)]
    pub ha: bool,
    /// Address the manager's HTTP API listens on.
    #[arg(long, default_value = "127.0.0.1:7600")]
    pub http_addr: SocketAddr,
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    /// The task file (TOML).
    pub task: PathBuf,
    /// Directory uploaded as the run's starting workspace (without it the run starts empty).
    /// Skips .git/, target/, node_modules/, .loopgate/, __pycache__/, .venv/.
    #[arg(long, conflicts_with = "repo")]
    pub workspace: Option<PathBuf>,
    /// A git repository: the run starts from the tree of a commit (--ref, default HEAD):
    /// tracked files only, read from git, so untracked and ignored files never leave the
    /// machine. The run records the commit; `loopgate apply RUN` puts the verified result on
    /// a branch on top of it.
    #[arg(long, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// With --repo: the commit to start from (a branch, tag or commit id; default HEAD).
    #[arg(long = "ref", value_name = "REV", requires = "repo")]
    pub rev: Option<String>,
    /// With --repo: also take tracked files modified in the working tree (listed before the
    /// upload); untracked files are still left out.
    #[arg(long, requires = "repo")]
    pub include_dirty: bool,
    /// Sibling episodes per executor step (1..=8), over the task file's `[budget] attempts`: each step
    /// runs N times from the same base, and the auditor's evidence picks the winner.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub attempts: Option<u32>,
    /// Follow the run after submitting (as `loopgate watch`).
    #[arg(long)]
    pub watch: bool,
    /// Print the created run as JSON (and raw log entries with --watch).
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WatchArgs {
    pub run: String,
    /// Print each log entry as a raw JSON line.
    #[arg(long)]
    pub json: bool,
    /// Print times in this machine's time zone (`TZ`, else /etc/localtime; its offset when
    /// the command starts) instead of UTC.
    #[arg(long)]
    pub local: bool,
}

#[derive(Debug, Args)]
pub struct RunJsonArgs {
    pub run: String,
    /// Print the server's JSON as is.
    #[arg(long)]
    pub json: bool,
}

/// `loopgate log RUN [--json] [--round N --transcript]`.
#[derive(Debug, Args)]
pub struct LogArgs {
    #[command(flatten)]
    pub run: RunJsonArgs,
    /// The round whose episode transcript `--transcript` prints.
    #[arg(long, requires = "transcript")]
    pub round: Option<u32>,
    /// Print round N's episode transcript (model turns, tool calls with arguments and
    /// results, self-check refusals; redacted) instead of the run log.
    #[arg(long, requires = "round")]
    pub transcript: bool,
    /// Print times in this machine's time zone (`TZ`, else /etc/localtime; its offset when
    /// the command starts) instead of UTC.
    #[arg(long)]
    pub local: bool,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs in this state.
    #[arg(long, value_parser = state_parser())]
    pub state: Option<String>,
    /// Runs to show (newest first; the manager answers at most 500).
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..=500))]
    pub limit: u64,
    /// Runs to skip, newest first (the footer names the next page's offset).
    #[arg(long, default_value_t = 0)]
    pub offset: u64,
    /// Print the server's JSON as is.
    #[arg(long)]
    pub json: bool,
}

impl RunsArgs {
    pub fn run_state(&self) -> Option<RunState> {
        self.state.as_deref().and_then(RunState::parse)
    }
}

fn state_parser() -> PossibleValuesParser {
    PossibleValuesParser::new(RunState::ALL.map(RunState::as_str))
}

#[derive(Debug, Args)]
pub struct RunArg {
    pub run: String,
    /// Print the run JSON the manager returns.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    pub run: String,
    /// The answer text.
    pub text: String,
    /// Print the run JSON the manager returns.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct InstructArgs {
    pub run: String,
    /// The instruction (at most 4000 characters).
    pub text: String,
    /// Print the run JSON the manager returns.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("new_task").required(true).multiple(true).args(["goal", "task"])))]
pub struct ContinueArgs {
    pub run: String,
    /// The new goal.
    #[arg(long)]
    pub goal: Option<String>,
    /// A task file (TOML) for the new generation: goal, acceptance, roles, budget, ...
    #[arg(long, value_name = "FILE")]
    pub task: Option<PathBuf>,
    /// Rounds allowed in the new generation.
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// Total token budget for the run.
    #[arg(long)]
    pub max_total_tokens: Option<u64>,
    /// Total cost budget for the run, in US dollars.
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock budget for the new generation, in seconds.
    #[arg(long)]
    pub max_wall_secs: Option<u64>,
    /// Sibling episodes per executor step (1..=8; the task's `[budget] attempts`): each step
    /// runs N times from the same base, and the auditor's evidence picks the winner.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub attempts: Option<u32>,
    /// Print the run JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApproveArgs {
    pub run: String,
    /// A contract file (the TOML `loopgate contract RUN` prints, edited) that replaces the
    /// proposal.
    #[arg(long, value_name = "FILE")]
    pub edit: Option<PathBuf>,
    /// Print the run JSON the manager returns.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    pub run: String,
    /// Rounds allowed in the new generation.
    #[arg(long)]
    pub max_rounds: Option<u32>,
    /// Total token budget for the run.
    #[arg(long)]
    pub max_total_tokens: Option<u64>,
    /// Total cost budget for the run, in US dollars.
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// Wall-clock budget for the new generation, in seconds.
    #[arg(long)]
    pub max_wall_secs: Option<u64>,
    /// Sibling episodes per executor step (1..=8; the task's `[budget] attempts`): each step
    /// runs N times from the same base, and the auditor's evidence picks the winner.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=8))]
    pub attempts: Option<u32>,
    /// Print the run JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct CheckoutArgs {
    pub run: String,
    /// Target directory: must be empty or not exist.
    pub dir: PathBuf,
    /// A snapshot id instead of the run's current snapshot.
    #[arg(long, conflicts_with = "round")]
    pub snapshot: Option<String>,
    /// Round N's candidate snapshot instead of the run's current snapshot.
    #[arg(long)]
    pub round: Option<u32>,
}

#[derive(Debug, Args)]
pub struct DiffArgs {
    pub run: String,
    /// The round to show (default: the latest round that produced a candidate).
    #[arg(long)]
    pub round: Option<u32>,
    /// Only list the changed paths (`A`/`M`/`D` and the path).
    #[arg(long)]
    pub name_status: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The run to verify (not with --offline).
    #[arg(required_unless_present = "offline", conflicts_with = "offline")]
    pub run: Option<String>,
    /// Verify an exported certificate file instead, with no server.
    #[arg(long, value_name = "FILE", requires = "snapshot")]
    pub offline: Option<PathBuf>,
    /// With --offline: the checked-out tree of the run's final snapshot.
    #[arg(long, value_name = "DIR", requires = "offline", conflicts_with = "run")]
    pub snapshot: Option<PathBuf>,
    /// Trusted auditor public keys (64 hex digits each, one per line, `#` comments); only
    /// these are trusted. Repeatable. Without it: $LOOPGATE_TRUSTED_KEYS, then the trust store.
    #[arg(long, visible_alias = "key-file", value_name = "FILE")]
    pub key: Vec<PathBuf>,
    /// Also write the server's certificate to FILE (for `--offline` later).
    #[arg(long, value_name = "FILE", conflicts_with = "offline")]
    pub export: Option<PathBuf>,
    /// Print the verification as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ApplyArgs {
    pub run: String,
    /// The repository the run started from (any directory inside it).
    #[arg(long, value_name = "PATH", default_value = ".")]
    pub repo: PathBuf,
    /// The new branch (must not exist; default loopgate/<first 8 characters of the run id>).
    #[arg(long, value_name = "NAME", conflicts_with = "patch")]
    pub branch: Option<String>,
    /// Write the commit as a `git format-patch` mbox file (must not exist) instead of a
    /// branch; `git am FILE` applies it on the start commit.
    #[arg(long, value_name = "FILE")]
    pub patch: Option<PathBuf>,
    /// Trusted auditor public keys, as for `loopgate verify`. Repeatable. Without it:
    /// $LOOPGATE_TRUSTED_KEYS, then the trust store.
    #[arg(long, value_name = "FILE")]
    pub key: Vec<PathBuf>,
    /// Print the outcome as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where the secret key goes (must not exist); the public key goes to FILE.pub.
    pub file: PathBuf,
}

#[cfg(test)]
#[path = "cli_args_tests.rs"]
mod tests;

#[derive(Debug, Args)]
pub struct DesktopCheckArgs {
    /// The program to start (`sh -c`, in the current directory), e.g. `./notes.py`.
    #[arg(long, value_name = "CMD")]
    pub launch: String,
    /// Text that must appear in some element's name or contents; repeatable.
    #[arg(long, value_name = "TEXT", required = true)]
    pub expect_text: Vec<String>,
    /// Click the control labelled LABEL (push button, check box, menu item, ...); repeatable.
    #[arg(long, value_name = "LABEL")]
    pub click: Vec<String>,
    /// Type VALUE into the field labelled LABEL (`--type "Note=milk"`); repeatable.
    #[arg(long = "type", value_name = "LABEL=VALUE")]
    pub type_into: Vec<String>,
    /// Write a PNG of the screen here at the end (also when a step failed).
    #[arg(long, value_name = "PATH")]
    pub screenshot: Option<PathBuf>,
    /// Limit for each field, control and expected text to appear (and the window, x2).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout_secs: u64,
}

#[derive(Debug, Args)]
pub struct BrowseArgs {
    /// The page: a workspace-relative path, `/path` (joined to --base-url), or a loopback http URL.
    #[arg(long)]
    pub url: String,
    /// Type VALUE into the field labelled LABEL (`--fill "New item=milk"`); repeatable.
    #[arg(long, value_name = "LABEL=VALUE")]
    pub fill: Vec<String>,
    /// Click the control labelled LABEL (button, link, checkbox, ...); repeatable.
    #[arg(long, value_name = "LABEL")]
    pub click: Vec<String>,
    /// Text that must appear on the page; repeatable.
    #[arg(long, value_name = "TEXT")]
    pub expect_text: Vec<String>,
    /// Write a PNG of the page here at the end (also when a step failed).
    #[arg(long, value_name = "PATH")]
    pub screenshot: Option<PathBuf>,
    /// Limit for loading the page and for each field, control and expected text to appear.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=300))]
    pub timeout_secs: u64,
    /// Fail an expected text, a field or a control that is not on the page once the page's text
    /// has not changed for this many seconds, instead of waiting all of --timeout-secs (for
    /// pages that render everything they will show at once); 0, the default, waits the whole
    /// limit.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=300))]
    pub settle_secs: u64,
    /// Base for --url values starting with / (the task's `[gui] url`; the auditor sets it).
    #[arg(long, env = "LOOPGATE_GUI_URL")]
    pub base_url: Option<String>,
    /// A command serving the page (the task's `[gui] serve`), started in the current directory
    /// before browsing and stopped after; needs --base-url.
    #[arg(long, env = "LOOPGATE_GUI_SERVE")]
    pub serve: Option<String>,
    /// Allow http URLs off loopback.
    #[arg(long)]
    pub allow_network: bool,
}
