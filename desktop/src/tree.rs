//! The accessibility tree the driver reports (applications, their windows, the elements in
//! them) rendered as browser-snapshot-style lines with stable refs, and capped (pure).

use std::collections::{HashMap, HashSet};

use serde::Deserialize;

/// How many bytes of snapshot text a tool result carries by default (the browser's cap).
pub const DEFAULT_SNAPSHOT_CAP: usize = 12_000;

/// Roles shown only through their children when they have no name.
const TRANSPARENT_ROLES: &[&str] = &[
    "filler",
    "panel",
    "section",
    "scroll pane",
    "viewport",
    "layered pane",
    "root pane",
    "glass pane",
    "unknown",
    "redundant object",
];

/// One application on the desktop.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct AppNode {
    pub pid: i64,
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub windows: Vec<AxNode>,
}

/// One accessible element as the driver reported it.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct AxNode {
    /// Where it is: `PID:window.child.child` (what a ref points at).
    pub key: String,
    /// AT-SPI role name (`push button`, `text`, `frame`, ...).
    pub role: String,
    #[serde(default)]
    pub name: String,
    /// The contents of a text element.
    #[serde(default)]
    pub text: Option<String>,
    /// `focused`, `checked`, `selected`, `disabled`.
    #[serde(default)]
    pub flags: Vec<String>,
    #[serde(default = "shown")]
    pub showing: bool,
    #[serde(default)]
    pub truncated: bool,
    #[serde(default)]
    pub children: Vec<AxNode>,
}

fn shown() -> bool {
    true
}

/// Refs (`e1`, `e2`, ...) for elements, stable while an element keeps its place and role.
#[derive(Debug, Default, Clone)]
pub struct RefTable {
    by_element: HashMap<(String, String), String>,
    by_ref: HashMap<String, (String, String)>,
    latest: HashSet<String>,
    next: u64,
}

impl RefTable {
    fn ref_for(&mut self, key: &str, role: &str) -> String {
        let element = (key.to_string(), role.to_string());
        if let Some(r) = self.by_element.get(&element) {
            return r.clone();
        }
        self.next += 1;
        let r = format!("e{}", self.next);
        self.by_element.insert(element.clone(), r.clone());
        self.by_ref.insert(r.clone(), element);
        r
    }

    /// The element (key, role) a ref names, if the latest snapshot showed it.
    pub fn lookup(&self, reference: &str) -> Option<(String, String)> {
        let reference = reference.trim().trim_start_matches("ref=");
        if !self.latest.contains(reference) {
            return None;
        }
        self.by_ref.get(reference).cloned()
    }

    /// Forget every ref (a new desktop).
    pub fn clear(&mut self) {
        *self = RefTable::default();
    }
}

/// One element shown in a snapshot (what `desktop-check` matches labels against).
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedNode {
    pub reference: String,
    pub role: String,
    pub name: String,
    /// A text element's contents.
    pub text: Option<String>,
}

/// A rendered snapshot.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The lines, capped.
    pub text: String,
    /// Every element with a ref, in order (not capped).
    pub nodes: Vec<RenderedNode>,
    /// Window titles, in order.
    pub windows: Vec<String>,
}

impl Rendered {
    /// Whether `needle` is in any element's name or text.
    pub fn contains_text(&self, needle: &str) -> bool {
        self.nodes.iter().any(|n| {
            n.name.contains(needle) || n.text.as_deref().is_some_and(|t| t.contains(needle))
        }) || self.windows.iter().any(|w| w.contains(needle))
    }
}

/// Render `apps` with refs from `refs` (allocating new ones), capped at `cap` bytes.
pub fn render(apps: &[AppNode], refs: &mut RefTable, cap: usize) -> Rendered {
    let mut out = Rendered::default();
    let mut lines = Vec::new();
    let mut focused = None;
    refs.latest.clear();
    for app in apps {
        if app.windows.iter().all(|w| !w.showing) {
            continue;
        }
        lines.push(format!(
            "- application {} (pid {})",
            quote(&app.name),
            app.pid
        ));
        for window in app.windows.iter().filter(|w| w.showing) {
            out.windows.push(window.name.clone());
            walk(window, 1, refs, &mut lines, &mut out, &mut focused);
        }
    }
    let mut head = vec![format!(
        "Windows: {}",
        if out.windows.is_empty() {
            "(none: launch a program with desktop_launch)".to_string()
        } else {
            out.windows
                .iter()
                .map(|w| quote(w))
                .collect::<Vec<_>>()
                .join(", ")
        }
    )];
    head.push(format!(
        "Focused: {}",
        focused.unwrap_or_else(|| "(nothing)".into())
    ));
    head.extend(lines);
    out.text = cap_lines(&head, cap);
    out
}

fn walk(
    node: &AxNode,
    depth: usize,
    refs: &mut RefTable,
    lines: &mut Vec<String>,
    out: &mut Rendered,
    focused: &mut Option<String>,
) {
    if !node.showing {
        return;
    }
    let transparent = node.name.trim().is_empty()
        && node.text.is_none()
        && TRANSPARENT_ROLES.contains(&node.role.as_str());
    let child_depth = if transparent {
        depth
    } else {
        let reference = refs.ref_for(&node.key, &node.role);
        refs.latest.insert(reference.clone());
        let mut line = format!("{}- {}", "  ".repeat(depth), node.role);
        if !node.name.is_empty() {
            line.push(' ');
            line.push_str(&quote(&node.name));
        }
        line.push_str(&format!(" [ref={reference}]"));
        for flag in &node.flags {
            line.push_str(&format!(" [{flag}]"));
        }
        if let Some(text) = &node.text {
            line.push_str(": ");
            line.push_str(&quote(text));
        }
        if node.flags.iter().any(|f| f == "focused") {
            *focused = Some(format!(
                "{} {} [ref={reference}]",
                node.role,
                quote(&node.name)
            ));
        }
        lines.push(line);
        out.nodes.push(RenderedNode {
            reference,
            role: node.role.clone(),
            name: node.name.clone(),
            text: node.text.clone(),
        });
        depth + 1
    };
    for child in &node.children {
        walk(child, child_depth, refs, lines, out, focused);
    }
    if node.truncated {
        lines.push(format!(
            "{}- ... (more elements not listed)",
            "  ".repeat(child_depth)
        ));
    }
}

/// A JSON-style quoted string, one line.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

fn cap_lines(lines: &[String], cap: usize) -> String {
    let mut kept = String::new();
    let mut shown = 0;
    for line in lines {
        if kept.len() + line.len() + 1 > cap {
            break;
        }
        kept.push_str(line);
        kept.push('\n');
        shown += 1;
    }
    if shown < lines.len() {
        kept.push_str(&format!(
            "[snapshot truncated: {shown} of {} lines shown ({cap} bytes cap); use desktop_wait_for or act on the refs shown]",
            lines.len()
        ));
    }
    kept
}

#[cfg(test)]
#[path = "tree_tests.rs"]
mod tests;
