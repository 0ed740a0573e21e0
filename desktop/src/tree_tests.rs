#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;

fn node(key: &str, role: &str, name: &str, children: Vec<AxNode>) -> AxNode {
    AxNode {
        key: key.into(),
        role: role.into(),
        name: name.into(),
        showing: true,
        children,
        ..AxNode::default()
    }
}

fn notes(saved: &str, focused_entry: bool) -> Vec<AppNode> {
    let mut entry = node("7:0.0.1", "text", "Note", vec![]);
    entry.text = Some("milk".into());
    if focused_entry {
        entry.flags = vec!["focused".into()];
    }
    let mut hidden = node("7:0.0.4", "push button", "Hidden", vec![]);
    hidden.showing = false;
    vec![AppNode {
        pid: 7,
        name: "notes.py".into(),
        windows: vec![node(
            "7:0",
            "frame",
            "Notes",
            vec![node(
                "7:0.0",
                "filler",
                "",
                vec![
                    node("7:0.0.0", "label", "Note", vec![]),
                    entry,
                    node("7:0.0.2", "push button", "Save", vec![]),
                    node("7:0.0.3", "label", saved, vec![]),
                    hidden,
                ],
            )],
        )],
    }]
}

#[test]
fn renders_lines_with_refs_focus_and_windows() {
    let mut refs = RefTable::default();
    let r = render(
        &notes("Saved: nothing", true),
        &mut refs,
        DEFAULT_SNAPSHOT_CAP,
    );
    let want = "Windows: \"Notes\"\n\
                Focused: text \"Note\" [ref=e3]\n\
                - application \"notes.py\" (pid 7)\n  \
                - frame \"Notes\" [ref=e1]\n    \
                - label \"Note\" [ref=e2]\n    \
                - text \"Note\" [ref=e3] [focused]: \"milk\"\n    \
                - push button \"Save\" [ref=e4]\n    \
                - label \"Saved: nothing\" [ref=e5]\n";
    assert_eq!(r.text, want);
    assert_eq!(r.windows, vec!["Notes".to_string()]);
    assert_eq!(r.nodes.len(), 5);
    // Hidden elements get no ref; refs resolve to (key, role).
    assert_eq!(
        refs.lookup("e4"),
        Some(("7:0.0.2".to_string(), "push button".to_string()))
    );
    assert_eq!(
        refs.lookup("ref=e4"),
        refs.lookup("e4"),
        "the ref= form is accepted"
    );
    assert_eq!(refs.lookup("e6"), None);
}

#[test]
fn refs_are_stable_across_snapshots_and_only_latest_resolve() {
    let mut refs = RefTable::default();
    let first = render(
        &notes("Saved: nothing", true),
        &mut refs,
        DEFAULT_SNAPSHOT_CAP,
    );
    let second = render(
        &notes("Saved: milk", false),
        &mut refs,
        DEFAULT_SNAPSHOT_CAP,
    );
    let refs_of = |r: &Rendered| {
        r.nodes
            .iter()
            .map(|n| n.reference.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(refs_of(&first), refs_of(&second));
    assert!(second.text.contains("label \"Saved: milk\" [ref=e5]"));
    assert!(second.text.contains("Focused: (nothing)"));
    // The application closed: its refs are no longer usable.
    render(&[], &mut refs, DEFAULT_SNAPSHOT_CAP);
    assert_eq!(refs.lookup("e4"), None);
}

#[test]
fn same_place_other_role_gets_a_new_ref() {
    let mut refs = RefTable::default();
    render(&notes("a", false), &mut refs, DEFAULT_SNAPSHOT_CAP);
    let mut apps = notes("a", false);
    apps[0].windows[0].children[0].children[2].role = "check box".into();
    let r = render(&apps, &mut refs, DEFAULT_SNAPSHOT_CAP);
    assert!(r.text.contains("check box \"Save\" [ref=e6]"), "{}", r.text);
}

#[test]
fn contains_text_table() {
    let mut refs = RefTable::default();
    let r = render(
        &notes("Saved: milk", false),
        &mut refs,
        DEFAULT_SNAPSHOT_CAP,
    );
    for (needle, want) in [
        ("Saved: milk", true),
        ("milk", true),
        ("Notes", true),
        ("Hidden", false),
        ("eggs", false),
    ] {
        assert_eq!(r.contains_text(needle), want, "{needle}");
    }
}

#[test]
fn cap_table() {
    // (cap, lines kept, truncated)
    for (cap, kept, truncated) in [(12_000, 8, false), (60, 2, true), (1, 0, true)] {
        let mut refs = RefTable::default();
        let r = render(&notes("x", true), &mut refs, cap);
        let shown = r
            .text
            .lines()
            .filter(|l| !l.starts_with("[snapshot"))
            .count();
        assert_eq!(shown, kept, "cap {cap}: {}", r.text);
        assert_eq!(
            r.text.contains("[snapshot truncated:"),
            truncated,
            "cap {cap}"
        );
        // Refs past the cap still resolve (the model may have seen them earlier).
        assert_eq!(r.nodes.len(), 5);
    }
}

#[test]
fn empty_desktop_says_how_to_start() {
    let r = render(&[], &mut RefTable::default(), DEFAULT_SNAPSHOT_CAP);
    assert!(
        r.text.starts_with("Windows: (none: launch a program"),
        "{}",
        r.text
    );
}
