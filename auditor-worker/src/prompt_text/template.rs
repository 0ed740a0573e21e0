//! The prompts' templates are `.md` files beside the module that fills them, read in with
//! `include_str!`; their `{name}` placeholders are filled in one pass.

/// `template` with each `{name}` that `values` names replaced by its value; a brace that names
/// no value is kept as written (the rubric's JSON shape is full of them). One pass: a value is
/// never read for placeholders itself (a goal may well contain `{goal}`).
pub(crate) fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let value = after.find('}').and_then(|close| {
            let name = &after[..close];
            let value = values.iter().find(|(n, _)| *n == name)?.1;
            Some((close, value))
        });
        match value {
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

/// A template file's text without the newline that ends the file, for texts that end without
/// one.
pub(crate) fn without_final_newline(file: &str) -> &str {
    file.strip_suffix('\n').unwrap_or(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_filled_once_and_other_braces_kept() {
        let cases = [
            ("a {x} b", "a 1 b"),
            ("{x}{y}", "1{x}"),
            ("{unknown} {x}", "{unknown} 1"),
            ("{\"scores\": {{x}}}", "{\"scores\": {1}}"),
            ("no end {x", "no end {x"),
            ("", ""),
        ];
        for (template, want) in cases {
            assert_eq!(
                fill(template, &[("x", "1"), ("y", "{x}")]),
                want,
                "{template:?}"
            );
        }
    }

    #[test]
    fn the_files_final_newline_can_be_left_out() {
        assert_eq!(without_final_newline("a\nb\n"), "a\nb");
        assert_eq!(without_final_newline("a"), "a");
    }
}
