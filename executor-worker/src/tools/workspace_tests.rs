#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::os::unix::fs::symlink;

use super::*;

fn workspace() -> (tempfile::TempDir, Workspace) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    (dir, ws)
}

#[test]
fn path_confinement_table() {
    let (_dir, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    fs::create_dir(ws.root().join("inner")).unwrap();
    symlink(outside.path(), ws.root().join("out")).unwrap();
    symlink(outside.path().join("secret"), ws.root().join("out_file")).unwrap();
    symlink("inner", ws.root().join("in_link")).unwrap();
    symlink(ws.root().join("missing"), ws.root().join("dangling")).unwrap();
    symlink("out", ws.root().join("chain")).unwrap();

    type Check = fn(&Result<PathBuf, ToolError>) -> bool;
    let cases: Vec<(&str, Check)> = vec![
        ("../x", |r| matches!(r, Err(ToolError::ParentComponent(_)))),
        ("/etc/passwd", |r| {
            matches!(r, Err(ToolError::AbsolutePath(_)))
        }),
        ("a/../../b", |r| {
            matches!(r, Err(ToolError::ParentComponent(_)))
        }),
        ("a/../b", |r| {
            matches!(r, Err(ToolError::ParentComponent(_)))
        }),
        ("out/x", |r| {
            matches!(r, Err(ToolError::EscapesWorkspace(_)))
        }),
        ("out", |r| matches!(r, Err(ToolError::EscapesWorkspace(_)))),
        ("out_file", |r| {
            matches!(r, Err(ToolError::DanglingSymlink(_)))
        }),
        ("chain/deep/file", |r| {
            matches!(r, Err(ToolError::EscapesWorkspace(_)))
        }),
        ("dangling", |r| {
            matches!(r, Err(ToolError::DanglingSymlink(_)))
        }),
        ("in_link/x.txt", |r| r.is_ok()),
        ("new/nested/dir/file.rs", |r| r.is_ok()),
        ("./src/lib.rs", |r| r.is_ok()),
        ("", |r| r.is_ok()),
        (".", |r| r.is_ok()),
    ];
    for (path, check) in cases {
        let result = ws.resolve(path);
        assert!(check(&result), "{path}: {result:?}");
        if let Ok(resolved) = result {
            assert!(resolved.starts_with(ws.root()), "{path} -> {resolved:?}");
        }
    }
}

#[test]
fn write_creates_parents_and_never_escapes() {
    let (_dir, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), ws.root().join("out")).unwrap();

    ws.write_file("a/b/c.txt", "hello").unwrap();
    assert_eq!(
        fs::read_to_string(ws.root().join("a/b/c.txt")).unwrap(),
        "hello"
    );
    assert_eq!(ws.read_file("a/b/c.txt", 1024).unwrap(), "hello");

    for hostile in ["../../etc/x", "/tmp/x", "out/x", "a/../../x"] {
        assert!(ws.write_file(hostile, "pwned").is_err(), "{hostile}");
    }
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(matches!(ws.write_file("", "x"), Err(ToolError::EmptyPath)));
    assert!(matches!(
        ws.write_file("a", "x"),
        Err(ToolError::IsDirectory(_))
    ));
    assert!(matches!(
        ws.write_file("a/b/c.txt/d", "x"),
        Err(ToolError::NotDirectory(_))
    ));
}

