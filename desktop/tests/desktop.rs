//! loopgate-desktop against a real Xvfb, window manager and AT-SPI bus, driving the
//! `examples/desktop-notes` GTK app. Without Xvfb (or the other desktop tools) each test
//! prints a SKIP line, and fails when `CI` is set.

#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Result;
use loopgate_desktop::{
    missing_tools, run_script, CheckScript, DesktopError, LaunchSettings, Session,
};

/// The example's workspace copied into a temp dir, or `None` after a SKIP line.
fn notes_dir(test: &str) -> Result<Option<tempfile::TempDir>> {
    if let Some(missing) = missing_tools() {
        let why = format!("{missing} not installed (scripts/install-deps.sh desktop)");
        if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
            anyhow::bail!("{why}");
        }
        println!("SKIP: desktop {test}: {why}");
        eprintln!("SKIP: desktop {test}: {why}");
        return Ok(None);
    }
    let dir = tempfile::tempdir()?;
    let example = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../examples/desktop-notes/workspace/notes.py");
    let target = dir.path().join("notes.py");
    std::fs::copy(example, &target)?;
    Ok(Some(dir))
}

fn session(dir: &std::path::Path) -> Session {
    let mut launch = LaunchSettings::detect();
    launch.screen = (800, 600);
    launch.dir = Some(dir.to_path_buf());
    Session::new(launch).with_launch_wait(Duration::from_secs(20))
}

fn ref_of(snapshot: &str, needle: &str) -> Result<String> {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .ok_or_else(|| anyhow::anyhow!("no {needle:?} in:\n{snapshot}"))?;
    let start = line.find("[ref=").map(|i| i + 5).unwrap_or(0);
    let end = line[start..].find(']').map(|i| i + start).unwrap_or(start);
    Ok(line[start..end].to_string())
}

#[tokio::test]
async fn launch_snapshot_type_click_screenshot() -> Result<()> {
    let Some(dir) = notes_dir("launch_snapshot_type_click_screenshot")? else {
        return Ok(());
    };
    let mut s = session(dir.path());
    let launched = s.launch("./notes.py").await?;
    assert!(launched.contains("\"Notes\""), "{launched}");
    let snap = s.snapshot().await?;
    assert!(snap.starts_with("Windows: \"Notes\""), "{snap}");
    assert!(snap.contains("Focused: text \"Note\""), "{snap}");
    let save = ref_of(&snap, "push button \"Save\"")?;
    let field = ref_of(&snap, "text \"Note\"")?;
    // A ref the snapshot never showed is refused, naming what to do.
    let bad = s.click("e999").await;
    assert!(
        matches!(bad, Err(DesktopError::UnknownRef(ref r)) if r == "e999"),
        "{bad:?}"
    );
    s.type_text(Some(&field), "old text", false).await?;
    s.wait_for_text("old text", Duration::from_secs(5)).await?;
    // Typing into a ref replaces what the field held.
    s.type_text(Some(&field), "milk & eggs", false).await?;
    s.wait_for_text("milk & eggs", Duration::from_secs(5))
        .await?;
    let before = s.snapshot().await?;
    assert!(before.contains("\"Saved: (nothing yet)\""), "{before}");
    assert!(!before.contains("old text"), "{before}");
    s.click(&save).await?;
    s.wait_for_text("Saved: milk & eggs", Duration::from_secs(5))
        .await?;
    s.wait_for_element(Some("push button"), "Save", Duration::from_secs(1))
        .await?;
    // Refs stay the same across snapshots.
    let after = s.snapshot().await?;
    assert_eq!(ref_of(&after, "push button \"Save\"")?, save, "{after}");
    let missing = s
        .wait_for_text("never there", Duration::from_millis(300))
        .await;
    assert!(
        matches!(missing, Err(DesktopError::NotFound { .. })),
        "{missing:?}"
    );
    s.press_key("Tab").await?;
    assert!(matches!(
        s.press_key("Hyper").await,
        Err(DesktopError::UnknownKey(_))
    ));
    let off = s.click_at(5000, 5).await;
    assert!(matches!(off, Err(DesktopError::BadRequest(_))), "{off:?}");
    s.click_at(10, 10).await?;
    let png = s.screenshot_png().await?;
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(png.len() > 1000, "{} bytes", png.len());
    s.close();
    Ok(())
}

#[tokio::test]
async fn a_program_that_exits_is_reported_with_its_output() -> Result<()> {
    let Some(dir) = notes_dir("a_program_that_exits")? else {
        return Ok(());
    };
    let mut s = session(dir.path());
    let err = s.launch("echo broken >&2; exit 3").await;
    match err {
        Err(DesktopError::AppExited { status, tail, .. }) => {
            assert_eq!(status, "exit status 3");
            assert_eq!(tail, "broken");
        }
        other => anyhow::bail!("expected AppExited, got {other:?}"),
    }
    Ok(())
}

