//! What `write_file` and `edit_file` do with a Python file that `python_literals` can mend:
//! the mended text, and the note their result adds so the model learns what changed.

use crate::tools::python_literals::{mend_python_source, Mended};

/// A Python file's text with what Python rejects outright mended (line breaks inside one-line
/// literals, `\n` escaped twice outside them, NUL characters inside them, a compound statement
/// after `;` or `:`, a short literal's dropped quote: see `python_literals`); None for other files, or when there is nothing.
pub(crate) fn mend_python(rel: &str, text: &str) -> Option<Mended> {
    rel.ends_with(".py")
        .then(|| mend_python_source(text))
        .flatten()
}

/// What a write or an edit that mended a Python file adds to its result.
pub(crate) fn mended_note(m: &Mended) -> String {
    let listed = |lines: &[usize]| {
        lines
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut notes = Vec::new();
    if !m.lines.is_empty() {
        notes.push(format!(
            "line {}: a line break inside a one-line string literal, which Python rejects, was \
             written as the escape \\n; in a JSON argument, write \\\\n for a backslash-n in the code",
            listed(&m.lines)
        ));
    }
    if !m.escaped_breaks.is_empty() {
        notes.push(format!(
            "line {} as sent: the two characters \\n stood outside any string literal, where \
             Python allows no backslash, and were written as line breaks; in a JSON argument, a \
             line break is \\n, not \\\\n",
            listed(&m.escaped_breaks)
        ));
    }
    if !m.nul_chars.is_empty() {
        notes.push(format!(
            "line {} as sent: a NUL character inside a string literal, which Python \
             rejects, was written as the escape \\x00",
            listed(&m.nul_chars)
        ));
    }
    if !m.compound_lines.is_empty() {
        notes.push(format!(
            "line {} as sent: a `with`, `for`, `if`, `while`, `def`, `class` or `try` after `;` \
             or after another statement's `:` on the same line, which Python rejects, was put \
             on a line of its own",
            listed(&m.compound_lines)
        ));
    }
    if !m.dropped_quotes.is_empty() {
        notes.push(format!(
            "line {} as sent: a short string literal that did not close on its line, which \
             Python rejects, got back the quote it had lost (`\".join(` as `\"\".join(`, \
             `split(',` as `split(',')`); check that it says what you meant",
            listed(&m.dropped_quotes)
        ));
    }
    format!(" ({})", notes.join("; "))
}