#[test]
fn edit_file_exact_replace_cases() {
    let (_dir, ws) = workspace();
    ws.write_file("f.py", "x = 1\ny = 2\nx = 1\n").unwrap();
    ws.write_file("g.py", "def f():\n    return 1\n").unwrap();

    type Check = fn(&Result<String, ToolError>) -> bool;
    let cases: Vec<(&str, &str, &str, Check, Option<&str>)> = vec![
        (
            "g.py",
            "return 1",
            "return 2",
            |r| r.is_ok(),
            Some("def f():\n    return 2\n"),
        ),
        (
            "g.py",
            "return 9",
            "x",
            |r| matches!(r, Err(ToolError::OldNotFound { .. })),
            None,
        ),
        (
            "f.py",
            "x = 1",
            "x = 3",
            |r| matches!(r, Err(ToolError::OldAmbiguous { count: 2, .. })),
            None,
        ),
        // An empty `old` appends `new` (on a line of its own), or creates the file.
        (
            "g.py",
            "",
            "def g():\n    return 2\n",
            |r| r.as_ref().is_ok_and(|t| t.contains("appended at the end")),
            Some("def f():\n    return 2\ndef g():\n    return 2\n"),
        ),
        (
            "h.py",
            " \n",
            "x = 1",
            |r| r.as_ref().is_ok_and(|t| t.contains("did not exist")),
            Some("x = 1"),
        ),
        (
            "missing.py",
            "a",
            "b",
            |r| matches!(r, Err(ToolError::NotFound(_))),
            None,
        ),
        (
            "../f.py",
            "a",
            "b",
            |r| matches!(r, Err(ToolError::ParentComponent(_))),
            None,
        ),
    ];
    for (path, old, new, check, expected) in cases {
        let result = ws.edit_file(path, old, new);
        assert!(check(&result), "{path} {old:?}: {result:?}");
        if let Some(expected) = expected {
            assert_eq!(fs::read_to_string(ws.root().join(path)).unwrap(), expected);
        }
    }
    // A failed edit leaves the file alone.
    assert_eq!(
        fs::read_to_string(ws.root().join("f.py")).unwrap(),
        "x = 1\ny = 2\nx = 1\n"
    );
}

#[test]
fn list_and_read_errors() {
    let (_dir, ws) = workspace();
    assert_eq!(ws.list_dir("").unwrap(), ". is empty");
    ws.write_file("src/main.rs", "fn main() {}").unwrap();
    ws.write_file("README.md", "hi").unwrap();
    symlink("README.md", ws.root().join("link")).unwrap();
    assert_eq!(ws.list_dir(".").unwrap(), "README.md\nlink@\nsrc/");
    assert_eq!(ws.list_dir("src").unwrap(), "main.rs");
    assert!(matches!(
        ws.list_dir("README.md"),
        Err(ToolError::NotDirectory(_))
    ));
    assert!(matches!(ws.list_dir("nope"), Err(ToolError::NotFound(_))));
    assert!(matches!(
        ws.read_file("src", 100),
        Err(ToolError::IsDirectory(_))
    ));
    assert!(matches!(
        ws.read_file("nope", 100),
        Err(ToolError::NotFound(_))
    ));
    fs::write(ws.root().join("bin"), [0xff, 0xfe, 0x00]).unwrap();
    assert!(matches!(
        ws.read_file("bin", 100),
        Err(ToolError::NotText(_))
    ));
    ws.write_file("big.txt", &"x".repeat(5000)).unwrap();
    assert!(ws
        .read_file("big.txt", 1000)
        .unwrap()
        .contains("bytes omitted"));
}

#[test]
fn write_results_name_the_path_written() {
    let (_dir, ws) = workspace();
    // (path given, path named in the result, the `workspace/` prefix dropped)
    let cases = [
        ("hello.py", "hello.py", false),
        ("./src//lib.rs", "src/lib.rs", false),
        ("workspace/app.py", "app.py", true),
        ("./workspace/src/x.py", "src/x.py", true),
    ];
    for (given, named, dropped) in cases {
        let result = ws.write_file(given, "x").unwrap();
        assert!(
            result.starts_with(&format!("wrote 1 bytes to {named}")),
            "{given}: {result}"
        );
        assert_eq!(result.contains("prefix was dropped"), dropped, "{result}");
        assert!(ws.root().join(named).is_file(), "{given}");
    }
    assert!(!ws.root().join("workspace").exists());
    assert_eq!(ws.read_file("workspace/app.py", 100).unwrap(), "x");
    // `workspace` alone names the root, not a file.
    for given in ["workspace", "./workspace/", " workspace"] {
        let err = ws.write_file(given, "x").unwrap_err();
        assert!(
            matches!(err, ToolError::WorkspaceRoot(_)),
            "{given}: {err:?}"
        );
    }
    // Once `workspace/` exists (the task has one), it is an ordinary directory.
    std::fs::create_dir(ws.root().join("workspace")).unwrap();
    let result = ws.write_file("workspace/other.py", "x").unwrap();
    assert!(!result.contains("prefix"), "{result}");
    assert!(ws.root().join("workspace/other.py").is_file());
}

