//! `loopgate browse`: open a page, fill fields and click controls by their label, expect text,
//! save a screenshot. Each step is reported; the first failing step ends the script.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::error::BrowserError;
use crate::session::text_wait::{TextWait, TextWaitStep};
use crate::session::Session;
use crate::snapshot::RenderedNode;

/// One browse script, in the order its steps run: navigate, every fill, every click, every
/// expected text, then the screenshot (taken even when a step failed, as evidence).
#[derive(Debug, Clone, Default)]
pub struct BrowseScript {
    /// Where to go.
    pub url: String,
    /// `Label=value` pairs to type into fields.
    pub fills: Vec<(String, String)>,
    /// Labels of controls to click.
    pub clicks: Vec<String>,
    /// Text that must appear on the page (each waited for up to `wait`).
    pub expect_texts: Vec<String>,
    /// Where to write a PNG of the page at the end.
    pub screenshot: Option<PathBuf>,
    /// How long each expected text, and each field or control to fill or click, may take to
    /// appear.
    pub wait: Duration,
    /// An expected text, field or control not on the page once the page's text has stayed the
    /// same this long fails then, before `wait` runs out (None: wait all of `wait`).
    pub settle: Option<Duration>,
}

/// One step's report line.
#[derive(Debug, Clone)]
pub struct StepReport {
    /// What was done.
    pub step: String,
    /// `Ok(detail)` or the error.
    pub outcome: Result<String, String>,
}

/// The whole run's report.
#[derive(Debug, Default)]
pub struct BrowseReport {
    /// Steps in order.
    pub steps: Vec<StepReport>,
    /// The snapshot at the point of failure (to say why).
    pub failure_snapshot: Option<String>,
    /// Whether every step passed.
    pub passed: bool,
    /// The failing step's error (its kind is what callers branch on).
    pub error: Option<BrowserError>,
    /// The screenshot this run wrote (`BrowseScript::screenshot`, when writing it worked).
    pub screenshot_written: Option<PathBuf>,
}

const FIELD_ROLES: &[&str] = &["textbox", "searchbox", "combobox", "spinbutton"];
const CLICK_ROLES: &[&str] = &[
    "button", "link", "checkbox", "radio", "menuitem", "tab", "option", "switch",
];

/// Pick the element a label names: exact name on a preferred role, then exact on any role,
/// then case-insensitive, then a unique case-insensitive substring.
pub fn find_by_label<'a>(
    nodes: &'a [RenderedNode],
    label: &str,
    roles: &[&str],
) -> Option<&'a RenderedNode> {
    let label = label.trim();
    let lower = label.to_lowercase();
    let preferred = |n: &&RenderedNode| roles.contains(&n.role.as_str());
    nodes
        .iter()
        .filter(preferred)
        .find(|n| n.name == label)
        .or_else(|| {
            nodes
                .iter()
                .filter(preferred)
                .find(|n| n.name.to_lowercase() == lower)
        })
        .or_else(|| {
            let mut hits = nodes
                .iter()
                .filter(preferred)
                .filter(|n| n.name.to_lowercase().contains(&lower));
            match (hits.next(), hits.next()) {
                (Some(one), None) => Some(one),
                _ => None,
            }
        })
        .or_else(|| nodes.iter().find(|n| n.name == label))
}

