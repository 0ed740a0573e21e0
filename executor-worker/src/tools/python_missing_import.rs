//! A Python file that uses a standard-library module it never imports. `write_file` keeps the
//! definitions and imports a whole-file write leaves out, so small models write a file as the
//! fragment they are changing (`import re` and a `strip_accents` that calls
//! `unicodedata.normalize`) and the import the fragment needs is in neither the old file nor
//! the new text: every call then fails with `NameError: name 'unicodedata' is not defined`.
//! `write_file` and `edit_file` add `import <module>` for a module of [`STANDARD_MODULES`] the
//! file uses as `module.name` in its code (not in a string or a comment) and binds nowhere at
//! the top level, and say so.
//!
//! An added import cannot break a program that would have run: the module is the standard
//! library's, and a later binding of the same name (a function, an assignment, another
//! import) still replaces it where it did before. A file with a `*` import, or one the
//! scanner cannot cut into statements, is written as given.

use crate::tools::kept_definitions::{bound_names, import_line};

/// Standard-library modules a small model uses by their own name (`re.findall`,
/// `json.dumps`) and forgets to import.
const STANDARD_MODULES: [&str; 32] = [
    "argparse",
    "bisect",
    "collections",
    "copy",
    "csv",
    "datetime",
    "decimal",
    "fractions",
    "functools",
    "glob",
    "hashlib",
    "heapq",
    "html",
    "io",
    "itertools",
    "json",
    "math",
    "operator",
    "os",
    "pathlib",
    "random",
    "re",
    "shutil",
    "statistics",
    "string",
    "subprocess",
    "sys",
    "textwrap",
    "time",
    "typing",
    "unicodedata",
    "urllib",
];

/// A text with the imports it lacked added.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AddedImports {
    pub(crate) text: String,
    /// The modules imported, in the order the text first uses them.
    pub(crate) modules: Vec<String>,
}

/// `text` (the Python file `rel`) with `import <module>` added for each module of
/// [`STANDARD_MODULES`] it uses as `module.name` and binds nowhere at the top level; None
/// when it lacks none.
pub(crate) fn add_missing_imports(rel: &str, text: &str) -> Option<AddedImports> {
    if !rel.ends_with(".py") {
        return None;
    }
    let bound = bound_names(text)?;
    if bound.iter().any(|n| n.ends_with(" *")) {
        return None;
    }
    let mut modules: Vec<String> = Vec::new();
    for base in attribute_bases(text) {
        if STANDARD_MODULES.contains(&base.as_str())
            && !bound.contains(&base)
            && !modules.contains(&base)
        {
            modules.push(base);
        }
    }
    if modules.is_empty() {
        return None;
    }
    let (at, before_an_import) = import_line(text)?;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut out = String::with_capacity(text.len() + 16 * modules.len());
    for (no, line) in lines.iter().enumerate() {
        if no == at {
            push_imports(&mut out, &modules, before_an_import);
        }
        out.push_str(line);
    }
    if at >= lines.len() {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        push_imports(&mut out, &modules, true);
    }
    Some(AddedImports { text: out, modules })
}

fn push_imports(out: &mut String, modules: &[String], before_an_import: bool) {
    for module in modules {
        out.push_str(&format!("import {module}\n"));
    }
    if !before_an_import {
        out.push('\n');
    }
}

/// What a write or an edit that added imports adds to its result.
pub(crate) fn added_imports_note(rel: &str, added: &AddedImports) -> String {
    let imports = added
        .modules
        .iter()
        .map(|m| format!("`import {m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        " (added {imports}: {rel} uses the module{} and did not import {}; a file needs \
         its own imports even where write_file keeps the rest)",
        if added.modules.len() == 1 { "" } else { "s" },
        if added.modules.len() == 1 {
            "it"
        } else {
            "them"
        },
    )
}

/// The names code uses as the base of an attribute (`re` in `re.findall(...)`), in order,
/// outside strings and comments; `x.re.findall` counts only `x`.
fn attribute_bases(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut after_dot = false;
    while i < chars.len() {
        let c = chars[i];
        if c == '#' {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '\'' || c == '"' {
            i = past_string(&chars, i);
            after_dot = false;
            continue;
        }
        if c.is_ascii_digit() {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '.') {
                i += 1;
            }
            after_dot = false;
            continue;
        }
        if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let mut next = i;
            while next < chars.len() && chars[next] == ' ' {
                next += 1;
            }
            if !after_dot && chars.get(next) == Some(&'.') {
                out.push(chars[start..i].iter().collect());
            }
            after_dot = false;
            continue;
        }
        if !c.is_whitespace() {
            after_dot = c == '.';
        }
        i += 1;
    }
    out
}

