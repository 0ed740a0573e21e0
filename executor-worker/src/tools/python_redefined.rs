//! A write that leaves a Python file defining one top-level function or class twice. Small
//! models paste a second `def main(argv):` under the first (a 1.5B executor wrote one whose
//! body calls `main` again, which recursed on every command the checks ran) or add a new
//! version of a function above the old one: the file parses, and the earlier definition is
//! silently dead. `write_file` and `edit_file` refuse to make such a file (one that already
//! was one may still be changed, so the model can mend it), and say which lines.

use crate::tools::kept_definitions::defined_twice;
use crate::tools::workspace::ToolError;

/// Err when the Python file `rel` would define a top-level function or class twice after
/// this write of `after` over `before` (None: a new file), and did not before.
pub(crate) fn refuse_a_second_definition(
    rel: &str,
    before: Option<&[u8]>,
    after: &str,
) -> Result<(), ToolError> {
    if !rel.ends_with(".py") {
        return Ok(());
    }
    let Some(twice) = defined_twice(after) else {
        return Ok(());
    };
    let was_already = before
        .and_then(|b| std::str::from_utf8(b).ok())
        .and_then(defined_twice)
        .is_some();
    if was_already {
        return Ok(());
    }
    Err(ToolError::WouldDefineTwice {
        path: rel.to_string(),
        name: twice.name,
        first: twice.first,
        again: twice.again,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TWO_MAINS: &str = "import sys\n\ndef main(argv):\n    return 0\n\ndef main(argv):\n    sys.exit(main(sys.argv) or 0)\n";

    #[test]
    fn a_second_definition_is_refused_only_where_it_is_new() {
        let one_main = "import sys\n\ndef main(argv):\n    return 0\n";
        let decorated = "from typing import overload\n\n@overload\ndef f(x: int) -> int: ...\n\n@overload\ndef f(x: str) -> str: ...\n\ndef f(x):\n    return x\n";
        let nested = "def f():\n    def g():\n        return 1\n    def g():\n        return 2\n    return g()\n";
        let classes = "class A:\n    pass\n\nclass A:\n    x = 1\n";
        // (path, before, after, refused: Some((name, first, again)))
        type Refused<'a> = Option<(&'a str, usize, usize)>;
        let cases: [(&str, Option<&str>, &str, Refused); 8] = [
            ("ledger.py", Some(one_main), TWO_MAINS, Some(("main", 3, 6))),
            ("new.py", None, TWO_MAINS, Some(("main", 3, 6))),
            ("ledger.py", Some(TWO_MAINS), TWO_MAINS, None),
            ("ledger.py", Some(one_main), one_main, None),
            ("notes.txt", None, TWO_MAINS, None),
            ("types.py", None, decorated, None),
            ("inner.py", None, nested, None),
            ("models.py", None, classes, Some(("A", 1, 4))),
        ];
        for (path, before, after, want) in cases {
            let got = refuse_a_second_definition(path, before.map(str::as_bytes), after);
            match (got, want) {
                (Ok(()), None) => {}
                (
                    Err(ToolError::WouldDefineTwice {
                        name, first, again, ..
                    }),
                    Some(want),
                ) => assert_eq!((name.as_str(), first, again), want, "{path}: {after}"),
                (got, want) => panic!("{path}: {after}\ngot {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn the_refusal_names_the_lines_and_what_to_send() {
        let err = refuse_a_second_definition("ledger.py", None, TWO_MAINS)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("defines `main` twice (lines 3 and 6)"),
            "{err}"
        );
        assert!(err.contains("Send it with one `main`"), "{err}");
    }
}
