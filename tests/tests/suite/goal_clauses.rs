//! The contract covers the goal, end to end on the real stack: a goal clause no check covers
//! becomes a judged criterion of the frozen contract; an artifact that passes the loose check
//! but breaks the clause does not complete (the judge's `unmet` is failing evidence, the gate
//! stays closed, and the next executor reads the clause); a derived check that is broken on its
//! own does not decide (its clause is judged instead, and the audit says so);
//! `derive_criteria = false` is today's behaviour.

use std::time::Duration;

use loopgate_test_support::{last_message_content, Reply, Script, StandInModel};
use loopgate_tests::{Profile, Stack, StackOptions};
use serde_json::{json, Value};

const WAIT: Duration = Duration::from_secs(120);

/// The issue's example: the only check counts lines, the goal also asks for the order.
const TASK: &str = r#"
goal = "Write dedupe.py that reads lines from stdin and prints them without duplicates, keeping the order of first occurrence"
EXTRA
[[acceptance]]
id = "two-lines"
description = "b a b in, two lines out"
check = "test \"$(printf 'b\\na\\nb\\n' | python3 dedupe.py | wc -l)\" -eq 2"
MORE
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 4
max_failed_rounds = 4
self_checks = 0
"#;

const SORTS: &str = "import sys\nfor line in sorted(set(sys.stdin)):\n    print(line, end='')\n";
const KEEPS_ORDER: &str = "import sys\nseen = set()\nfor line in sys.stdin:\n    if line not in seen:\n        seen.add(line)\n        print(line, end='')\n";

fn task(extra: &str, more: &str) -> String {
    TASK.replace("EXTRA", extra).replace("MORE", more)
}