#[test]
fn a_write_that_changes_nothing_says_so() {
    let (_dir, ws) = workspace();
    let first = ws.write_file("hello.py", "print(1)").unwrap();
    assert!(first.starts_with("wrote 8 bytes to hello.py"), "{first}");
    let again = ws.write_file("hello.py", "print(1)").unwrap();
    assert!(again.contains("nothing changed"), "{again}");
    assert!(again.contains("call finish"), "{again}");
    let changed = ws.write_file("hello.py", "print(2)").unwrap();
    assert!(changed.starts_with("wrote 8 bytes"), "{changed}");
    assert_eq!(ws.read_file("hello.py", 100).unwrap(), "print(2)");
}

#[test]
fn edit_misses_show_the_file_and_wrong_directories_name_the_real_file() {
    let (_dir, ws) = workspace();
    let original =
        "def count_words(text):\n    \"\"\"Words.\"\"\"\n    return len(text.split(\" \"))\n";
    ws.write_file("wordcount.py", original).unwrap();

    // Whitespace drift in `old` still edits, and the result says how it matched.
    let result = ws
        .edit_file(
            "wordcount.py",
            "    \"\"\"Words.\n    \"\"\"\n    return len(text.split(\" \"))",
            "    return len(text.split())",
        )
        .unwrap();
    assert!(result.contains("whitespace ignored"), "{result}");
    assert_eq!(
        fs::read_to_string(ws.root().join("wordcount.py")).unwrap(),
        "def count_words(text):\n    return len(text.split())\n"
    );

    // A real miss shows the current text to copy from, and changes nothing.
    let miss = ws.edit_file("wordcount.py", "return 3", "x").unwrap_err();
    let ToolError::OldNotFound { current, .. } = &miss else {
        panic!("{miss:?}");
    };
    assert!(current.contains("return len(text.split())"), "{miss}");

    // An invented directory: reading or editing names the file that exists; writing there
    // creates the file and says the workspace has one of that name already.
    for err in [
        ws.read_file("src/wordcount.py", 1000).unwrap_err(),
        ws.edit_file("src/wordcount.py", "a", "b").unwrap_err(),
    ] {
        let ToolError::NotFoundButNamedElsewhere { elsewhere, .. } = &err else {
            panic!("{err:?}");
        };
        assert_eq!(elsewhere, "`wordcount.py`");
    }
    let wrote = ws.write_file("src/wordcount.py", "x\n").unwrap();
    assert!(wrote.contains("also has `wordcount.py`"), "{wrote}");
    let again = ws.write_file("src/wordcount.py", "y\n").unwrap();
    assert!(
        !again.contains("also has"),
        "only a new file gets the note: {again}"
    );
    assert!(matches!(
        ws.read_file("nothing.py", 10),
        Err(ToolError::NotFound(_))
    ));
}

#[test]
fn a_python_line_break_inside_a_string_literal_is_written_as_an_escape() {
    let (_dir, ws) = workspace();
    // What JSON makes of `"... + '\n')"`: a real line break inside the literal.
    let broken = "import json\nout.write(json.dumps(row) + '\n')\n";
    let mended = "import json\nout.write(json.dumps(row) + '\\n')\n";
    // (path, content, file afterwards, the result mentions the mend)
    let cases = [
        ("to_json.py", broken, mended, true),
        ("notes.txt", broken, broken, false),
        ("ok.py", mended, mended, false),
    ];
    for (path, content, after, noted) in cases {
        let result = ws.write_file(path, content).unwrap();
        assert_eq!(
            fs::read_to_string(ws.root().join(path)).unwrap(),
            after,
            "{path}"
        );
        assert_eq!(result.contains("line 2:"), noted, "{path}: {result}");
    }
    // An edit that puts one in is mended the same way.
    let result = ws.edit_file("ok.py", "+ '\\n')", "+ '\n' + 'x')").unwrap();
    assert!(result.contains("written as the escape"), "{result}");
    assert_eq!(
        fs::read_to_string(ws.root().join("ok.py")).unwrap(),
        "import json\nout.write(json.dumps(row) + '\\n' + 'x')\n"
    );
}

