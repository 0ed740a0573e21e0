//! `loopgate browse`: a browser check from flags (exit 0 = every step passed).

use std::time::Duration;

use loopgate_browser::{run_script, BrowseScript, LaunchSettings, Served, Session, TargetPolicy};
use loopgate_protocol::gui::BROWSE_RECORD_ENV;

use crate::cli_args::BrowseArgs;
use crate::errors::CliError;
use crate::exit_status::ExitStatus;
use crate::output;

/// How much of the page's snapshot a failure prints.
const FAILURE_SNAPSHOT_LINES: usize = 60;

/// Parse `LABEL=VALUE` (the first `=` splits; the label may not be empty).
pub fn parse_fill(raw: &str) -> Result<(String, String), CliError> {
    parse_label_value("--fill", raw)
}

/// Parse a `LABEL=VALUE` given to `flag`.
pub(crate) fn parse_label_value(flag: &str, raw: &str) -> Result<(String, String), CliError> {
    match raw.split_once('=') {
        Some((label, value)) if !label.trim().is_empty() => {
            Ok((label.trim().to_string(), value.to_string()))
        }
        _ => Err(CliError::Usage(format!(
            "{flag} {raw:?}: expected LABEL=VALUE, e.g. {flag} \"New item=milk\""
        ))),
    }
}

pub async fn browse(args: &BrowseArgs) -> Result<ExitStatus, CliError> {
    let fills = args
        .fill
        .iter()
        .map(|f| parse_fill(f))
        .collect::<Result<Vec<_>, _>>()?;
    let cwd = std::env::current_dir().map_err(|e| CliError::ReadInput {
        path: ".".into(),
        source: e,
    })?;
    let timeout = Duration::from_secs(args.timeout_secs);
    let base_url = args.base_url.clone().filter(|u| !u.trim().is_empty());
    let _served = match (&args.serve, &base_url) {
        (Some(cmd), Some(url)) if !cmd.trim().is_empty() => {
            let served = Served::start(cmd, &cwd, url, &[], Duration::from_secs(30)).await?;
            output::line(format!("serve {cmd:?}: {url} is up"))?;
            Some(served)
        }
        (Some(cmd), None) if !cmd.trim().is_empty() => {
            return Err(CliError::Usage(
                "--serve needs --base-url (or $LOOPGATE_GUI_URL): the URL it serves".into(),
            ))
        }
        _ => None,
    };
    let policy = TargetPolicy {
        workspace: Some(cwd.clone()),
        base_url,
        allow_network: args.allow_network,
    };
    let mut session = Session::new(LaunchSettings::detect()?, policy).with_load_timeout(timeout);
    let script = BrowseScript {
        url: args.url.clone(),
        fills,
        clicks: args.click.clone(),
        expect_texts: args.expect_text.clone(),
        screenshot: args.screenshot.clone(),
        wait: timeout,
        settle: (args.settle_secs > 0).then(|| Duration::from_secs(args.settle_secs)),
    };
    let report = run_script(&mut session, &script).await;
    session.close();
    if let Some(written) = &report.screenshot_written {
        // The check's verdict is the page's; a record that cannot be written costs only the
        // evidence's picture.
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
        output::line(format!("browse: passed ({} steps)", report.steps.len()))?;
        return Ok(ExitStatus::Ok);
    }
    if let Some(snapshot) = &report.failure_snapshot {
        output::line("page at the failure (accessibility snapshot):")?;
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
    output::line("browse: FAILED")?;
    Ok(ExitStatus::Error)
}

/// Append the screenshot's path to the auditor's record (`$LOOPGATE_BROWSE_RECORD`), so the
/// check's evidence carries it. Nothing to do outside a check.
pub(crate) fn record_screenshot(path: &std::path::Path) -> Result<(), CliError> {
    use std::io::Write;
    let Some(record) = std::env::var_os(BROWSE_RECORD_ENV).filter(|v| !v.is_empty()) else {
        return Ok(());
    };
    let record = std::path::PathBuf::from(record);
    let io_err = |source| CliError::WriteOutput {
        path: record.clone(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&record)
        .map_err(io_err)?;
    writeln!(file, "{}", path.display()).map_err(io_err)
}

#[cfg(test)]
mod tests {
    use super::parse_fill;

    #[test]
    fn fills() {
        let cases = [
            ("New item=milk", Some(("New item", "milk"))),
            ("a=b=c", Some(("a", "b=c"))),
            ("Name=", Some(("Name", ""))),
            ("=x", None),
            ("novalue", None),
        ];
        for (raw, want) in cases {
            let got = parse_fill(raw).ok();
            let got = got.as_ref().map(|(l, v)| (l.as_str(), v.as_str()));
            assert_eq!(got, want, "{raw}");
        }
    }
}
