//! Accessibility nodes to lines. Nodes come in as the browser lists them (`AxItem`, a plain
//! copy of the DevTools AXNode); refs come from a `RefTable` kept per document.

use std::collections::HashMap;

/// One accessibility node, as the browser reported it.
#[derive(Debug, Clone, Default)]
pub struct AxItem {
    /// The node's id in this tree.
    pub id: String,
    /// Child node ids, in order.
    pub children: Vec<String>,
    /// Ignored by assistive technology (its children may not be).
    pub ignored: bool,
    /// ARIA-ish role (`button`, `textbox`, `StaticText`, ...).
    pub role: String,
    /// Accessible name.
    pub name: String,
    /// Current value (text fields).
    pub value: Option<String>,
    /// Boolean / level properties worth showing (`checked`, `disabled`, `level=1`, ...).
    pub flags: Vec<String>,
    /// The DOM node behind it (what a ref points at).
    pub backend_id: Option<i64>,
}

/// Refs (`e1`, `e2`, ...) for DOM nodes, stable for the life of a document.
#[derive(Debug, Default, Clone)]
pub struct RefTable {
    by_backend: HashMap<i64, String>,
    by_ref: HashMap<String, i64>,
    next: u64,
}

impl RefTable {
    /// The ref for a DOM node, allocating one the first time.
    pub fn ref_for(&mut self, backend_id: i64) -> String {
        if let Some(r) = self.by_backend.get(&backend_id) {
            return r.clone();
        }
        self.next += 1;
        let r = format!("e{}", self.next);
        self.by_backend.insert(backend_id, r.clone());
        self.by_ref.insert(r.clone(), backend_id);
        r
    }

    /// The DOM node a ref names, if it was handed out for this document.
    pub fn lookup(&self, reference: &str) -> Option<i64> {
        self.by_ref.get(reference.trim()).copied()
    }

    /// Forget every ref (a new document).
    pub fn clear(&mut self) {
        *self = RefTable::default();
    }
}

/// One element shown in a snapshot (what `loopgate browse` matches labels against).
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedNode {
    /// Its ref.
    pub reference: String,
    /// Role.
    pub role: String,
    /// Accessible name.
    pub name: String,
}

/// A rendered snapshot.
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    /// The text, one element a line.
    pub text: String,
    /// The elements with refs, in document order.
    pub nodes: Vec<RenderedNode>,
}

const SKIPPED_ROLES: &[&str] = &["InlineTextBox", "LineBreak"];
const TRANSPARENT_ROLES: &[&str] = &["generic", "none", "presentation"];
const ROOT_ROLES: &[&str] = &["RootWebArea", "WebArea"];