#[test]
fn an_edit_whose_new_text_is_its_old_says_nothing_changed() {
    let (_dir, ws) = workspace();
    ws.write_file("a.py", "x = 1\n").unwrap();
    let result = ws.edit_file("a.py", "x = 1", "x = 1").unwrap();
    assert!(result.contains("is unchanged"), "{result}");
}

#[test]
fn a_python_line_break_escaped_twice_is_written_as_a_line_break() {
    let (_dir, ws) = workspace();
    // What JSON makes of `"def main():\\n    return 1"`: the two characters `\n`.
    let broken = "def main():\\n    return 1\nmain()\n";
    let mended = "def main():\n    return 1\nmain()\n";
    // (path, content, file afterwards, the result mentions the mend)
    let cases = [
        ("checkage.py", broken, mended, true),
        ("notes.md", broken, broken, false),
    ];
    for (path, content, after, noted) in cases {
        let result = ws.write_file(path, content).unwrap();
        assert_eq!(
            fs::read_to_string(ws.root().join(path)).unwrap(),
            after,
            "{path}"
        );
        assert_eq!(result.contains("line 1 as sent"), noted, "{path}: {result}");
    }
}

/// The check passes on a plain directory; before the write, the directory becomes a symlink to
/// one outside (as a process the agent left running could do): the write is refused and
/// nothing lands outside. Same for a read, and for a file swapped for a symlink.
#[test]
fn a_symlink_swapped_in_after_the_check_is_never_followed() {
    let (_dir, ws) = workspace();
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("secret"), "outside").unwrap();
    ws.write_file("sub/keep.txt", "mine").unwrap();
    ws.write_file("shot.png", "old").unwrap();

    let parent = ws.resolve_target("sub/secret").unwrap();
    let file = ws.resolve_target("shot.png").unwrap();
    fs::rename(ws.root().join("sub"), ws.root().join("parked")).unwrap();
    symlink(outside.path(), ws.root().join("sub")).unwrap();
    fs::remove_file(ws.root().join("shot.png")).unwrap();
    symlink(outside.path().join("secret"), ws.root().join("shot.png")).unwrap();

    let err = ws
        .write_target(&parent, "sub/secret", b"pwned")
        .unwrap_err();
    assert!(matches!(err, ToolError::SymlinkRefused(_)), "{err:?}");
    let err = ws.write_target(&file, "shot.png", b"\x89PNG").unwrap_err();
    assert!(matches!(err, ToolError::SymlinkRefused(_)), "{err:?}");
    assert_eq!(
        fs::read_to_string(outside.path().join("secret")).unwrap(),
        "outside"
    );
    assert_eq!(fs::read_dir(outside.path()).unwrap().count(), 1);
    // Checked and used at once, the tools refuse as before (the check sees the link).
    assert!(matches!(
        ws.write_file("sub/secret", "pwned"),
        Err(ToolError::EscapesWorkspace(_))
    ));
    assert!(ws.read_file("shot.png", 100).is_err());
}

/// Symlinks inside the workspace still work for every file tool: the check resolves them and
/// the use opens the file they lead to.
#[test]
fn symlinks_inside_the_workspace_still_lead_to_their_files() {
    let (_dir, ws) = workspace();
    ws.write_file("docs/README.md", "hello").unwrap();
    symlink("docs/README.md", ws.root().join("README.md")).unwrap();
    symlink("docs", ws.root().join("d")).unwrap();
    assert_eq!(ws.read_file("README.md", 100).unwrap(), "hello");
    ws.edit_file("README.md", "hello", "bye").unwrap();
    ws.write_file("d/new.md", "x").unwrap();
    assert_eq!(
        fs::read_to_string(ws.root().join("docs/README.md")).unwrap(),
        "bye"
    );
    assert_eq!(ws.list_dir("d").unwrap(), "README.md\nnew.md");
    assert!(fs::symlink_metadata(ws.root().join("README.md"))
        .unwrap()
        .file_type()
        .is_symlink());
}

