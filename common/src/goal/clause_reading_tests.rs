use super::*;
use crate::goal::words::goal_clauses;
use loopgate_protocol::contract::CriterionSource;

fn criterion(id: &str, check: &str, blocking: bool) -> Criterion {
    Criterion {
        id: id.into(),
        description: String::new(),
        check: Some(check.into()),
        blocking,
        timeout_secs: 5,
        source: CriterionSource::Task,
        clause: None,
    }
}

#[test]
fn clauses_are_read_by_their_words() {
    use ClauseReading::*;
    let keeps = |names: &[&str]| KeepsFiles(names.iter().map(|n| n.to_string()).collect());
    // (goal, the reading of each clause, in order)
    let cases: Vec<(&str, Vec<ClauseReading>)> = vec![
        (
            "Create fizzbuzz.py. Running `python3 fizzbuzz.py` prints the numbers 1 to 15.",
            vec![CreatesFile("fizzbuzz.py".into()), Other],
        ),
        (
            "Write a shell script count_errors.sh. For app.log it prints 3.",
            vec![CreatesFile("count_errors.sh".into()), Other],
        ),
        (
            "Write checkage.py, a command-line tool.",
            vec![CreatesFile("checkage.py".into())],
        ),
        // A clause that says what the file does is judged.
        (
            "Write dedupe.py that reads lines from stdin. Write a.py and b.py.",
            vec![Other, Other],
        ),
        // Adding to a file is not creating one; a path out of the workspace is no file.
        (
            "Add a --shout flag to greet.py. Create ../up.py.",
            vec![Other, Other],
        ),
        (
            "The tests in test_pricing.py fail. Fix the bug in pricing.py so that \
             `python3 -m unittest test_pricing` passes. Do not change test_pricing.py.",
            vec![
                StatesProblem,
                CommandPasses("python3 -m unittest test_pricing".into()),
                keeps(&["test_pricing.py"]),
            ],
        ),
        (
            "count_words in wordcount.py gives wrong answers: count_words('a  b') returns 3. \
             count_words('') returns 1. Fix it so it returns 2.",
            vec![StatesProblem, Other, Other],
        ),
        // Without a "Fix" after it, with a must, or naming no defect, a statement is a
        // requirement.
        (
            "The output is sorted. The output must not crash. Fix the crash.",
            vec![Other, Other, Other],
        ),
        ("The tests fail. Print it.", vec![Other, Other]),
        // A command that must pass, unless the clause restricts more or holds a placeholder.
        (
            "Make `make test` pass. `make test` passes without network. `sh run.sh FILE` \
             succeeds. `./ok.sh` exits with code 0.",
            vec![Other, Other, Other, CommandPasses("./ok.sh".into())],
        ),
        (
            "Don't modify tests/ or the file app.py. Do not change app.py except imports. \
             Do not count files in subdirectories of DIR.",
            vec![keeps(&["tests/", "app.py"]), Other, Other],
        ),
    ];
    for (goal, want) in cases {
        let clauses = goal_clauses(goal);
        let got: Vec<ClauseReading> = (0..clauses.len())
            .map(|i| read_clause(&clauses, i))
            .collect();
        assert_eq!(got, want, "{goal}");
    }
    assert_eq!(read_clause(&[], 0), Other);
}

