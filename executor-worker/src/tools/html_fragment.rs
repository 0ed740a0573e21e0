//! A whole-file write over an HTML page (a file with `<html>` or `<body>`) with content that
//! has neither, a fragment such as one `<ul>` or the text `Items: 0`, would replace the page
//! with that fragment: the heading, the form and the script the page had are lost. Small models
//! send the part they mean to change as the whole file. Refused, with how to change one part.

use crate::tools::workspace::ToolError;

/// Whether `text` is a whole HTML page: it has an `<html` or a `<body` tag.
fn is_page(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    lower.contains("<html") || lower.contains("<body")
}

/// Refuse a write of `content` over the HTML page `before` at `rel` when the content is a
/// fragment; anything else (another kind of file, a new file, an old text that is itself a
/// fragment, a whole page) passes.
pub(crate) fn refuse_replacing_a_page(
    rel: &str,
    before: Option<&[u8]>,
    content: &str,
) -> Result<(), ToolError> {
    let lower = rel.to_ascii_lowercase();
    if !(lower.ends_with(".html") || lower.ends_with(".htm")) {
        return Ok(());
    }
    let Some(old) = before.and_then(|b| std::str::from_utf8(b).ok()) else {
        return Ok(());
    };
    if !is_page(old) || is_page(content) {
        return Ok(());
    }
    Err(ToolError::WouldReplacePage {
        path: rel.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_table() {
        let page = "<!doctype html><html><body><h1>Shop</h1><ul id=\"items\"></ul></body></html>";
        // (path, old text, content, refused)
        let cases: &[(&str, Option<&str>, &str, bool)] = &[
            ("index.html", Some(page), "Items: 0", true),
            (
                "index.html",
                Some(page),
                "<ul id=\"items\"></ul><p>Items: 0</p>",
                true,
            ),
            ("INDEX.HTM", Some(page), "<p>x</p>", true),
            (
                "index.html",
                Some(page),
                "<HTML><BODY><h1>Shop</h1></BODY></HTML>",
                false,
            ),
            (
                "index.html",
                Some(page),
                "<body><h1>Shop</h1></body>",
                false,
            ),
            ("index.html", None, "<p>a fragment, a new file</p>", false),
            (
                "part.html",
                Some("<p>old fragment</p>"),
                "<p>new fragment</p>",
                false,
            ),
            ("page.txt", Some(page), "Items: 0", false),
        ];
        for (path, old, content, refused) in cases {
            let got = refuse_replacing_a_page(path, old.map(str::as_bytes), content);
            assert_eq!(
                matches!(got, Err(ToolError::WouldReplacePage { .. })),
                *refused,
                "{path}: {content:?} -> {got:?}"
            );
        }
    }
}
