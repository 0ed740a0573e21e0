//! `loopgate`: see `loopgate --help`.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::process::ExitCode;

use clap::Parser;
use loopgate_cli::cli_args::Cli;
use loopgate_cli::errors::CliError;
use loopgate_cli::exit_status::ExitStatus;

fn main() -> ExitCode {
    let mut cli = Cli::parse();
    // Read while this process has one thread (`time` refuses otherwise).
    cli.local_offset = time::UtcOffset::current_local_offset()
        .ok()
        .map(|offset| offset.whole_seconds());
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(ExitStatus::Error.code());
        }
    };
    match runtime.block_on(loopgate_cli::run(cli)) {
        Ok(status) => ExitCode::from(status.code()),
        Err(CliError::StdoutClosed) => ExitCode::from(ExitStatus::Error.code()),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(e.exit_status().code())
        }
    }
}