#[test]
fn a_check_covers_a_clause_it_runs_word_for_word() {
    let criteria = vec![
        criterion(
            "app-log",
            r#"test "$(sh count_errors.sh app.log)" = 3"#,
            true,
        ),
        criterion("loose", "python3 fizzbuzz.py | grep -q Fizz", true),
        criterion(
            "others",
            "python3 src/zz.py; python3 zz.py.bak; python3 azz.py",
            true,
        ),
        criterion("dot-slash", "test -x ./run.sh && sh ./run.sh", true),
        criterion(
            "advisory",
            r#"test "$(sh count_errors.sh other.log)" = 2"#,
            false,
        ),
    ];
    let other = ClauseReading::Other;
    // (clause, its reading, the covering criterion)
    let cases: Vec<(&str, ClauseReading, Option<&str>)> = vec![
        ("For app.log it prints 3.", other.clone(), Some("app-log")),
        // 13 is not 3; a clause that says more than its exact words is judged.
        ("For app.log it prints 13.", other.clone(), None),
        ("For app.log it prints 3, sorted.", other.clone(), None),
        // A check that is not blocking decides nothing.
        ("For other.log it prints 2.", other.clone(), None),
        ("Nothing exact here.", other.clone(), None),
        (
            "Write run.sh.",
            ClauseReading::CreatesFile("run.sh".into()),
            Some("dot-slash"),
        ),
        (
            "Create zz.py.",
            ClauseReading::CreatesFile("zz.py".into()),
            None,
        ),
        (
            "Create fizzbuzz.py.",
            ClauseReading::CreatesFile("fizzbuzz.py".into()),
            Some("loose"),
        ),
        (
            "Create buzz.py.",
            ClauseReading::CreatesFile("buzz.py".into()),
            None,
        ),
        (
            "Don't touch app.log.",
            ClauseReading::KeepsFiles(vec!["app.log".into()]),
            None,
        ),
    ];
    for (clause, reading, want) in cases {
        let got = covering_check(clause, &reading, &criteria).map(|c| c.id.as_str());
        assert_eq!(got, want, "{clause}");
    }
}

#[test]
fn mechanical_checks_are_the_files_and_the_goals_commands() {
    let cases = [
        (
            ClauseReading::CreatesFile("a b/c.py".into()),
            Some("test -f 'a b/c.py'"),
        ),
        (
            ClauseReading::CommandPasses("make test".into()),
            Some("make test"),
        ),
        (ClauseReading::StatesProblem, None),
        (ClauseReading::KeepsFiles(vec!["x".into()]), None),
        (ClauseReading::Other, None),
    ];
    for (reading, want) in cases {
        assert_eq!(mechanical_check(&reading).as_deref(), want, "{reading:?}");
    }
}

#[test]
fn a_clauses_runnable_commands_are_found() {
    let checks = [
        r#"test "$(python3 checkage.py 30)" = adult && test "$(python3 checkage.py 18)" = adult"#,
        "python3 checkage.py abc >/dev/null 2>err.txt; test $? -eq 2",
        "python3 checkage.py >/dev/null 2>err.txt; test $? -eq 2",
        r#"test "$(sh count_errors.sh app.log)" = 3"#,
        r#"printf 'ERROR a\n' > other.log && test "$(sh count_errors.sh other.log)" = 1"#,
    ];
    let cmd = |c: &str, from_check: bool| ClauseCommand {
        command: c.into(),
        from_check,
    };
    let cases: Vec<(&str, Vec<ClauseCommand>)> = vec![
        (
            "Running `python3 fizzbuzz.py` prints the numbers 1 to 15.",
            vec![cmd("python3 fizzbuzz.py", false)],
        ),
        // A placeholder is filled in as the checks fill it (at most three ways); a redirection
        // is no argument.
        (
            "`python3 checkage.py AGE` prints `adult` if AGE is 18 or more.",
            vec![
                cmd("python3 checkage.py 30", true),
                cmd("python3 checkage.py 18", true),
                cmd("python3 checkage.py abc", true),
            ],
        ),
        (
            "`sh count_errors.sh FILE` prints the number of lines.",
            vec![
                cmd("sh count_errors.sh app.log", true),
                cmd("sh count_errors.sh other.log", true),
            ],
        ),
        // Plain values, unknown programs, placeholders no check fills are not run.
        ("`adult`, `rm -rf x`, `sh go.sh <name>`.", vec![]),
        (
            "`./run.sh` and `sh a.sh` and `sh a.sh` and `bash b.sh` and `sh c.sh` and `sh d.sh`.",
            vec![
                cmd("./run.sh", false),
                cmd("sh a.sh", false),
                cmd("bash b.sh", false),
                cmd("sh c.sh", false),
            ],
        ),
        ("An open `python3 x.py", vec![]),
        ("", vec![]),
    ];
    for (clause, want) in cases {
        assert_eq!(clause_commands(clause, &checks), want, "{clause}");
    }
}
