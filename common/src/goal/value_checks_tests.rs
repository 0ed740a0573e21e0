use super::*;

const CSV: &str = "Write people.csv from people.txt with a header name,age and one row per \
    person, sorted by age.";

#[test]
fn value_checks_are_written_only_where_the_words_leave_no_doubt() {
    // (clause, its sentence, what the check must hold, or None)
    let cases: &[(&str, &str, Option<&[&str]>)] = &[
        (
            "with a header name,age",
            CSV,
            Some(&["head -n 1 'people.csv'", "grep -Fqx -- 'name,age'"]),
        ),
        (
            "sorted by age",
            CSV,
            Some(&["r[\"age\"]", "open(\"people.csv\"", "reverse=False"]),
        ),
        (
            "sorted by age, largest first",
            CSV,
            Some(&["reverse=True", "(descending)"]),
        ),
        // A column the sentence's header does not name: no check.
        ("sorted by surname", CSV, None),
        // No header named at all: the column is a guess.
        ("sorted by age", "Write people.csv sorted by age", None),
        // Two CSV files: which one is a guess.
        (
            "sorted by age",
            "Write a.csv and b.csv with a header name,age, sorted by age",
            None,
        ),
        (
            "with exactly 3 lines",
            "names.txt lists the users in alphabetical order, with exactly 3 lines",
            Some(&["open(\"names.txt\")", "- 0;", "n == 3"]),
        ),
        (
            "with exactly 2 rows",
            "Write out.csv with a header id,total and with exactly 2 rows",
            Some(&["open(\"out.csv\")", "- 1;", "n == 2"]),
        ),
        (
            "greeting.txt contains 'hello, loopgate'",
            "greeting.txt contains 'hello, loopgate'",
            Some(&["test -f 'greeting.txt' && grep -Fq -- 'hello, loopgate' 'greeting.txt'"]),
        ),
        // No file, or no quoted string: nothing to grep.
        ("it contains 'hello'", "it contains 'hello'", None),
        (
            "notes.md contains a summary",
            "notes.md contains a summary",
            None,
        ),
        // Clauses that name no value are left to the judge.
        ("one row per person", CSV, None),
        (
            "Write dedupe.py that reads lines from stdin and prints them without duplicates, \
             keeping the order of first occurrence",
            "Write dedupe.py that reads lines from stdin and prints them without duplicates, \
             keeping the order of first occurrence",
            None,
        ),
    ];
    for (clause, sentence, want) in cases {
        let got = value_check(clause, sentence);
        match (want, &got) {
            (None, None) => {}
            (Some(needles), Some(check)) => {
                for n in *needles {
                    assert!(check.contains(n), "{clause}: missing {n} in {check}");
                }
            }
            _ => panic!("{clause}: got {got:?}"),
        }
    }
}

/// Each check run by `sh` in a scratch directory: it fails where the file is missing (as on a
/// starting workspace), errors on nothing of its own, and decides on good and bad files.
#[test]
fn the_checks_run_and_decide() {
    if std::process::Command::new("python3")
        .arg("--version")
        .output()
        .is_err()
    {
        return;
    }
    let sorted = "name,age\nbob,7\nada,19\n";
    let unsorted = "name,age\nada,19\nbob,7\n";
    // (clause, sentence, file, content, passes)
    let cases: &[(&str, &str, &str, Option<&str>, bool)] = &[
        ("sorted by age", CSV, "people.csv", None, false),
        ("sorted by age", CSV, "people.csv", Some(sorted), true),
        ("sorted by age", CSV, "people.csv", Some(unsorted), false),
        (
            "sorted by age, largest first",
            CSV,
            "people.csv",
            Some(unsorted),
            true,
        ),
        ("with a header name,age", CSV, "people.csv", None, false),
        (
            "with a header name,age",
            CSV,
            "people.csv",
            Some(sorted),
            true,
        ),
        (
            "with a header name,age",
            CSV,
            "people.csv",
            Some("ada,19\n"),
            false,
        ),
        (
            "with exactly 2 rows",
            "Write people.csv with a header name,age and with exactly 2 rows",
            "people.csv",
            Some(sorted),
            true,
        ),
        (
            "with exactly 3 lines",
            "names.txt holds the names, with exactly 3 lines",
            "names.txt",
            Some("a\nb\n"),
            false,
        ),
        (
            "out.txt contains \"it's done\"",
            "out.txt contains \"it's done\"",
            "out.txt",
            None,
            false,
        ),
        (
            "out.txt contains \"it's done\"",
            "out.txt contains \"it's done\"",
            "out.txt",
            Some("well, it's done.\n"),
            true,
        ),
        (
            "greeting.txt contains \"hello, loopgate\"",
            "greeting.txt contains \"hello, loopgate\"",
            "greeting.txt",
            Some("say: hello, loopgate!\n"),
            true,
        ),
    ];
    for (i, (clause, sentence, file, content, passes)) in cases.iter().enumerate() {
        let Some(check) = value_check(clause, sentence) else {
            assert!(!passes, "{clause}: no check");
            continue;
        };
        let dir = std::env::temp_dir().join(format!("loopgate-value-{}-{i}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(content) = content {
            std::fs::write(dir.join(file), content).unwrap();
        }
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(&check)
            .current_dir(&dir)
            .output()
            .unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.success(),
            *passes,
            "{clause} on {content:?}: {check}\n{stderr}"
        );
        assert!(!stderr.contains("SyntaxError"), "{check}\n{stderr}");
        assert_ne!(out.status.code(), Some(2), "{check}\n{stderr}");
    }
}
