//! loopgate-cli: the `loopgate` user command. Talks to the manager's HTTP API only (never to
//! NATS or Redis) and runs a local stack with `loopgate up`.

pub mod api_client;
pub mod cli_args;
pub mod commands;
pub mod errors;
pub mod exit_status;
pub mod git_repo;
pub mod local_stack;
pub mod log_clock;
pub mod output;
pub mod render;
pub mod run_ref;
pub mod run_view;
pub mod sse;
pub mod workspace_upload;

use api_client::ApiClient;
use cli_args::{Cli, Command};
use errors::CliError;
use exit_status::ExitStatus;

/// Runs one parsed command line.
pub async fn run(cli: Cli) -> Result<ExitStatus, CliError> {
    if let Command::Up(args) = &cli.command {
        local_stack::up(args).await?;
        return Ok(ExitStatus::Ok);
    }
    if let Command::StackGuard = &cli.command {
        local_stack::serve_stack_guard().await?;
        return Ok(ExitStatus::Ok);
    }
    if let Command::Keygen(args) = &cli.command {
        commands::keygen::keygen(args)?;
        return Ok(ExitStatus::Ok);
    }
    if let Command::Browse(args) = &cli.command {
        return commands::browse::browse(args).await;
    }
    if let Command::DesktopCheck(args) = &cli.command {
        return commands::desktop_check::desktop_check(args).await;
    }
    let client = ApiClient::new(&cli.server, cli.token.clone())?;
    let mut cli = cli;
    if let Some(run) = cli.command.run_mut() {
        *run = run_ref::resolve_run(&client, run).await?;
    }
    match &cli.command {
        Command::Submit(args) => commands::submit::submit(&client, args).await,
        Command::Watch(args) => {
            let zone = log_zone(args.local, cli.local_offset);
            commands::watch::watch(&client, &args.run, args.json, zone).await
        }
        Command::Status(args) => commands::run_commands::status(&client, args).await,
        Command::Runs(args) => commands::run_commands::runs(&client, args).await,
        Command::Log(args) => match (args.transcript, args.round) {
            (true, Some(round)) => {
                commands::transcript::transcript(&client, &args.run, round).await
            }
            _ => {
                let zone = log_zone(args.local, cli.local_offset);
                commands::run_commands::log(&client, &args.run, zone).await
            }
        },
        Command::Cancel(args) => commands::run_commands::cancel(&client, args).await,
        Command::Answer(args) => commands::run_commands::answer(&client, args).await,
        Command::Contract(args) => commands::contract::contract(&client, args).await,
        Command::Approve(args) => commands::contract::approve(&client, args).await,
        Command::Resume(args) => commands::run_commands::resume(&client, args).await,
        Command::Instruct(args) => commands::steering::instruct(&client, args).await,
        Command::Pause(args) => commands::steering::pause(&client, args).await,
        Command::Unpause(args) => commands::steering::unpause(&client, args).await,
        Command::Continue(args) => commands::steering::continue_run(&client, args).await,
        Command::Checkout(args) => {
            commands::checkout::checkout(&client, args).await?;
            Ok(ExitStatus::Ok)
        }
        Command::Diff(args) => commands::diff::diff(&client, args).await,
        Command::Verify(args) => commands::verify::verify(&client, args).await,
        Command::Apply(args) => commands::apply::apply(&client, args).await,
        Command::Up(_)
        | Command::Keygen(_)
        | Command::Browse(_)
        | Command::DesktopCheck(_)
        | Command::StackGuard => Ok(ExitStatus::Ok),
    }
}

/// The zone `log`/`watch` print times in; `--local` without a readable offset says so and
/// keeps UTC.
fn log_zone(local: bool, offset: Option<i32>) -> log_clock::Zone {
    let (zone, fell_back) = log_clock::Zone::chosen(local, offset);
    if fell_back {
        output::note("--local: this machine's time zone could not be read; times are in UTC");
    }
    zone
}
