//! An accessibility tree node as a snapshot item: its role, name, value and shown flags.

use chromiumoxide::cdp::browser_protocol::accessibility::{AxNode, AxValue};

use crate::snapshot::AxItem;

fn ax_text(v: &Option<AxValue>) -> String {
    match v.as_ref().and_then(|v| v.value.as_ref()) {
        Some(serde_json::Value::String(s)) => s.clone(),
        Some(serde_json::Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

const SHOWN_FLAGS: &[&str] = &[
    "checked", "disabled", "expanded", "selected", "pressed", "required", "invalid", "level",
];

pub(super) fn ax_item(node: &AxNode) -> AxItem {
    let mut flags = Vec::new();
    for prop in node.properties.iter().flatten() {
        let name = prop.name.as_ref();
        if !SHOWN_FLAGS.contains(&name) {
            continue;
        }
        match prop.value.value.as_ref() {
            Some(serde_json::Value::Bool(true)) => flags.push(name.to_string()),
            Some(serde_json::Value::String(s)) if s == "true" || s == "mixed" => {
                flags.push(if s == "true" {
                    name.to_string()
                } else {
                    format!("{name}=mixed")
                })
            }
            Some(serde_json::Value::Number(n)) => flags.push(format!("{name}={n}")),
            _ => {}
        }
    }
    let role = ax_text(&node.role);
    let value = ax_text(&node.value);
    AxItem {
        id: node.node_id.inner().clone(),
        children: node
            .child_ids
            .iter()
            .flatten()
            .map(|c| c.inner().clone())
            .collect(),
        ignored: node.ignored,
        value: (!value.is_empty()
            && matches!(
                role.as_str(),
                "textbox" | "searchbox" | "combobox" | "spinbutton" | "slider"
            ))
        .then_some(value),
        role,
        name: ax_text(&node.name),
        flags,
        backend_id: node.backend_dom_node_id.map(|b| *b.inner()),
    }
}