#[test]
fn a_partial_write_over_a_python_file_keeps_its_other_definitions_and_says_so() {
    let (dir, ws) = workspace();
    let skeleton = "import csv\n\n\ndef load(path):\n    raise NotImplementedError\n\n\nCOMMANDS = {}\n\n\ndef main(argv):\n    return COMMANDS[argv[2]](load(argv[1]))\n";
    ws.write_file("ledger.py", skeleton).unwrap();
    let result = ws
        .write_file(
            "ledger.py",
            "def load(path):\n    return list(csv.DictReader(open(path)))\n",
        )
        .unwrap();
    assert!(
        result.contains("kept from the file's earlier version, which this content left out: `csv`, `COMMANDS`, `main`"),
        "{result}"
    );
    let written = std::fs::read_to_string(dir.path().join("ledger.py")).unwrap();
    for part in [
        "import csv",
        "return list(csv.DictReader",
        "COMMANDS = {}",
        "def main(argv)",
    ] {
        assert!(written.contains(part), "{part} missing from:\n{written}");
    }
    assert!(!written.contains("NotImplementedError"), "{written}");
    // Not Python: written as given.
    ws.write_file("notes.txt", "def a():\n    pass\ndef b():\n    pass\n")
        .unwrap();
    ws.write_file("notes.txt", "def c():\n    pass\n").unwrap();
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "def c():\n    pass\n"
    );
}

/// A Python write or edit that would not parse is refused where the file parsed (or was new),
/// the file left as it was and the error saying where; over a file that did not parse either
/// it goes through with a note; other files are never checked. Skipped (said so) without a
/// `python3` on PATH.
#[test]
fn a_python_change_that_would_not_parse_is_refused_where_the_file_parsed() {
    use crate::tools::python_syntax::syntax_problem;
    if syntax_problem("def f(:\n").is_none() {
        eprintln!("SKIP a_python_change_that_would_not_parse_is_refused: no python3 on PATH");
        return;
    }
    let (_dir, ws) = workspace();
    let refused = |r: Result<String, ToolError>| match r {
        Err(ToolError::WouldNotParse { problem, .. }) => problem,
        other => panic!("expected WouldNotParse, got {other:?}"),
    };
    let problem = refused(ws.write_file("a.py", "def f(:\n    return 1\n"));
    assert!(problem.starts_with("line 1, column"), "{problem}");
    assert!(!ws.root().join("a.py").exists());
    let good = "def f():\n    return 1\n";
    ws.write_file("a.py", good).unwrap();
    let problem = refused(ws.edit_file("a.py", "return 1", "return (1"));
    assert!(problem.contains(">    2 |     return (1"), "{problem}");
    refused(ws.write_file("a.py", "def f():\nreturn 1\n"));
    assert_eq!(fs::read_to_string(ws.root().join("a.py")).unwrap(), good);
    // Already broken: the model may be mending it in steps; nothing that parsed is lost.
    fs::write(ws.root().join("b.py"), "x = (\n").unwrap();
    let note = ws.write_file("b.py", "y = [\n").unwrap();
    assert!(note.contains("still does not parse"), "{note}");
    let note = ws.edit_file("b.py", "y = [", "y = [1").unwrap();
    assert!(note.contains("still does not parse"), "{note}");
    assert_eq!(
        ws.edit_file("b.py", "y = [1", "y = [1]").unwrap(),
        "edited b.py"
    );
    ws.write_file("notes.txt", "def f(:\n").unwrap();
}

