//! `loopgate desktop-check`: launch a program, type into fields and click controls by their
//! label, expect text, save a screenshot. Each step is reported; the first failing step ends
//! the script (the screenshot is still taken, as evidence).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::DesktopError;
use crate::session::Session;
use crate::tree::RenderedNode;

/// One check, in the order its steps run: launch, every type, every click, every expected
/// text, then the screenshot.
#[derive(Debug, Clone, Default)]
pub struct CheckScript {
    /// The command to launch (`sh -c`, in the current directory).
    pub launch: String,
    /// `Label=value` pairs to type into fields.
    pub types: Vec<(String, String)>,
    /// Labels of controls to click.
    pub clicks: Vec<String>,
    /// Text that must appear (each waited for up to `wait`).
    pub expect_texts: Vec<String>,
    /// Where to write a PNG of the screen at the end.
    pub screenshot: Option<PathBuf>,
    /// How long each expected text, field or control may take to appear.
    pub wait: Duration,
}

/// One step's report line.
#[derive(Debug, Clone)]
pub struct StepReport {
    pub step: String,
    /// `Ok(detail)` or the error.
    pub outcome: Result<String, String>,
}

/// The whole run's report.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub steps: Vec<StepReport>,
    /// The snapshot at the point of failure (to say why).
    pub failure_snapshot: Option<String>,
    pub passed: bool,
    /// The failing step's error.
    pub error: Option<DesktopError>,
    /// The screenshot this run wrote.
    pub screenshot_written: Option<PathBuf>,
}

const FIELD_ROLES: &[&str] = &[
    "text",
    "entry",
    "password text",
    "spin button",
    "combo box",
    "paragraph",
    "terminal",
];
const CLICK_ROLES: &[&str] = &[
    "push button",
    "toggle button",
    "check box",
    "radio button",
    "menu item",
    "check menu item",
    "radio menu item",
    "link",
    "page tab",
    "list item",
    "combo box",
];

/// Pick the element a label names: exact name on a preferred role, then case-insensitive,
/// then a unique case-insensitive substring, then exact on any role.
fn find_by_label<'a>(
    nodes: &'a [RenderedNode],
    label: &str,
    roles: &[&str],
) -> Option<&'a RenderedNode> {
    let label = label.trim();
    let lower = label.to_lowercase();
    let preferred: Vec<&RenderedNode> = nodes
        .iter()
        .filter(|n| roles.contains(&n.role.as_str()))
        .collect();
    preferred
        .iter()
        .find(|n| n.name == label)
        .or_else(|| preferred.iter().find(|n| n.name.to_lowercase() == lower))
        .copied()
        .or_else(|| {
            let mut hits = preferred
                .iter()
                .filter(|n| n.name.to_lowercase().contains(&lower));
            match (hits.next(), hits.next()) {
                (Some(one), None) => Some(*one),
                _ => None,
            }
        })
        .or_else(|| nodes.iter().find(|n| n.name == label))
}

