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
    /// structured replies ($LOOPGATE_STRUCTURED_OUTPUT: json_schema, the default, or off).
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
    Log(RunJsonArgs),
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
    /// Download a run's snapshot into a directory, verifying every file's sha256.
    Checkout(CheckoutArgs),
    /// Show what a round changed: a unified diff from its base to its candidate snapshot.
    Diff(DiffArgs),
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Where data, configs and logs live.
    #[arg(long, default_value = ".loopgate")]
    pub dir: PathBuf,
    /// Number of executor workers.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub executors: u32,
    #[arg(long, default_value_t = 14222)]
    pub nats_port: u16,
    #[arg(long, default_value_t = 16379)]
    pub redis_port: u16,
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
    #[arg(long)]
    pub workspace: Option<PathBuf>,
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
}

#[derive(Debug, Args)]
pub struct RunJsonArgs {
    pub run: String,
    /// Print the server's JSON as is.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RunsArgs {
    /// Only runs in this state.
    #[arg(long, value_parser = state_parser())]
    pub state: Option<String>,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn usage_errors_exit_2_and_states_are_checked() {
        let bad: &[&[&str]] = &[
            &["loopgate"],
            &["loopgate", "runs", "--state", "sleeping"],
            &["loopgate", "up", "--executors", "0"],
            &["loopgate", "answer", "r1"],
        ];
        for args in bad {
            let err = Cli::try_parse_from(*args).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{args:?}");
        }
        let ok = Cli::try_parse_from(["loopgate", "runs", "--state", "waiting_for_input"]).unwrap();
        match ok.command {
            Command::Runs(args) => assert_eq!(args.run_state(), Some(RunState::WaitingForInput)),
            other => panic!("{other:?}"),
        }
    }
}
