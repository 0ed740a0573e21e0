#!/usr/bin/env bash
# The repository flow with the local model, measured: more-itertools 10.5.0 from PyPI's sources
# (scripts/install-deps.sh sample-package) committed into a fresh git repository, then
# scripts/demo.sh with examples/repo-more-itertools/task.toml and LOOPGATE_DEMO_REPO: submit
# --repo, the run, and `loopgate apply` on completion. On the branch apply wrote, the package's own
# unittest suite and the task's new check are run here, apart from loopgate.
#   scripts/repo-demo.sh
# Writes $OUT/repo-demo.json (OUT = $BENCH_OUT, default target/bench): the demo's exit code, wall
# seconds, the run's end state, rounds and tokens, whether apply wrote the branch and whether the
# package's tests pass on it; the demo output under $OUT/repo-demo/.
# Env: as scripts/demo.sh; LOOPGATE_DEMO_MODEL defaults to 1.5b here.
set -euo pipefail

say() { echo "[repo-demo] $*" >&2; }
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${BENCH_OUT:-$PWD/target/bench}"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
TASK=examples/repo-more-itertools/task.toml
export LOOPGATE_DEMO_MODEL="${LOOPGATE_DEMO_MODEL:-1.5b}"
command -v python3 >/dev/null || { say "python3 is needed"; exit 1; }

scripts/install-deps.sh sample-package >&2
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
tar xzf "$CACHE/pypi/more-itertools-10.5.0.tar.gz" -C "$WORK"
REPO_DIR="$WORK/more-itertools-10.5.0"
printf '__pycache__/\n*.egg-info/\n' > "$REPO_DIR/.gitignore"
git -C "$REPO_DIR" init -q -b main
git -C "$REPO_DIR" add -A
git -C "$REPO_DIR" -c user.name=loopgate-bench -c user.email=bench@loopgate.invalid \
  commit -q -m "more-itertools 10.5.0 from PyPI"
START="$(git -C "$REPO_DIR" rev-parse HEAD)"

mkdir -p "$OUT/repo-demo"
t0=$SECONDS
set +e
LOOPGATE_DEMO_TASK="$TASK" LOOPGATE_DEMO_REPO="$REPO_DIR" scripts/demo.sh > "$OUT/repo-demo/demo.log" 2>&1
RC=$?
set -e
WALL=$((SECONDS - t0))
cp .loopgate/demo-status.json "$OUT/repo-demo/status.json" 2>/dev/null || echo '{}' > "$OUT/repo-demo/status.json"

BRANCH="$(git -C "$REPO_DIR" for-each-ref --format='%(refname:short)' 'refs/heads/loopgate/*' | head -n1)"
TESTS=not_run
if [ -n "$BRANCH" ]; then
  git -C "$REPO_DIR" worktree add -q "$WORK/branch" "$BRANCH"
  CHECK="$(python3 -c 'import sys, tomllib; t = tomllib.load(open(sys.argv[1], "rb")); print(next(a["check"] for a in t["acceptance"] if a["id"] == "every-nth"))' "$TASK")"
  if (cd "$WORK/branch" && PYTHONDONTWRITEBYTECODE=1 sh -c "$CHECK" && PYTHONDONTWRITEBYTECODE=1 python3 -m unittest -q) \
      >> "$OUT/repo-demo/branch-tests.log" 2>&1; then TESTS=pass; else TESTS=fail; fi
fi
python3 - "$OUT/repo-demo/status.json" "$OUT/repo-demo.json" "$RC" "$WALL" "$START" "$BRANCH" "$TESTS" "$LOOPGATE_DEMO_MODEL" <<'PY'
import json, sys
status_path, out, rc, wall, start, branch, tests, model = sys.argv[1:]
try:
    status = json.load(open(status_path))
except ValueError:
    status = {}
json.dump({
    "task": "examples/repo-more-itertools/task.toml",
    "model": model,
    "exit_code": int(rc),
    "wall_s": int(wall),
    "run_id": status.get("id"),
    "state": status.get("state"),
    "terminal_reason": status.get("terminal_reason"),
    "rounds": status.get("round"),
    "total_tokens": status.get("total_tokens"),
    "start_commit": start,
    "branch": branch or None,
    "branch_tests": tests,
}, open(out, "w"), indent=2)
PY
say "exit $RC in ${WALL}s; branch ${BRANCH:-none}; the package's tests on it: $TESTS ($OUT/repo-demo.json)"
[ "$RC" -eq 0 ] && [ "$TESTS" = pass ]
