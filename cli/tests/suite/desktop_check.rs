//! `loopgate desktop-check` against a real Xvfb and AT-SPI bus, driving the
//! `examples/desktop-notes` app: a check that passes only after its click, the screenshot as
//! evidence, bad usage exiting 2.

use std::path::{Path, PathBuf};
use std::process::Command;

fn notes_dir() -> anyhow::Result<tempfile::TempDir> {
    let dir = tempfile::tempdir()?;
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/desktop-notes/workspace/notes.py");
    std::fs::copy(example, dir.path().join("notes.py"))?;
    Ok(dir)
}

fn desktop_check(dir: &Path, args: &[&str]) -> anyhow::Result<std::process::Output> {
    Ok(Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .arg("desktop-check")
        .args(args)
        .current_dir(dir)
        .output()?)
}

#[test]
fn desktop_check_passes_after_click_and_fails_without() -> anyhow::Result<()> {
    if !loopgate_test_support::desktop_tools_or_skip("desktop-check")? {
        return Ok(());
    }
    let dir = notes_dir()?;
    let record = dir.path().join("record.txt");
    let ok = Command::new(env!("CARGO_BIN_EXE_loopgate"))
        .args([
            "desktop-check",
            "--launch",
            "./notes.py",
            "--type",
            "Note=milk",
            "--click",
            "Save",
            "--expect-text",
            "Saved: milk",
            "--screenshot",
            "shots/saved.png",
        ])
        .current_dir(dir.path())
        .env(loopgate_protocol::gui::BROWSE_RECORD_ENV, &record)
        .output()?;
    let stdout = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(
        ok.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    assert!(stdout.contains("ok    click \"Save\""), "{stdout}");
    assert!(stdout.contains("desktop-check: passed"), "{stdout}");
    assert!(std::fs::read(dir.path().join("shots/saved.png"))?.starts_with(b"\x89PNG"));
    // The screenshot is recorded as the check's evidence.
    let recorded = std::fs::read_to_string(&record)?;
    assert!(
        recorded.trim_end().ends_with("shots/saved.png"),
        "{recorded}"
    );

    let no_click = desktop_check(
        dir.path(),
        &[
            "--launch",
            "./notes.py",
            "--type",
            "Note=milk",
            "--expect-text",
            "Saved: milk",
            "--timeout-secs",
            "2",
        ],
    )?;
    let stdout = String::from_utf8_lossy(&no_click.stdout);
    assert_eq!(no_click.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains("FAIL  expect text \"Saved: milk\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("push button \"Save\""),
        "the failure shows the desktop: {stdout}"
    );
    Ok(())
}

#[test]
fn desktop_check_bad_usage_exits_2() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for args in [
        &[
            "--launch",
            "./notes.py",
            "--type",
            "novalue",
            "--expect-text",
            "x",
        ][..],
        &["--launch", "./notes.py"][..],
        &["--expect-text", "x"][..],
        &["--launch", " ", "--expect-text", "x"][..],
    ] {
        let out = desktop_check(dir.path(), args)?;
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
