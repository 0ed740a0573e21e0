//! A Python module that imports from itself. Small models write `from textkit import words`
//! at the top of `textkit.py` itself, meaning "use my other function": every import of the
//! module then fails (`ImportError: cannot import name ... from partially initialized module
//! ... (most likely due to a circular import)`), so every check of every clause fails with it.
//! Inside its own module a function is used by its name, with no import, so `write_file` and
//! `edit_file` leave such a statement out and say so, naming what the file does not define.
//!
//! Only statements at the top level count (an import inside a function runs after the module
//! has loaded), and only for the module's own import name: a file at the workspace root by its
//! stem (`from textkit import` in `textkit.py`), a file further down by its dotted path
//! (`from pkg.mod import` in `pkg/mod.py`). `pkg/json.py`'s `from json import loads` is the
//! standard library's `json` and is kept.

use crate::tools::kept_definitions::{bound_names, from_imports};

/// A text with its imports from itself left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SelfImports {
    pub(crate) text: String,
    /// Each statement left out, as sent, with its 1-based first line.
    pub(crate) dropped: Vec<(usize, String)>,
    /// The names those statements imported.
    pub(crate) names: Vec<String>,
}

/// The name the file `rel` is imported by from the workspace root (`textkit`, `pkg.mod`);
/// None for other files and for package or dunder files (`pkg/__init__.py`).
fn own_module(rel: &str) -> Option<String> {
    let rel = rel.trim_start_matches("./");
    let stem = rel.strip_suffix(".py")?;
    let parts: Vec<&str> = stem.split('/').collect();
    let is_identifier = |p: &&str| {
        !p.is_empty()
            && !p.starts_with(|c: char| c.is_ascii_digit())
            && p.chars().all(|c| c.is_alphanumeric() || c == '_')
    };
    let name = parts.last()?;
    if name.starts_with("__") || !parts.iter().all(is_identifier) {
        return None;
    }
    Some(parts.join("."))
}

/// `text` (the Python file `rel`) without its top-level `from <itself> import ...`
/// statements; None when it has none, or when it cannot be cut into statements.
pub(crate) fn drop_self_imports(rel: &str, text: &str) -> Option<SelfImports> {
    let module = own_module(rel)?;
    let imports = from_imports(text)?;
    let own: Vec<_> = imports.into_iter().filter(|i| i.module == module).collect();
    if own.is_empty() {
        return None;
    }
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut kept = String::with_capacity(text.len());
    let mut dropped = Vec::new();
    let mut names = Vec::new();
    let mut next = own.iter().peekable();
    let mut no = 0;
    while no < lines.len() {
        if let Some(import) = next.next_if(|i| i.first == no) {
            let statement: String = lines[import.first..import.end].concat();
            dropped.push((import.first + 1, statement.trim_end().to_string()));
            names.extend(import.names.iter().cloned());
            no = import.end;
            continue;
        }
        kept.push_str(lines[no]);
        no += 1;
    }
    Some(SelfImports {
        text: kept,
        dropped,
        names,
    })
}