/// A whole-file write that would leave a Python module with none of the functions and
/// classes it defined is refused and the file kept; code content keeps its dropped
/// definitions instead (kept_definitions), and small modules, new files, other file kinds and
/// a file removed first go through.
#[test]
fn a_write_that_would_drop_every_definition_of_a_module_is_refused() {
    let module = "_marker = object()\n\n\ndef take(n, it):\n    return list(it)[:n]\n\n\n\
                  def tail(n, it):\n    return list(it)[-n:]\n\n\nclass Peekable:\n    pass\n";
    let example = "from pkg import every_nth\n\nprint(list(every_nth(range(10), 3)))\n";
    let cases: [(&str, &str, &str, bool); 5] = [
        // A usage example over a module of three definitions (a 1.5B model's move).
        ("recipes.py", module, example, true),
        // Code content: written, its dropped definitions kept.
        (
            "recipes.py",
            module,
            "def every_nth(it, n):\n    return it\n",
            false,
        ),
        // One definition is not guarded: a script may replace a one-function file.
        ("one.py", "def f():\n    pass\n", example, false),
        // Not Python.
        ("notes.txt", module, example, false),
        // A new file.
        ("new.py", "", example, false),
    ];
    for (path, old, new, refused) in cases {
        let (_dir, ws) = workspace();
        if !old.is_empty() {
            fs::write(ws.root().join(path), old).unwrap();
        }
        let result = ws.write_file(path, new);
        match (&result, refused) {
            (Err(ToolError::WouldDropEveryDefinition { count, names, .. }), true) => {
                assert_eq!(*count, 3, "{path}");
                assert_eq!(names, "take, tail, Peekable");
                assert_eq!(fs::read_to_string(ws.root().join(path)).unwrap(), old);
                let text = result.unwrap_err().to_string();
                assert!(text.contains("use edit_file with `old`"), "{text}");
                // A 1.5B model told how to delete the file did so and finished with none.
                assert!(!text.contains("rm "), "{text}");
            }
            (Ok(_), false) => {}
            (other, _) => panic!("{path}: refused={refused}, got {other:?}"),
        }
    }
    // Removed first, the same content is written.
    let (_dir, ws) = workspace();
    fs::write(ws.root().join("recipes.py"), module).unwrap();
    fs::remove_file(ws.root().join("recipes.py")).unwrap();
    ws.write_file("recipes.py", example).unwrap();
}

/// `write_file` and `edit_file` refuse to leave a Python file defining a top-level function
/// twice, and the file stays as it was (what a 1.5B executor did to `ledger.py`: a second
/// `main` that called itself, under the one the skeleton had).
#[test]
fn a_python_change_that_defines_a_function_twice_is_refused() {
    let (_dir, ws) = workspace();
    let one_main = "import sys\n\ndef main(argv):\n    return 0\n";
    ws.write_file("ledger.py", one_main).unwrap();
    let two_mains = format!("{one_main}\ndef main(argv):\n    sys.exit(main(sys.argv) or 0)\n");
    let refused = |r: Result<String, ToolError>| match r {
        Err(ToolError::WouldDefineTwice { name, .. }) => name,
        other => panic!("expected WouldDefineTwice, got {other:?}"),
    };
    assert_eq!(refused(ws.write_file("ledger.py", &two_mains)), "main");
    assert_eq!(
        refused(ws.edit_file(
            "ledger.py",
            "    return 0\n",
            "    return 0\n\ndef main(argv):\n    return 1\n"
        )),
        "main"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root().join("ledger.py")).unwrap(),
        one_main
    );
}

/// A 1.5B executor on `web-shopping` sent the part of `index.html` it meant to change as the
/// whole file (`Items: 0`, a lone `<ul>`), and wrapped a whole page in a ```html fence: the
/// fragment is refused and the page kept; the fenced page is written without its fence.
#[test]
fn a_page_is_not_replaced_by_a_fragment_and_loses_its_fence() {
    let (_dir, ws) = workspace();
    let page = "<html><body><h1>Shopping list</h1><ul id=\"items\"></ul></body></html>\n";
    let fenced = format!("```html\n{page}```");
    let wrote = ws.write_file("index.html", &fenced).unwrap();
    assert!(wrote.contains("fence"), "{wrote}");
    let read = || std::fs::read_to_string(ws.root().join("index.html")).unwrap();
    assert_eq!(read(), page);
    for fragment in ["Items: 0", "<ul id=\"items\"></ul><p>Items: 0</p>"] {
        match ws.write_file("index.html", fragment) {
            Err(ToolError::WouldReplacePage { path }) => assert_eq!(path, "index.html"),
            other => panic!("expected WouldReplacePage, got {other:?}"),
        }
        assert_eq!(read(), page);
    }
    ws.edit_file("index.html", "</ul>", "</ul><p>Items: 0</p>")
        .unwrap();
    assert!(read().contains("Items: 0"));
}