/// Run a script on a session.
pub async fn run_script(session: &mut Session, script: &CheckScript) -> CheckReport {
    let mut report = CheckReport::default();
    match steps(session, script, &mut report).await {
        Err(e) => {
            report.failure_snapshot = session.snapshot_raw().await.ok().map(|r| r.text);
            report.error = Some(e);
        }
        Ok(()) => report.passed = true,
    }
    if let Some(path) = &script.screenshot {
        let outcome = match session.screenshot_png().await {
            Ok(png) => match write_png_in(Path::new("."), path, &png) {
                Ok(()) => {
                    report.screenshot_written = Some(path.clone());
                    Ok(format!("{} bytes", png.len()))
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        if outcome.is_err() {
            report.passed = false;
        }
        report.steps.push(StepReport {
            step: format!("screenshot {}", path.display()),
            outcome,
        });
    }
    report
}

/// Write the screenshot at `path` (`loopgate_workspace_walk::write_output_file`: beneath the
/// check's copy of the workspace when relative, never through a symlink).
pub(crate) fn write_png_in(cwd: &Path, path: &Path, png: &[u8]) -> Result<(), DesktopError> {
    loopgate_workspace_walk::write_output_file(cwd, path, png)
        .map_err(|e| DesktopError::io(e.what, e.source))
}

async fn steps(
    session: &mut Session,
    script: &CheckScript,
    report: &mut CheckReport,
) -> Result<(), DesktopError> {
    let mut step = |name: String, outcome: &Result<String, DesktopError>| {
        report.steps.push(StepReport {
            step: name,
            outcome: match outcome {
                Ok(detail) => Ok(detail.clone()),
                Err(e) => Err(e.to_string()),
            },
        });
    };
    let launched = session.launch(&script.launch).await;
    step(format!("launch {:?}", script.launch), &launched);
    launched?;
    for (label, value) in &script.types {
        let r = fill(session, label, value, script.wait).await;
        step(format!("type {label:?} = {value:?}"), &r);
        r?;
    }
    for label in &script.clicks {
        let r = click(session, label, script.wait).await;
        step(format!("click {label:?}"), &r);
        r?;
    }
    for text in &script.expect_texts {
        let r = session
            .wait_for_text(text, script.wait)
            .await
            .map(|()| "found".to_string());
        step(format!("expect text {text:?}"), &r);
        r?;
    }
    Ok(())
}

/// How often a label is looked for again while the program may still be drawing it.
const LABEL_POLL: Duration = Duration::from_millis(100);

async fn wait_for_label(
    session: &mut Session,
    label: &str,
    roles: &[&str],
    what: &'static str,
    wait: Duration,
) -> Result<RenderedNode, DesktopError> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let rendered = session.snapshot_raw().await?;
        if let Some(node) = find_by_label(&rendered.nodes, label, roles) {
            return Ok(node.clone());
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(DesktopError::NoSuchLabel {
                what,
                label: label.to_string(),
                timeout: wait,
            });
        }
        tokio::time::sleep(LABEL_POLL).await;
    }
}

async fn fill(
    session: &mut Session,
    label: &str,
    value: &str,
    wait: Duration,
) -> Result<String, DesktopError> {
    let node = wait_for_label(session, label, FIELD_ROLES, "field", wait).await?;
    let described = format!("{} {:?} [ref={}]", node.role, node.name, node.reference);
    session
        .type_text(Some(&node.reference), value, false)
        .await?;
    Ok(described)
}

async fn click(session: &mut Session, label: &str, wait: Duration) -> Result<String, DesktopError> {
    let node = wait_for_label(session, label, CLICK_ROLES, "control", wait).await?;
    let described = format!("{} {:?} [ref={}]", node.role, node.name, node.reference);
    session.click(&node.reference).await?;
    Ok(described)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(r: &str, role: &str, name: &str) -> RenderedNode {
        RenderedNode {
            reference: r.into(),
            role: role.into(),
            name: name.into(),
            text: None,
        }
    }

    #[test]
    fn label_matching() {
        let nodes = vec![
            n("e1", "label", "Note"),
            n("e2", "text", "Note"),
            n("e3", "push button", "Save"),
            n("e4", "push button", "Save all"),
            n("e5", "check box", "Remember me"),
        ];
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("Save", CLICK_ROLES, Some("e3")),
            ("save", CLICK_ROLES, Some("e3")),
            ("Note", FIELD_ROLES, Some("e2")),
            ("note", FIELD_ROLES, Some("e2")),
            ("remember", CLICK_ROLES, Some("e5")),
            ("Sav", CLICK_ROLES, None),
            ("Missing", CLICK_ROLES, None),
            ("Note", CLICK_ROLES, Some("e1")),
        ];
        for (label, roles, want) in cases {
            let got = find_by_label(&nodes, label, roles).map(|n| n.reference.as_str());
            assert_eq!(got, *want, "{label}");
        }
    }

    /// `--screenshot` naming a symlink the code under test planted: refused, its target
    /// untouched.
    #[test]
    #[allow(clippy::expect_used)]
    fn a_screenshot_path_that_is_a_symlink_is_not_written_through() {
        let cwd = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("target");
        std::fs::write(&target, "outside").expect("write");
        std::os::unix::fs::symlink(&target, cwd.path().join("shot.png")).expect("link");
        assert!(write_png_in(cwd.path(), Path::new("shot.png"), b"\x89PNG").is_err());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "outside");
        write_png_in(cwd.path(), Path::new("ok/a.png"), b"\x89PNG").expect("honest path");
    }
}