/// What a write or an edit that left out imports from the file itself adds to its result;
/// `written` is the file's text as written, to name what it does not define.
pub(crate) fn self_import_note(rel: &str, s: &SelfImports, written: &str) -> String {
    let statements = s
        .dropped
        .iter()
        .map(|(line, statement)| format!("line {line} `{}`", statement.replace('\n', " ")))
        .collect::<Vec<_>>()
        .join(", ");
    let mut note = format!(
        " (left out {statements}: {rel} imported from itself, which fails whenever the \
         module is imported (a circular import); in its own module a function is called by its \
         name, with no import"
    );
    let bound = bound_names(written).unwrap_or_default();
    let missing: Vec<String> = s
        .names
        .iter()
        .filter(|n| !n.contains(' ') && !bound.contains(n))
        .map(|n| format!("`{n}`"))
        .collect();
    if !missing.is_empty() {
        note.push_str(&format!(
            "; {rel} does not define {}: define it in {rel}",
            missing.join(", ")
        ));
    }
    note.push(')');
    note
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::tools::workspace::Workspace;

    #[test]
    fn a_module_loses_only_its_top_level_imports_from_itself() {
        let textkit = "from collections import Counter\nfrom textkit import strip_accents\nfrom textkit import words\n\ndef word_counts(s):\n    return dict(Counter(words(s)))\n";
        let parenthesized =
            "import re\nfrom textkit import (\n    slugify,\n    words,\n)\n\ndef f():\n    return 1\n";
        let inside_a_function =
            "def f():\n    from textkit import g\n    return g()\n\ndef g():\n    return 1\n";
        let in_a_docstring =
            "\"\"\"Usage:\nfrom textkit import slugify\n\"\"\"\n\ndef slugify(s):\n    return s\n";
        let std_json = "from json import loads\n\ndef parse(s):\n    return loads(s)\n";
        let dotted = "from pkg.mod import helper\nfrom pkg.other import thing\n\ndef helper():\n    return thing\n";
        // (path, text as sent, text written: None when nothing is left out, lines left out)
        type Want<'a> = Option<(&'a str, Vec<usize>)>;
        let cases: [(&str, &str, Want); 9] = [
            (
                "textkit.py",
                textkit,
                Some((
                    "from collections import Counter\n\ndef word_counts(s):\n    return dict(Counter(words(s)))\n",
                    vec![2, 3],
                )),
            ),
            (
                "./textkit.py",
                textkit,
                Some((
                    "from collections import Counter\n\ndef word_counts(s):\n    return dict(Counter(words(s)))\n",
                    vec![2, 3],
                )),
            ),
            (
                "textkit.py",
                parenthesized,
                Some(("import re\n\ndef f():\n    return 1\n", vec![2])),
            ),
            ("other.py", textkit, None),
            ("textkit.py", inside_a_function, None),
            ("textkit.py", in_a_docstring, None),
            ("pkg/json.py", std_json, None),
            (
                "pkg/mod.py",
                dotted,
                Some((
                    "from pkg.other import thing\n\ndef helper():\n    return thing\n",
                    vec![1],
                )),
            ),
            ("pkg/__init__.py", "from pkg import mod\n", None),
        ];
        for (path, text, want) in cases {
            let got = drop_self_imports(path, text);
            let got = got
                .as_ref()
                .map(|s| (s.text.as_str(), s.dropped.iter().map(|d| d.0).collect()));
            assert_eq!(got, want, "{path}:\n{text}");
        }
    }

    #[test]
    fn the_note_names_the_statements_and_what_the_file_does_not_define() {
        let sent = "from textkit import strip_accents, words\n\ndef word_counts(s):\n    return len(words(s))\n";
        let dropped = drop_self_imports("textkit.py", sent);
        let Some(dropped) = dropped else {
            panic!("nothing left out of {sent}");
        };
        let written = format!("{}\ndef strip_accents(s):\n    return s\n", dropped.text);
        let note = self_import_note("textkit.py", &dropped, &written);
        assert!(
            note.contains("left out line 1 `from textkit import strip_accents, words`"),
            "{note}"
        );
        assert!(note.contains("a circular import"), "{note}");
        assert!(
            note.contains("textkit.py does not define `words`: define it in textkit.py"),
            "{note}"
        );
        assert!(!note.contains("`strip_accents`:"), "{note}");
    }

    /// A 1.5B executor on `textkit-lib`, asked for `word_counts`, wrote `textkit.py` as
    /// `from textkit import strip_accents` / `from textkit import words` over the file that defined
    /// `strip_accents`: every check then failed on the circular import, and the merge took the
    /// import for a new `strip_accents` and dropped the definition. The self-imports are left out
    /// before the merge, so the definition is kept and the module imports.
    #[test]
    fn a_python_module_does_not_import_from_itself() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let before = "import re\nimport unicodedata\n\n\ndef strip_accents(s):\n    return ''.join(c for c in unicodedata.normalize('NFKD', s) if not unicodedata.combining(c))\n\n\ndef slugify(s):\n    return '-'.join(re.findall('[a-z0-9]+', strip_accents(s).lower()))\n";
        ws.write_file("textkit.py", before).unwrap();
        let sent = "from collections import Counter\nfrom textkit import strip_accents\nfrom textkit import words\n\ndef word_counts(s):\n    return dict(Counter(words(s)))\n";
        let result = ws.write_file("textkit.py", sent).unwrap();
        let written = std::fs::read_to_string(ws.root().join("textkit.py")).unwrap();
        assert!(!written.contains("from textkit"), "{written}");
        for kept in [
            "def strip_accents(s):",
            "def slugify(s):",
            "def word_counts(s):",
        ] {
            assert!(written.contains(kept), "{kept} missing from:\n{written}");
        }
        assert!(
            result.contains("left out line 2 `from textkit import strip_accents`, line 3 `from textkit import words`"),
            "{result}"
        );
        assert!(
            result.contains("does not define `words`: define it in textkit.py"),
            "{result}"
        );
        let result = ws
            .edit_file(
                "textkit.py",
                "import re\n",
                "import re\nfrom textkit import slugify\n",
            )
            .unwrap();
        assert!(result.contains("a circular import"), "{result}");
        assert_eq!(
            std::fs::read_to_string(ws.root().join("textkit.py")).unwrap(),
            written,
            "an edit that only adds a self-import changes nothing"
        );
    }
}
