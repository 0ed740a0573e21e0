//! `loopgate desktop-check`: a desktop program check from flags (exit 0 = every step passed).

use std::time::Duration;

use loopgate_desktop::{run_script, CheckScript, LaunchSettings, Session};

use crate::cli_args::DesktopCheckArgs;
use crate::commands::browse::{parse_label_value, record_screenshot};
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

/// How much of the desktop's snapshot a failure prints.
const FAILURE_SNAPSHOT_LINES: usize = 60;

pub async fn desktop_check(args: &DesktopCheckArgs) -> Result<ExitStatus, CliError> {
    let types = args
        .type_into
        .iter()
        .map(|t| parse_label_value("--type", t))
        .collect::<Result<Vec<_>, _>>()?;
    if args.launch.trim().is_empty() {
        return Err(CliError::Usage(
            "--launch: an empty command (give the program to start, e.g. --launch ./app.py)".into(),
        ));
    }
    let cwd = std::env::current_dir().map_err(|e| CliError::ReadInput {
        path: ".".into(),
        source: e,
    })?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let mut settings = LaunchSettings::detect();
    settings.dir = Some(cwd.clone());
    let mut session = Session::new(settings).with_launch_wait(timeout * 2);
    let script = CheckScript {
        launch: args.launch.clone(),
        types,
        clicks: args.click.clone(),
        expect_texts: args.expect_text.clone(),
        screenshot: args.screenshot.clone(),
        wait: timeout,
    };
    let report = run_script(&mut session, &script).await;
    session.close();
    if let Some(written) = &report.screenshot_written {
        // The check's verdict is the program's; a record that cannot be written costs only
        // the evidence's picture.
        if let Err(e) = record_screenshot(&cwd.join(written)) {
            output::line(format!("warning: screenshot not recorded as evidence: {e}"))?;
        }
    }
    for step in &report.steps {
        match &step.outcome {
            Ok(detail) => output::line(format!("ok    {}: {detail}", step.step))?,
            Err(why) => output::line(format!("FAIL  {}: {why}", step.step))?,
        }
    }
    if report.passed {
        output::line(format!(
            "desktop-check: passed ({} steps)",
            report.steps.len()
        ))?;
        return Ok(ExitStatus::Ok);
    }
    if let Some(snapshot) = &report.failure_snapshot {
        output::line("desktop at the failure (accessibility snapshot):")?;
        let lines: Vec<&str> = snapshot.lines().collect();
        for line in lines.iter().take(FAILURE_SNAPSHOT_LINES) {
            output::line(format!("  {line}"))?;
        }
        if lines.len() > FAILURE_SNAPSHOT_LINES {
            output::line(format!(
                "  ... {} more lines",
                lines.len() - FAILURE_SNAPSHOT_LINES
            ))?;
        }
    }
    output::line("desktop-check: FAILED")?;
    Ok(ExitStatus::Error)
}