#[tokio::test]
async fn a_killed_desktop_is_restarted_on_the_next_call() -> Result<()> {
    let Some(dir) = notes_dir("a_killed_desktop_is_restarted")? else {
        return Ok(());
    };
    let mut s = session(dir.path());
    s.launch("./notes.py").await?;
    let snap = s.snapshot().await?;
    let save = ref_of(&snap, "push button \"Save\"")?;
    let pid = s.driver_pid().ok_or_else(|| anyhow::anyhow!("no driver"))?;
    std::process::Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()?;
    // Wait until the driver is dead (a zombie, or reaped): the session finds it so before it
    // sends the click, the case where a ref of the dead desktop must not reach a fresh one.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !is_dead(pid) {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "driver {pid} still alive"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The call that meets the crash says so; the next one runs on a fresh desktop.
    let next = s.click(&save).await;
    assert!(matches!(next, Err(DesktopError::Crashed)), "{next:?}");
    let fresh = s.snapshot().await?;
    assert!(s.take_restarted());
    assert!(fresh.starts_with("Windows: (none"), "{fresh}");
    // What the killed driver started (its display, the app) died with its process group.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = live_in_group(pid);
        if left.is_empty() {
            break;
        }
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "left running in group {pid}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Whether process `pid` has exited (a zombie not yet reaped, or gone).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
        Err(_) => true,
    }
}

/// The processes of process group `group` that are still running (zombies not counted: an
/// orphan's exit is reaped by whoever adopted it, in its own time).
fn live_in_group(group: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|stat| {
            // pid (comm) state ppid pgrp ...: split after the command's closing parenthesis.
            let (head, rest) = stat.rsplit_once(')')?;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let (state, pgrp) = (*fields.first()?, fields.get(2)?.parse::<u32>().ok()?);
            (pgrp == group && state != "Z").then(|| format!("{head})"))
        })
        .collect()
}

fn check(click: bool, screenshot: Option<PathBuf>) -> CheckScript {
    CheckScript {
        launch: "./notes.py".into(),
        types: vec![("Note".into(), "milk".into())],
        clicks: if click { vec!["Save".into()] } else { vec![] },
        expect_texts: vec!["Saved: milk".into()],
        screenshot,
        wait: Duration::from_secs(3),
    }
}

#[tokio::test]
async fn the_check_script_passes_only_after_the_click() -> Result<()> {
    let Some(dir) = notes_dir("the_check_script_passes_only_after_the_click")? else {
        return Ok(());
    };
    let shot = dir.path().join("shots/notes.png");
    for (click, passes) in [(false, false), (true, true)] {
        let mut s = session(dir.path());
        let report = run_script(&mut s, &check(click, Some(shot.clone()))).await;
        assert_eq!(report.passed, passes, "click {click}: {:#?}", report.steps);
        if !passes {
            let snap = report.failure_snapshot.unwrap_or_default();
            assert!(snap.contains("Saved: (nothing yet)"), "{snap}");
            assert!(matches!(report.error, Some(DesktopError::NotFound { .. })));
        }
        // The screenshot is taken either way, as evidence.
        assert_eq!(report.screenshot_written.as_ref(), Some(&shot));
        assert!(std::fs::read(&shot)?.starts_with(b"\x89PNG"));
        s.close();
    }
    Ok(())
}

/// A client without the desktop's cookie (another episode's program that reached the socket,
/// a process outside the sandbox) is refused by the display: the X server answers its
/// connection setup with Failed.
#[tokio::test]
async fn the_display_refuses_a_client_without_its_cookie() -> Result<()> {
    use std::io::{Read, Write};
    let Some(dir) = notes_dir("the_display_refuses_a_client_without_its_cookie")? else {
        return Ok(());
    };
    let mut s = session(dir.path());
    s.start().await?;
    let display = s
        .display()
        .unwrap_or_default()
        .trim_start_matches(':')
        .to_string();
    let mut x = std::os::unix::net::UnixStream::connect(format!("/tmp/.X11-unix/X{display}"))?;
    x.set_read_timeout(Some(Duration::from_secs(5)))?;
    // Little-endian connection setup, protocol 11.0, no authorization name or data.
    x.write_all(&[b'l', 0, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0])?;
    let mut status = [0u8; 1];
    x.read_exact(&mut status)?;
    assert_eq!(
        status[0], 0,
        "setup status (0 Failed, 1 Success, 2 Authenticate)"
    );
    s.close();
    Ok(())
}