/// Run a script on a session.
pub async fn run_script(session: &mut Session, script: &BrowseScript) -> BrowseReport {
    let mut report = BrowseReport::default();
    let result = steps(session, script, &mut report).await;
    if let Err(e) = result {
        report.failure_snapshot = session.snapshot_raw().await.ok().map(|r| r.text);
        report.error = Some(e);
    } else {
        report.passed = true;
    }
    if let Some(path) = &script.screenshot {
        let outcome = match session.screenshot_png().await {
            Ok(png) => match write_png(path, &png) {
                Ok(()) => {
                    report.screenshot_written = Some(path.clone());
                    Ok(format!("{} bytes", png.len()))
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        if outcome.is_err() && report.passed {
            report.passed = false;
        }
        report.steps.push(StepReport {
            step: format!("screenshot {}", path.display()),
            outcome,
        });
    }
    report
}

fn write_png(path: &Path, png: &[u8]) -> Result<(), BrowserError> {
    write_png_in(Path::new("."), path, png)
}

/// Write the screenshot at `path` (`loopgate_workspace_walk::write_output_file`: beneath the
/// check's copy of the workspace when relative, never through a symlink).
fn write_png_in(cwd: &Path, path: &Path, png: &[u8]) -> Result<(), BrowserError> {
    loopgate_workspace_walk::write_output_file(cwd, path, png)
        .map_err(|e| BrowserError::io(e.what, e.source))
}

async fn steps(
    session: &mut Session,
    script: &BrowseScript,
    report: &mut BrowseReport,
) -> Result<(), BrowserError> {
    let mut step = |name: String, outcome: &Result<String, BrowserError>| {
        report.steps.push(StepReport {
            step: name,
            outcome: match outcome {
                Ok(detail) => Ok(detail.clone()),
                Err(e) => Err(e.to_string()),
            },
        });
    };
    let nav = session.navigate(&script.url).await;
    step(format!("navigate {}", script.url), &nav);
    nav?;
    for (label, value) in &script.fills {
        let r = fill(session, label, value, script.wait, script.settle).await;
        step(format!("fill {label:?} = {value:?}"), &r);
        r?;
    }
    for label in &script.clicks {
        let r = click(session, label, script.wait, script.settle).await;
        step(format!("click {label:?}"), &r);
        r?;
    }
    for text in &script.expect_texts {
        let r = session
            .wait_for_text_settled(text, script.wait, script.settle)
            .await
            .map(|()| "found".to_string());
        step(format!("expect text {text:?}"), &r);
        r?;
    }
    Ok(())
}

/// How often a label is looked for again while the page may still be rendering it.
const LABEL_POLL: Duration = Duration::from_millis(100);

/// The element `label` names among `roles`, waiting up to `wait` for the page to render it
/// (as `--expect-text` waits for its text): a control a script adds after load is found. With
/// `settle`, a page whose text has stayed the same that long without it fails then.
async fn wait_for_label(
    session: &mut Session,
    label: &str,
    roles: &[&str],
    what: &'static str,
    wait: Duration,
    settle: Option<Duration>,
) -> Result<RenderedNode, BrowserError> {
    let mut waiting = TextWait::new(tokio::time::Instant::now(), wait, settle);
    loop {
        let rendered = session.snapshot_raw().await?;
        let node = find_by_label(&rendered.nodes, label, roles);
        match waiting.observe_found(&rendered.text, node.is_some(), tokio::time::Instant::now()) {
            TextWaitStep::Found => {
                if let Some(node) = node {
                    return Ok(node.clone());
                }
            }
            TextWaitStep::Poll => {}
            TextWaitStep::TimedOut => {
                return Err(BrowserError::NoSuchLabel {
                    what,
                    label: label.to_string(),
                    timeout: wait,
                })
            }
            TextWaitStep::Settled => {
                return Err(BrowserError::LabelNotSettled {
                    what,
                    label: label.to_string(),
                    settle: settle.unwrap_or_default(),
                })
            }
        }
        tokio::time::sleep(LABEL_POLL).await;
    }
}

async fn fill(
    session: &mut Session,
    label: &str,
    value: &str,
    wait: Duration,
    settle: Option<Duration>,
) -> Result<String, BrowserError> {
    let node = wait_for_label(session, label, FIELD_ROLES, "field", wait, settle).await?;
    let described = format!("{} {:?} [ref={}]", node.role, node.name, node.reference);
    session.type_text(&node.reference, value, false).await?;
    Ok(described)
}

async fn click(
    session: &mut Session,
    label: &str,
    wait: Duration,
    settle: Option<Duration>,
) -> Result<String, BrowserError> {
    let node = wait_for_label(session, label, CLICK_ROLES, "control", wait, settle).await?;
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
        }
    }

    /// `--screenshot` naming a symlink (or a path through one) the code under test planted in
    /// the check's copy: refused, the file it points to untouched.
    #[test]
    #[allow(clippy::expect_used)]
    fn a_screenshot_path_that_is_a_symlink_is_not_written_through() {
        let cwd = tempfile::tempdir().expect("tempdir");
        let outside = tempfile::tempdir().expect("tempdir");
        let target = outside.path().join("target");
        std::fs::write(&target, "outside").expect("write");
        std::os::unix::fs::symlink(&target, cwd.path().join("shot.png")).expect("link");
        std::os::unix::fs::symlink(outside.path(), cwd.path().join("shots")).expect("link");
        for path in ["shot.png", "shots/new.png"] {
            let written = write_png_in(cwd.path(), Path::new(path), b"\x89PNG");
            assert!(written.is_err(), "{path}");
        }
        let absolute = cwd.path().join("shot.png");
        assert!(write_png_in(cwd.path(), &absolute, b"\x89PNG").is_err());
        assert_eq!(std::fs::read_to_string(&target).expect("read"), "outside");
        assert!(!outside.path().join("new.png").exists());
        write_png_in(cwd.path(), Path::new("ok/a.png"), b"\x89PNG").expect("honest path");
        assert_eq!(
            std::fs::read(cwd.path().join("ok/a.png")).expect("read"),
            b"\x89PNG"
        );
    }

    #[test]
    fn label_matching() {
        let nodes = vec![
            n("e1", "heading", "Add"),
            n("e2", "textbox", "New item"),
            n("e3", "button", "Add"),
            n("e4", "button", "Add all"),
            n("e5", "link", "Help me"),
        ];
        let cases: &[(&str, &[&str], Option<&str>)] = &[
            ("Add", CLICK_ROLES, Some("e3")),
            ("add", CLICK_ROLES, Some("e3")),
            ("New item", FIELD_ROLES, Some("e2")),
            ("new", FIELD_ROLES, Some("e2")),
            ("help", CLICK_ROLES, Some("e5")),
            ("Ad", CLICK_ROLES, None),
            ("Missing", CLICK_ROLES, None),
            ("Add", FIELD_ROLES, Some("e1")),
        ];
        for (label, roles, want) in cases {
            let got = find_by_label(&nodes, label, roles).map(|n| n.reference.as_str());
            assert_eq!(got, *want, "{label}");
        }
    }
}
