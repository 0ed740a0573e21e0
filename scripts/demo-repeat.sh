#!/usr/bin/env bash
# `make demo`, measured: runs examples/hello end to end N times in a row on a warm machine
# (scripts/demo.sh each time; the model server and the binaries stay up and built between runs)
# and records every run for bench-report (docs/benchmarks.md).
#   scripts/demo-repeat.sh [N]        N runs (default $BENCH_DEMO_RUNS, else 10)
# Writes $OUT/demo-repeat.json (OUT = $BENCH_OUT, default target/bench), rewritten after every
# run: per run the demo's exit code, wall seconds (the whole scripts/demo.sh, `loopgate up` to
# stop), the run's own seconds (submitted -> last update), end state, terminal reason, rounds,
# tokens and run id; each run's demo output, status and daemon log under $OUT/demo-runs/<i>/.
# Env: as scripts/demo.sh (LOOPGATE_DEMO_MODEL 0.5b|1.5b, LOOPGATE_MODEL_URL + LOOPGATE_MODEL,
#      LOOPGATE_BIN_DIR to use built binaries, ...). Exit code 0 when every run completed.
set -euo pipefail

say() { echo "[demo-repeat] $*" >&2; }

N="${1:-${BENCH_DEMO_RUNS:-10}}"
case "$N" in ''|*[!0-9]*) say "usage: $0 [N] (N a positive number, got '$N')"; exit 2 ;; esac
[ "$N" -ge 1 ] || { say "N must be at least 1"; exit 2; }
command -v python3 >/dev/null || { say "python3 is needed to write the JSON"; exit 1; }

cd "$(dirname "${BASH_SOURCE[0]}")/.."
OUT="${BENCH_OUT:-$PWD/target/bench}"
RECORDS="$OUT/demo-runs/records.jsonl"
STATE="$PWD/.loopgate"           # where scripts/demo.sh leaves its status and logs
SIZE="${LOOPGATE_DEMO_MODEL:-0.5b}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-${LOOPGATE_CACHE:-$HOME/.cache/loopgate}/target}"

# Warm up once: services, model and binaries installed and built before the first timed run.
scripts/install-deps.sh demo
STARTED_MODEL=""
if [ -z "${LOOPGATE_MODEL_URL:-}" ]; then
  scripts/install-deps.sh llama >/dev/null
  scripts/install-deps.sh model "$SIZE" >/dev/null
fi
if [ -z "${LOOPGATE_BIN_DIR:-}" ]; then
  say "building the release binaries (loopgate, loopgate-manager, -executor, -auditor)"
  cargo build --release --bins -p loopgate-cli -p loopgate-manager -p loopgate-executor -p loopgate-auditor
  export LOOPGATE_BIN_DIR="$CARGO_TARGET_DIR/release"
fi
if [ -z "${LOOPGATE_MODEL_URL:-}" ]; then
  if ! scripts/model-server.sh status >/dev/null 2>&1; then STARTED_MODEL=1; fi
  scripts/model-server.sh start "$SIZE" >/dev/null
fi
cleanup() {
  local rc=$?
  if [ -n "$STARTED_MODEL" ]; then scripts/model-server.sh stop || true; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir -p "$OUT/demo-runs"
: > "$RECORDS"
read -r LOAD_START _ < /proc/loadavg
STARTED_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"

# write_json [finished_at]: demo-repeat.json from the records so far.
write_json() {
  python3 - "$RECORDS" "$OUT/demo-repeat.json" "$N" "$SIZE" "${LOOPGATE_MODEL_URL:-}" \
    "$(nproc 2>/dev/null || echo 0)" "$STARTED_AT" "${1:-}" "$LOAD_START" <<'PY'
import json, sys
records, out, asked, size, url, cores, started, finished, load_start = sys.argv[1:10]
runs = [json.loads(l) for l in open(records) if l.strip()]
doc = {
    "example": "examples/hello",
    "model": size if not url else None,
    "model_url": url or "local llama-server (scripts/model-server.sh)",
    "cores": int(cores),
    "runs_asked": int(asked),
    "started_at": started,
    "finished_at": finished or None,
    "load_start": load_start,
    "load_end": open("/proc/loadavg").read().split()[0],
    "runs": runs,
}
tmp = out + ".tmp"
with open(tmp, "w") as f:
    json.dump(doc, f, indent=2)
    f.write("\n")
import os
os.replace(tmp, out)
PY
}

# record I RC WALL_S DIR: one run's line from its saved demo-status.json (if the run got that far).
record() {
  python3 - "$@" >> "$RECORDS" <<'PY'
import json, sys
i, rc, wall, d = sys.argv[1:5]
rec = {"run": int(i), "exit_code": int(rc), "wall_s": float(wall), "run_id": None, "state": "no_run",
       "terminal_reason": None, "rounds": None, "tokens": None, "run_s": None}
try:
    st = json.load(open(d + "/demo-status.json"))
    rec.update({
        "run_id": st.get("id"),
        "state": st.get("state") or "unknown",
        "terminal_reason": st.get("terminal_reason"),
        "rounds": st.get("round"),
        "tokens": st.get("total_tokens"),
    })
    if st.get("created_at") and st.get("updated_at"):
        rec["run_s"] = round((st["updated_at"] - st["created_at"]) / 1000.0, 1)
except (OSError, ValueError):
    try:
        tail = open(d + "/demo.log", errors="replace").read().strip().splitlines()[-3:]
    except OSError:
        tail = []
    rec["terminal_reason"] = "scripts/demo.sh ended before a run status: " + " / ".join(tail)
print(json.dumps(rec))
PY
}

completed=0
for i in $(seq 1 "$N"); do
  dir="$OUT/demo-runs/$i"
  rm -rf "$dir"; mkdir -p "$dir"
  rm -f "$STATE/demo-status.json" "$STATE/submit.log"
  say "run $i of $N"
  t0=$(date +%s%N)
  set +e
  scripts/demo.sh > "$dir/demo.log" 2>&1
  rc=$?
  set -e
  wall=$(awk -v a="$t0" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
  for f in demo-status.json submit.log up.log; do
    if [ -f "$STATE/$f" ]; then cp "$STATE/$f" "$dir/$f"; fi
  done
  record "$i" "$rc" "$wall" "$dir"
  if [ "$rc" = 0 ]; then completed=$((completed + 1)); fi
  say "run $i: exit $rc in $wall s ($completed of $i completed)"
  write_json
done
write_json "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "$completed of $N completed; $OUT/demo-repeat.json"
[ "$completed" = "$N" ]