/// Where the string literal opening at `i` ends (one past its closing quote, or the end of
/// its line for a one-line literal left open).
fn past_string(chars: &[char], i: usize) -> usize {
    let q = chars[i];
    let triple = chars.get(i + 1) == Some(&q) && chars.get(i + 2) == Some(&q);
    let mut j = if triple { i + 3 } else { i + 1 };
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 2,
            c if c == q && !triple => return j + 1,
            c if c == q && chars.get(j + 1) == Some(&q) && chars.get(j + 2) == Some(&q) => {
                return j + 3;
            }
            '\n' if !triple => return j,
            _ => j += 1,
        }
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::tools::workspace::Workspace;

    #[test]
    fn a_used_standard_module_is_imported_where_the_file_lacks_it() {
        // (path, text as sent, text written: None when nothing is added)
        let cases: [(&str, &str, Option<&str>); 11] = [
            (
                "textkit.py",
                "import re\n\ndef strip_accents(s):\n    return unicodedata.normalize('NFKD', s)\n",
                Some("import unicodedata\nimport re\n\ndef strip_accents(s):\n    return unicodedata.normalize('NFKD', s)\n"),
            ),
            (
                "textkit.py",
                "def words(s):\n    return re.findall('[a-z]+', s)\n",
                Some("import re\n\ndef words(s):\n    return re.findall('[a-z]+', s)\n"),
            ),
            (
                "doc.py",
                "\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\n\nX = json.dumps(1)\n",
                Some("\"\"\"Doc.\"\"\"\nfrom __future__ import annotations\n\nimport json\n\nX = json.dumps(1)\n"),
            ),
            (
                "script.py",
                "#!/usr/bin/env python3\nprint(sys.argv)",
                Some("#!/usr/bin/env python3\nimport sys\n\nprint(sys.argv)"),
            ),
            ("ok.py", "import re\nx = re.compile('a')\n", None),
            ("alias.py", "import json as j\ndef f(json):\n    return json.x\n", Some("import json\nimport json as j\ndef f(json):\n    return json.x\n")),
            ("bound.py", "from os import path as os\nos.join('a')\n", None),
            ("strings.py", "# re.findall\nx = 'json.dumps'\ny = \"\"\"\nsys.exit\n\"\"\"\n", None),
            ("attr.py", "import x\nx.re.findall('a')\nv = 1.5\n", None),
            ("star.py", "from helpers import *\nre.findall('a', 'b')\n", None),
            ("notes.txt", "re.findall", None),
        ];
        for (path, text, want) in cases {
            let got = add_missing_imports(path, text);
            assert_eq!(
                got.as_ref().map(|a| a.text.as_str()),
                want,
                "{path}:\n{text}"
            );
        }
    }

    /// A 1.5B executor on `textkit-lib` wrote `import re` and a `strip_accents` that calls
    /// `unicodedata.normalize` as the whole of `textkit.py`; every check of the clause failed
    /// with a `NameError` until the self-check's second refusal.
    #[test]
    fn a_fragment_written_without_its_import_gets_it() {
        let dir = tempfile::tempdir().unwrap();
        let ws = Workspace::new(dir.path()).unwrap();
        let sent = "import re\n\ndef strip_accents(s):\n    return ''.join(c for c in unicodedata.normalize('NFKD', s) if not unicodedata.combining(c))\n\ndef slugify(s):\n    return '-'.join(re.findall('[a-z0-9]+', strip_accents(s).lower()))";
        let result = ws.write_file("textkit.py", sent).unwrap();
        assert!(
            result.contains("(added `import unicodedata`: textkit.py uses the module"),
            "{result}"
        );
        let written = std::fs::read_to_string(dir.path().join("textkit.py")).unwrap();
        assert!(
            written.starts_with("import unicodedata\nimport re\n"),
            "{written}"
        );
        let result = ws
            .edit_file("textkit.py", "import unicodedata\n", "")
            .unwrap();
        assert!(result.contains("added `import unicodedata`"), "{result}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("textkit.py")).unwrap(),
            written
        );
    }
}
