//! A whole-file write whose content came wrapped in a Markdown code fence (a first line
//! "```html", a last line "```"), as small models answer in chat: the fence lines are not the
//! file's text. `write_file` writes what is inside and says so. Markdown and plain-text files
//! keep their content as sent (a fence can be their text).

/// Extensions whose content may be a fenced block on purpose.
const FENCE_IS_TEXT: &[&str] = &[".md", ".markdown", ".rst", ".txt"];

/// The text inside a fence that wraps all of `content` (nothing outside it but blank lines, one
/// fence line each end, the opening one with at most an info word such as `html`), for a file
/// at `rel` whose content is not Markdown or plain text; `None` otherwise.
pub(crate) fn unfenced(rel: &str, content: &str) -> Option<String> {
    let lower = rel.to_ascii_lowercase();
    if FENCE_IS_TEXT.iter().any(|ext| lower.ends_with(ext)) {
        return None;
    }
    let lines: Vec<&str> = content.trim().lines().collect();
    let (first, rest) = lines.split_first()?;
    let (last, inner) = rest.split_last()?;
    let info = first.trim().strip_prefix("```")?;
    let info_is_a_word = info
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.' | '_'));
    if !info_is_a_word || last.trim() != "```" {
        return None;
    }
    if inner
        .iter()
        .any(|line| line.trim_start().starts_with("```"))
    {
        return None;
    }
    let mut text = inner.join("\n");
    text.push('\n');
    Some(text)
}

/// What `write_file` adds to its result when it left the fence out.
pub(crate) const UNFENCED_NOTE: &str = " (the content came inside a ``` code fence; the fence \
     lines were left out of the file: send a file's text alone)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_table() {
        // (path, content, the text written when the fence is left out)
        let cases: &[(&str, &str, Option<&str>)] = &[
            (
                "index.html",
                "```html\n<h1>x</h1>\n```",
                Some("<h1>x</h1>\n"),
            ),
            (
                "index.html",
                "```\n<h1>x</h1>\n<p>y</p>\n```\n",
                Some("<h1>x</h1>\n<p>y</p>\n"),
            ),
            ("a.py", "\n```python\nprint(1)\n```\n\n", Some("print(1)\n")),
            ("a.c++", "```c++\nint x;\n```", Some("int x;\n")),
            ("index.html", "<h1>x</h1>", None),
            ("index.html", "```html\n<h1>x</h1>", None),
            ("index.html", "intro\n```html\n<h1>x</h1>\n```", None),
            ("index.html", "```html\n<h1>x</h1>\n```\nmore", None),
            ("index.html", "```html lang\n<h1>x</h1>\n```", None),
            ("index.html", "```html\na\n```\n```html\nb\n```", None),
            ("README.md", "```sh\nmake\n```", None),
            ("notes.TXT", "```\nx\n```", None),
            ("index.html", "```\n```", Some("\n")),
        ];
        for (path, content, want) in cases {
            assert_eq!(
                unfenced(path, content).as_deref(),
                *want,
                "{path}: {content:?}"
            );
        }
    }
}
