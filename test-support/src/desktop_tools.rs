//! Whether the desktop tests can run: Xvfb and the other desktop tools installed
//! (`scripts/install-deps.sh desktop`). Missing ones print a SKIP line, and fail under `CI`.

/// `Ok(true)` when the desktop tools are installed; `Ok(false)` after a SKIP line naming
/// `test` when not; an error when not and `CI` is set.
#[allow(clippy::print_stdout, clippy::print_stderr)]
pub fn desktop_tools_or_skip(test: &str) -> anyhow::Result<bool> {
    let Some(missing) = loopgate_desktop::missing_tools() else {
        return Ok(true);
    };
    let why = format!("{missing} not installed (scripts/install-deps.sh desktop)");
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        anyhow::bail!("{test}: {why}");
    }
    println!("SKIP: {test}: {why}");
    eprintln!("SKIP: {test}: {why}");
    Ok(false)
}