/// Render the tree rooted at the first node (the document) into lines.
pub fn render(items: &[AxItem], refs: &mut RefTable) -> Rendered {
    let by_id: HashMap<&str, &AxItem> = items.iter().map(|i| (i.id.as_str(), i)).collect();
    let mut out = Rendered::default();
    if let Some(root) = items.first() {
        let mut lines = Vec::new();
        walk(root, &by_id, refs, 0, "", &mut lines, &mut out.nodes, 0);
        out.text = lines.join("\n");
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn walk(
    item: &AxItem,
    by_id: &HashMap<&str, &AxItem>,
    refs: &mut RefTable,
    depth: usize,
    parent_name: &str,
    lines: &mut Vec<String>,
    nodes: &mut Vec<RenderedNode>,
    guard: usize,
) {
    if guard > 200 || SKIPPED_ROLES.contains(&item.role.as_str()) {
        return;
    }
    let children: Vec<&AxItem> = item
        .children
        .iter()
        .filter_map(|c| by_id.get(c.as_str()).copied())
        .collect();
    let name = item.name.trim();
    let transparent = item.ignored
        || (TRANSPARENT_ROLES.contains(&item.role.as_str()) && name.is_empty())
        || ROOT_ROLES.contains(&item.role.as_str())
        || item.role.is_empty();
    if transparent {
        for child in children {
            walk(
                child,
                by_id,
                refs,
                depth,
                parent_name,
                lines,
                nodes,
                guard + 1,
            );
        }
        return;
    }
    let indent = "  ".repeat(depth);
    if item.role == "StaticText" {
        if !name.is_empty() && name != parent_name {
            lines.push(format!("{indent}- text: {}", quote(name)));
        }
        return;
    }
    let mut line = format!("{indent}- {}", item.role);
    if !name.is_empty() {
        line.push(' ');
        line.push_str(&quote(name));
    }
    for flag in &item.flags {
        line.push_str(&format!(" [{flag}]"));
    }
    if let Some(backend) = item.backend_id {
        let reference = refs.ref_for(backend);
        line.push_str(&format!(" [ref={reference}]"));
        nodes.push(RenderedNode {
            reference,
            role: item.role.clone(),
            name: name.to_string(),
        });
    }
    if let Some(value) = item.value.as_deref().filter(|v| !v.is_empty()) {
        line.push_str(&format!(": {}", quote(value)));
    }
    let at = lines.len();
    lines.push(line);
    for child in children {
        walk(child, by_id, refs, depth + 1, name, lines, nodes, guard + 1);
    }
    if lines.len() > at + 1 && item.value.is_none() {
        lines[at].push(':');
    }
}

fn quote(s: &str) -> String {
    let one_line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    let capped: String = one_line.chars().take(200).collect();
    let more = if one_line.chars().count() > 200 {
        "…"
    } else {
        ""
    };
    format!(
        "\"{}{more}\"",
        capped.replace('\\', "\\\\").replace('"', "\\\"")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: &str, role: &str, name: &str, children: &[&str], backend: Option<i64>) -> AxItem {
        AxItem {
            id: id.into(),
            children: children.iter().map(|c| c.to_string()).collect(),
            role: role.into(),
            name: name.into(),
            backend_id: backend,
            ..AxItem::default()
        }
    }

    fn page() -> Vec<AxItem> {
        vec![
            node("1", "RootWebArea", "Greeter", &["2"], Some(1)),
            node("2", "generic", "", &["3", "5", "7"], Some(2)),
            node("3", "heading", "Hello page", &["4"], Some(3)),
            node("4", "StaticText", "Hello page", &[], Some(4)),
            node("5", "button", "Greet", &["6"], Some(5)),
            node("6", "StaticText", "Greet", &[], Some(6)),
            node("7", "paragraph", "", &["8"], Some(7)),
            node("8", "StaticText", "Say \"hi\"", &["9"], Some(8)),
            node("9", "InlineTextBox", "", &[], None),
        ]
    }

    #[test]
    fn renders_playwright_style_lines() {
        let mut refs = RefTable::default();
        let mut items = page();
        items[2].flags = vec!["level=1".into()];
        let out = render(&items, &mut refs);
        assert_eq!(
            out.text,
            "- heading \"Hello page\" [level=1] [ref=e1]\n- button \"Greet\" [ref=e2]\n- paragraph [ref=e3]:\n  - text: \"Say \\\"hi\\\"\""
        );
        assert_eq!(out.nodes[1].name, "Greet");
        assert_eq!(refs.lookup("e2"), Some(5));
        assert_eq!(refs.lookup("e9"), None);
    }

    #[test]
    fn refs_are_stable_across_snapshots_until_cleared() {
        let mut refs = RefTable::default();
        let first = render(&page(), &mut refs);
        let mut items = page();
        items.insert(2, node("10", "link", "New", &[], Some(10)));
        items[1].children.insert(0, "10".into());
        let second = render(&items, &mut refs);
        assert!(first.text.contains("button \"Greet\" [ref=e2]"));
        assert!(second.text.contains("button \"Greet\" [ref=e2]"));
        assert!(second.text.contains("link \"New\" [ref=e4]"));
        refs.clear();
        assert_eq!(refs.lookup("e2"), None);
    }

    #[test]
    fn ignored_nodes_are_transparent_and_values_shown() {
        let mut items = vec![
            node("1", "RootWebArea", "", &["2"], Some(1)),
            node("2", "form", "", &["3"], Some(2)),
            node("3", "textbox", "New item", &[], Some(3)),
        ];
        items[1].ignored = true;
        items[2].value = Some("milk".into());
        let out = render(&items, &mut RefTable::default());
        assert_eq!(out.text, "- textbox \"New item\" [ref=e1]: \"milk\"");
    }

    #[test]
    fn cycles_and_missing_children_do_not_hang() {
        let items = vec![
            node("1", "RootWebArea", "", &["2", "404"], Some(1)),
            node("2", "group", "g", &["1"], Some(2)),
        ];
        let out = render(&items, &mut RefTable::default());
        assert!(out.text.starts_with("- group \"g\" [ref=e1]"));
    }
}
