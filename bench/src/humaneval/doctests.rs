//! The docstring's own doctest examples, copied out of the prompt into a doctest file of their
//! own. Running them from there (`python3 -m doctest test_examples.txt`, with the file
//! protected) rather than from `solution.py` keeps the check honest when the model rewrites the
//! file: a `solution.py` whose docstring was dropped would pass `python3 -m doctest
//! solution.py` with no example run at all (seen in the first smoke run).

/// Lines of the prompt that start a doctest example (`>>> `).
pub fn doctest_count(prompt: &str) -> usize {
    prompt
        .lines()
        .filter(|l| l.trim_start().starts_with(">>>"))
        .count()
}

/// Leading whitespace (spaces and tabs) of a line, in bytes.
fn indent_of(line: &str) -> usize {
    line.len() - line.trim_start_matches([' ', '\t']).len()
}

/// Each example of the prompt's docstrings as doctest text, dedented: its `>>>` line, its
/// `...` continuations and its expected output (up to a blank line, the next `>>>`, a line
/// indented less than the `>>>`, or the docstring's closing quotes).
pub fn docstring_examples(prompt: &str) -> Vec<String> {
    let mut examples = Vec::new();
    let mut current: Option<(usize, Vec<String>)> = None;
    for line in prompt.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with(">>>") {
            if let Some((_, lines)) = current.take() {
                examples.push(lines.join("\n"));
            }
            current = Some((indent_of(line), vec![trimmed.trim_end().to_string()]));
            continue;
        }
        let Some((indent, lines)) = current.as_mut() else {
            continue;
        };
        let closing = trimmed.starts_with("\"\"\"") || trimmed.starts_with("'''");
        if trimmed.is_empty() || closing || indent_of(line) < *indent {
            if let Some((_, lines)) = current.take() {
                examples.push(lines.join("\n"));
            }
            continue;
        }
        let text = line[*indent..].trim_end();
        // Output that ends the docstring on the same line: `    True"""`.
        if let Some(before) = text
            .strip_suffix("\"\"\"")
            .or_else(|| text.strip_suffix("'''"))
        {
            if !before.trim().is_empty() {
                lines.push(before.trim_end().to_string());
            }
            if let Some((_, lines)) = current.take() {
                examples.push(lines.join("\n"));
            }
            continue;
        }
        lines.push(text.to_string());
    }
    if let Some((_, lines)) = current {
        examples.push(lines.join("\n"));
    }
    examples
}

/// A doctest file that imports `solution` and runs `examples` (doctest text, one example each).
pub fn doctest_file(heading: &str, examples: &[String]) -> String {
    let mut out = format!(
        "{heading}\nRun: python3 -m doctest test_examples.txt\n\n>>> from solution import *\n"
    );
    for example in examples {
        out.push('\n');
        out.push_str(example);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn examples_are_cut_out_and_dedented() {
        let cases: &[(&str, &[&str])] = &[
            (
                "def f(xs):\n    \"\"\" Doc.\n    >>> f([3, 1])\n    [1, 4]\n    >>> f([1])\n    []\n    \"\"\"\n",
                &[">>> f([3, 1])\n[1, 4]", ">>> f([1])\n[]"],
            ),
            // A blank line ends the output; continuation lines stay with their example.
            (
                "def g():\n    \"\"\"\n    >>> for i in g():\n    ...     print(i)\n    1\n\n    More prose.\n    \"\"\"\n",
                &[">>> for i in g():\n...     print(i)\n1"],
            ),
            // Output closing the docstring on its line; a statement with no output.
            (
                "def h():\n    '''\n    >>> x = h()\n    >>> x\n    True'''\n",
                &[">>> x = h()", ">>> x\nTrue"],
            ),
            // Two functions, two docstrings; less indentation ends an example.
            (
                "def a():\n    \"\"\"\n    >>> a()\n    1\n\"\"\"\ndef b():\n  \"\"\"\n  >>> b()\n  2\n  \"\"\"\n",
                &[">>> a()\n1", ">>> b()\n2"],
            ),
            ("def c():\n    \"\"\"No examples.\"\"\"\n", &[]),
        ];
        for (prompt, want) in cases {
            let got = docstring_examples(prompt);
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(got, want, "{prompt}");
        }
    }

    #[test]
    fn counted_and_written_as_a_file() {
        assert_eq!(doctest_count("  >>> f(1)\n  2\n>>>g()\nh()\n"), 2);
        assert_eq!(
            doctest_file("Head.", &[">>> f(1)\n2".into(), ">>> g()".into()]),
            "Head.\nRun: python3 -m doctest test_examples.txt\n\n>>> from solution import *\n\n>>> f(1)\n2\n\n>>> g()\n"
        );
    }
}
