use super::keep_dropped_definitions;

const LEDGER: &str = r#""""ledger.py: an expense ledger."""
import csv
import sys


def load(path):
    """The rows."""
    raise NotImplementedError("load")


COMMANDS = {}


def main(argv):
    path, command, args = argv[1], argv[2], argv[3:]
    rows = load(path)
    return COMMANDS[command](path, rows, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
"#;

const LEDGER_LOAD_ONLY: &str = "def load(path):\n    rows = []\n    with open(path) as f:\n        for row in csv.DictReader(f):\n            row['amount'] = int(row['amount'])\n            rows.append(row)\n    return rows\n";

const LEDGER_MERGED: &str = r#"import csv
import sys
def load(path):
    rows = []
    with open(path) as f:
        for row in csv.DictReader(f):
            row['amount'] = int(row['amount'])
            rows.append(row)
    return rows

COMMANDS = {}

def main(argv):
    path, command, args = argv[1], argv[2], argv[3:]
    rows = load(path)
    return COMMANDS[command](path, rows, args)

if __name__ == "__main__":
    sys.exit(main(sys.argv) or 0)
"#;

const LIB: &str = "import unicodedata\n\n\ndef strip_accents(s):\n    return s\n\n\ndef slugify(s):\n    return s.lower()\n";

#[test]
fn whole_file_writes_keep_what_they_drop() {
    struct Case {
        name: &'static str,
        old: &'static str,
        new: &'static str,
        /// None: written as given.
        want: Option<(&'static str, &'static [&'static str])>,
    }
    let cases = [
        Case {
            name: "one function over a skeleton keeps its imports, registry, main and entry point",
            old: LEDGER,
            new: LEDGER_LOAD_ONLY,
            want: Some((
                LEDGER_MERGED,
                &[
                    "`csv`",
                    "`sys`",
                    "`COMMANDS`",
                    "`main`",
                    "the `if __name__ == \"__main__\":` block",
                ],
            )),
        },
        Case {
            name: "a new function over a library keeps the earlier ones after it",
            old: LIB,
            new: "def words(s):\n    return s.split()\n",
            want: Some((
                "import unicodedata\ndef words(s):\n    return s.split()\n\ndef strip_accents(s):\n    return s\n\ndef slugify(s):\n    return s.lower()\n",
                &["`unicodedata`", "`strip_accents`", "`slugify`"],
            )),
        },
        Case {
            name: "a kept definition goes back before the next one the write replaced",
            old: "def a():\n    return 1\n\n\ndef b():\n    return 2\n",
            new: "def b():\n    return 3\n",
            want: Some((
                "def a():\n    return 1\n\ndef b():\n    return 3\n",
                &["`a`"],
            )),
        },
        Case {
            name: "a rewrite that keeps every name is written as given",
            old: LIB,
            new: "import unicodedata\ndef strip_accents(s):\n    return 'x'\ndef slugify(s):\n    return ''\n",
            want: None,
        },
        Case {
            name: "a name moved to another module and imported from it is not kept",
            old: "import sys\n\ndef load(p):\n    return []\n\ndef total(rows):\n    return 0\n",
            new: "import sys\nfrom salesdata import load\n\ndef total(rows):\n    return sum(rows)\n",
            want: None,
        },
        Case {
            name: "an import of names the file defined moves them out and keeps the rest",
            old: "\"\"\"report.\"\"\"\nimport sys\n\n\ndef load(p):\n    return []\n\n\ndef revenue(r):\n    return 1\n\n\ndef total(rows):\n    return 0\n",
            new: "from salesdata import load, revenue\n",
            want: Some((
                "from salesdata import load, revenue\nimport sys\n\ndef total(rows):\n    return 0\n",
                &["`sys`", "`total`"],
            )),
        },
        Case {
            name: "an import of names the file did not define is written as given",
            old: LIB,
            new: "import os\n",
            want: None,
        },
        Case {
            name: "a write with no function (data, or emptied) is written as given",
            old: LIB,
            new: "X = 1\n",
            want: None,
        },
        Case {
            name: "an old file with no function is replaced",
            old: "# nothing yet\n",
            new: "def f():\n    pass\n",
            want: None,
        },
        Case {
            name: "an unterminated string in the old file: written as given",
            old: "def f():\n    return '''open\n",
            new: "def g():\n    pass\n",
            want: None,
        },
        Case {
            name: "decorators, multi-line calls and strings stay with their block",
            old: "import functools\n\n@functools.cache\ndef f(\n    x,\n):\n    s = \"\"\"\ndef not_a_def():\n\"\"\"\n    return x\n\ntry:\n    import json\nexcept ImportError:\n    json = None\n",
            new: "def g():\n    return 1\n",
            want: Some((
                "import functools\ndef g():\n    return 1\n\n@functools.cache\ndef f(\n    x,\n):\n    s = \"\"\"\ndef not_a_def():\n\"\"\"\n    return x\n",
                &["`functools`", "`f`"],
            )),
        },
    ];
    for case in cases {
        let got = keep_dropped_definitions(case.old, case.new);
        match case.want {
            None => assert_eq!(got, None, "{}", case.name),
            Some((text, kept)) => {
                let got = got.unwrap_or_else(|| panic!("{}: nothing kept", case.name));
                assert_eq!(got.text, text, "{}", case.name);
                assert_eq!(got.kept, kept, "{}", case.name);
            }
        }
    }
}
