//! The one template mechanism of every prompt: a `.md` file beside the code that owns the text,
//! read in with `include_str!`, its `{name}` placeholders filled in one pass.

/// A template file's text without the line break that ends the file (a `const fn`, so a
/// template can be a constant).
pub const fn text(template: &'static str) -> &'static str {
    match template.as_bytes() {
        [rest @ .., b'\n'] => match std::str::from_utf8(rest) {
            Ok(rest) => rest,
            Err(_) => template,
        },
        _ => template,
    }
}

/// `template` with each `{name}` that `values` names replaced by its value; a brace that names
/// no value is kept as written (a JSON shape in a prompt is full of them). One pass: a value is
/// never read for placeholders itself (a goal may well contain `{goal}`).
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let named = after.find('}').and_then(|close| {
            let name = &after[..close];
            let value = values.iter().find(|(n, _)| *n == name)?.1;
            Some((close, value))
        });
        match named {
            Some((close, value)) => {
                out.push_str(value);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (template, values, filled)
    type Case = (
        &'static str,
        &'static [(&'static str, &'static str)],
        &'static str,
    );

    #[test]
    fn fill_table() {
        let cases: [Case; 10] = [
            ("a {x} b", &[("x", "1")], "a 1 b"),
            ("{x}{y}{x}", &[("x", "1"), ("y", "2")], "121"),
            // A value's braces stay as they are.
            ("{x}{y}", &[("x", "1"), ("y", "{x}")], "1{x}"),
            ("{x} {y}", &[("x", "{y}"), ("y", "2")], "{y} 2"),
            // Braces that are no placeholder stay.
            ("{unknown} {x}", &[("x", "1")], "{unknown} 1"),
            ("{ {x} }", &[("x", "1")], "{ 1 }"),
            ("{\"scores\": {{x}}}", &[("x", "1")], "{\"scores\": {1}}"),
            ("{ {z} {x", &[("x", "1")], "{ {z} {x"),
            ("no end {x", &[("x", "1")], "no end {x"),
            ("", &[], ""),
        ];
        for (template, values, want) in cases {
            assert_eq!(fill(template, values), want, "{template:?}");
        }
    }

    #[test]
    fn the_files_final_newline_is_not_the_texts() {
        assert_eq!(text("a\nb\n"), "a\nb");
        assert_eq!(text("a"), "a");
        assert_eq!(text(""), "");
    }
}