fn user_text(req: &Value) -> String {
    req["messages"]
        .as_array()
        .map(|m| {
            m.iter()
                .filter(|m| m["role"] == "user")
                .filter_map(|m| m["content"].as_str())
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

const CLAUSE_QUESTION: &str = "## Requirement (quoted from the goal)";

/// A judge that is complacent overall (the issue's `complete / clean / aligned`) and answers
/// each clause question with `decide` on the question's text.
fn clause_judge(decide: impl Fn(&str) -> Reply + Send + Sync + 'static) -> Reply {
    Reply::dynamic(move |req: &Value| {
        let text = user_text(req);
        if text.contains(CLAUSE_QUESTION) {
            decide(&text)
        } else {
            Reply::content("Status: complete\nIntegrity: clean\nContract audit: aligned")
        }
    })
}

/// A judge that reads a single clause carefully: a `sorted(` in the files breaks "keeping the
/// order"; its `met` quotes the line it rests on.
fn judge() -> Reply {
    clause_judge(|text| {
        if text.contains("sorted(") {
            Reply::content("unmet - the lines are printed sorted, not in first-occurrence order")
        } else {
            Reply::content(
                "met - `if line not in seen:` prints the first occurrence of each line, in order",
            )
        }
    })
}

fn write(content: &str) -> Reply {
    Reply::tool_call(
        "write_file",
        json!({"path": "dedupe.py", "content": content}),
    )
}

fn finish() -> Reply {
    Reply::tool_call("finish", json!({"summary": "done"}))
}

async fn start(executor: Vec<Reply>) -> anyhow::Result<(StandInModel, Stack)> {
    start_judged(
        "Current task state: dedupe needed\nNext: cli\nTask: write dedupe.py",
        executor,
        judge(),
    )
    .await
}

/// The stand-in model (the manager always answers `manager`, the executor's replies in order,
/// the judge) and a stack with the task files' `mgr`, `exec` and `judge` profiles on it.
async fn start_judged(
    manager: &str,
    executor: Vec<Reply>,
    judge: Reply,
) -> anyhow::Result<(StandInModel, Stack)> {
    let model = StandInModel::start(
        Script::new()
            .fallback("standin-manager", Reply::content(manager))
            .replies("standin-executor", executor)
            .fallback("standin-judge", judge),
    )
    .await?;
    let stack = Stack::start(StackOptions::new(
        vec![
            Profile::new("mgr", &model.base_url(), "standin-manager"),
            Profile::new("exec", &model.base_url(), "standin-executor"),
            Profile::new("judge", &model.base_url(), "standin-judge"),
        ],
        1,
    ))
    .await?;
    Ok((model, stack))
}

async fn run(stack: &Stack, task: &str) -> anyhow::Result<(String, Value)> {
    let run = stack.submit(task, &[]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    Ok((id, done))
}

/// The first user message of each executor episode, in order.
fn episode_prompts(model: &StandInModel) -> Vec<String> {
    model
        .requests("standin-executor")
        .iter()
        .filter(|r| r["messages"].as_array().is_some_and(|m| m.len() == 2))
        .filter_map(|r| last_message_content(r, "user"))
        .collect()
}

/// The text of each clause question the judge was asked, in order.
fn clause_question_texts(model: &StandInModel) -> Vec<String> {
    model
        .requests("standin-judge")
        .iter()
        .map(user_text)
        .filter(|t| t.contains(CLAUSE_QUESTION))
        .collect()
}

fn clause_questions(model: &StandInModel) -> usize {
    clause_question_texts(model).len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unmet_goal_clause_keeps_the_gate_closed_and_reaches_the_executor() -> anyhow::Result<()>
{
    let (model, stack) = start(vec![write(SORTS), finish(), write(KEEPS_ORDER), finish()]).await?;
    let (id, done) = run(&stack, &task("", "")).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    // Round 1 passed the loose check and the complacent overall verdict, not the clause.
    assert_eq!(done["round"], 2, "{done}");

    // The clause is a criterion of the frozen contract, shown by `loopgate contract RUN`.
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    assert_eq!(contract["status"], "frozen");
    let toml = contract["toml"].as_str().unwrap_or_default();
    for needle in [
        "id = \"goal-1\"",
        "source = \"goal\"",
        "keeping the order of first occurrence",
        "-> goal-1",
    ] {
        assert!(toml.contains(needle), "missing {needle}:\n{toml}");
    }
    assert_eq!(
        contract["contract"]["criteria"].as_array().map(Vec::len),
        Some(2)
    );

    // The next executor read the unmet clause as failing evidence.
    let prompts = episode_prompts(&model);
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    for needle in [
        "criterion `goal-1` is not met",
        "judged unmet: the lines are printed sorted",
    ] {
        assert!(
            prompts[1].contains(needle),
            "missing {needle}:\n{}",
            prompts[1]
        );
    }
    // The judged clause passed on the final snapshot, as evidence bound to it.
    let evidence = done["evidence"].as_array().cloned().unwrap_or_default();
    let clause = evidence
        .iter()
        .find(|e| e["check_id"] == "goal-1" && e["artifact_version"] == done["snapshot"])
        .expect("the clause's evidence on the final snapshot");
    assert_eq!(clause["verdict"], "pass", "{clause}");
    assert!(clause_questions(&model) >= 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_derivation_the_loose_check_completes_as_before() -> anyhow::Result<()> {
    let (model, stack) = start(vec![write(SORTS), finish()]).await?;
    let (id, done) = run(&stack, &task("derive_criteria = false", "")).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(
        done["round"], 1,
        "today's behaviour: the loose check decides"
    );
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    assert_eq!(
        contract["contract"]["criteria"].as_array().map(Vec::len),
        Some(1)
    );
    assert_eq!(clause_questions(&model), 0);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_derived_check_is_reported_and_its_clause_judged_instead() -> anyhow::Result<()> {
    // A derived check with an unterminated quote: the shell fails on it whatever the work.
    let broken = "[[acceptance]]\nid = \"order\"\nsource = \"goal\"\n\
                  clause = \"Write dedupe.py that reads lines from stdin and prints them without duplicates, keeping the order of first occurrence\"\n\
                  check = \"test \\\"$(printf 'b\\\\na\\\\nb\\\\n' | python3 dedupe.py | head -1)\\\" = 'b\"";
    let (model, stack) = start(vec![write(KEEPS_ORDER), finish()]).await?;
    let (id, done) = run(&stack, &task("", broken)).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "the broken check did not block");
    let evidence = done["evidence"].as_array().cloned().unwrap_or_default();
    let order = evidence
        .iter()
        .find(|e| e["check_id"] == "order" && e["artifact_version"] == done["snapshot"])
        .expect("the derived criterion's evidence");
    assert_eq!(order["verdict"], "pass", "{order}");
    let excerpt = order["output_excerpt"].as_str().unwrap_or_default();
    assert!(excerpt.contains("derived check broken"), "{excerpt}");
    assert!(excerpt.contains("judged met"), "{excerpt}");
    // The audit says so.
    let reports = stack.log_entries(&id, "audit_report").await?;
    let said = reports.iter().any(|r| {
        r["gaps"].as_array().is_some_and(|g| {
            g.iter().any(|l| {
                l.as_str()
                    .is_some_and(|l| l.contains("derived check 'order' is broken"))
            })
        })
    });
    assert!(said, "{reports:#?}");
    // The clause is covered by the derived criterion: no other one was added for it.
    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    assert_eq!(
        contract["contract"]["criteria"].as_array().map(Vec::len),
        Some(2)
    );
    assert!(clause_questions(&model) >= 1);
    Ok(())
}

/// A bug-fix goal whose words decide most of its clauses: the problem statement is no
/// criterion, the goal's own command becomes a derived check, the file it says not to change is
/// protected, and the one clause left to judge is asked with what its command prints.
const FIX_TASK: &str = r#"
goal = "The greeting in greet.py is broken. Fix greet.py so that `python3 check_greet.py` passes. Do not change check_greet.py. Running `python3 greet.py` prints the greeting in upper case."
[[acceptance]]
id = "runs"
description = "greet.py runs"
check = "python3 greet.py"
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 4
max_failed_rounds = 4
self_checks = 0
"#;

const CHECK_GREET: &str =
    "import subprocess, sys\nout = subprocess.run([sys.executable, 'greet.py'], capture_output=True, text=True).stdout\nassert out == 'HELLO\\n', out\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_goals_own_words_decide_its_clauses_and_the_judge_sees_its_commands_output(
) -> anyhow::Result<()> {
    let write_greet = |content: &str| {
        Reply::tool_call(
            "write_file",
            json!({"path": "greet.py", "content": content}),
        )
    };
    // The judge reads the command's output: upper case is met, anything else is not.
    let judge = clause_judge(|text| {
        if text.contains("`python3 greet.py` (exit 0) printed:\n```\nHELLO\n```") {
            Reply::content("met - `print('HELLO')` prints HELLO")
        } else {
            Reply::content("unmet - the greeting is not in upper case")
        }
    });
    let (model, stack) = start_judged(
        "Current task state: broken\nNext: cli\nTask: fix greet.py",
        vec![
            write_greet("print('hello')\n"),
            finish(),
            write_greet("print('HELLO')\n"),
            finish(),
        ],
        judge,
    )
    .await?;
    let run = stack
        .submit(
            FIX_TASK,
            &[
                ("greet.py", "print('helo')\n"),
                ("check_greet.py", CHECK_GREET),
            ],
        )
        .await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 2, "{done}");

    let contract = stack.get(&format!("/v1/runs/{id}/contract")).await?;
    let toml = contract["toml"].as_str().unwrap_or_default();
    for needle in [
        "\"The greeting in greet.py is broken.\" (states the problem the task fixes; not a criterion)",
        "-> goal-2",
        "check = \"python3 check_greet.py\"",
        "-> protected_paths (check_greet.py)",
        "-> goal-4",
    ] {
        assert!(toml.contains(needle), "missing {needle}:\n{toml}");
    }
    let protected = contract["contract"]["protected_paths"].to_string();
    assert!(protected.contains("check_greet.py"), "{protected}");
    let judged: Vec<&str> = contract["contract"]["criteria"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["source"] == "goal" && c["check"].is_null())
        .filter_map(|c| c["id"].as_str())
        .collect();
    assert_eq!(judged, vec!["goal-4"], "{contract}");

    // Round 1's candidate failed the goal's own command, and the next executor read it.
    let prompts = episode_prompts(&model);
    assert_eq!(prompts.len(), 2, "{prompts:#?}");
    assert!(
        prompts[1].contains("check `goal-2` failed (exit 1): `python3 check_greet.py`"),
        "{}",
        prompts[1]
    );
    // Each clause question showed what the clause's command printed on that candidate.
    let questions = clause_question_texts(&model);
    assert!(questions.len() >= 2, "{questions:#?}");
    assert!(
        questions[0].contains("`python3 greet.py` (exit 0) printed:\n```\nhello\n```"),
        "{}",
        questions[0]
    );
    Ok(())
}

/// A goal that states its requirement by example: the judge of the fix's clause is shown
/// what the goal's call returns on each candidate (evaluated with the function the snapshot
/// defines), not left to guess it from the code.
const COUNT_TASK: &str = r#"
goal = "count_words in wordcount.py gives wrong answers: count_words('a  b') returns 3. Fix it so it returns the number of words separated by any whitespace."
[[acceptance]]
id = "imports"
description = "wordcount.py imports"
check = "python3 -c 'import wordcount'"
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 4
max_failed_rounds = 4
self_checks = 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_sees_what_the_goals_calls_return_on_the_candidate() -> anyhow::Result<()> {
    let write = |body: &str| {
        Reply::tool_call(
            "write_file",
            json!({"path": "wordcount.py", "content": format!("def count_words(text):\n    return {body}\n")}),
        )
    };
    let judge = clause_judge(|text| {
        if text.contains("- `count_words('a  b')` returns `2`") {
            Reply::content("met - `return len(text.split())` splits on any whitespace")
        } else {
            Reply::content("unmet - a run of spaces is not one separator")
        }
    });
    let (model, stack) = start_judged(
        "Current task state: broken\nNext: cli\nTask: fix count_words",
        vec![
            write("len(text.split(' '))"),
            finish(),
            write("len(text.split())"),
            finish(),
        ],
        judge,
    )
    .await?;
    let start = "def count_words(text):\n    return len(text.split(' ')) if text else 1\n";
    let run = stack.submit(COUNT_TASK, &[("wordcount.py", start)]).await?;
    let id = run["id"].as_str().unwrap_or_default().to_string();
    let done = stack.wait_terminal(&id, WAIT).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 2, "{done}");
    let questions = clause_question_texts(&model);
    assert!(!questions.is_empty(), "no clause question");
    assert!(
        questions[0].contains("## What the goal's calls return on this snapshot")
            && questions[0].contains("- `count_words('a  b')` returns `3`"),
        "{}",
        questions[0]
    );
    Ok(())
}

/// A clause whose command writes its result to a file the clause names: the judge is shown
/// that file as the command left it, not only what the command printed (nothing).
const WRITES_TASK: &str = r#"
goal = "Write to_json.py. `python3 to_json.py` writes numbers.json: a JSON array of the numbers 1 to 3, in order."
[[acceptance]]
id = "runs"
description = "to_json.py runs"
check = "python3 to_json.py"
[roles]
manager = "mgr"
executor = "exec"
auditor = "judge"
[budget]
max_rounds = 2
max_failed_rounds = 2
self_checks = 0
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_judge_sees_the_file_a_clauses_command_writes() -> anyhow::Result<()> {
    let judge = clause_judge(|text| {
        if text.contains("--- numbers.json, as the command left it:\n[1, 2, 3]") {
            Reply::content(
                "met - `json.dump([1, 2, 3], open('numbers.json', 'w'))` writes the array",
            )
        } else {
            Reply::content("unmet - the snapshot does not produce any JSON output")
        }
    });
    let (model, stack) = start_judged(
        "Current task state: nothing yet\nNext: cli\nTask: write to_json.py",
        vec![
            Reply::tool_call(
                "write_file",
                json!({
                    "path": "to_json.py",
                    "content": "import json\njson.dump([1, 2, 3], open('numbers.json', 'w'))\n"
                }),
            ),
            finish(),
        ],
        judge,
    )
    .await?;
    let (_, done) = run(&stack, WRITES_TASK).await?;
    assert_eq!(done["state"], "completed", "{done}\n{}", stack.logs());
    assert_eq!(done["round"], 1, "{done}");
    let questions = clause_question_texts(&model);
    let asked = questions
        .iter()
        .find(|q| q.contains("numbers.json: a JSON array"))
        .cloned()
        .unwrap_or_default();
    // Shown as the clause quotes it, with what it wrote.
    assert!(
        asked.contains("`python3 to_json.py` (exit 0) printed:"),
        "{questions:#?}"
    );
    Ok(())
}
