#!/usr/bin/env bash
# End-to-end demo: one real run of examples/hello through manager -> executor -> auditor.
#   make demo            (or scripts/demo.sh)
# Installs only what the demo runs (scripts/install-deps.sh demo: nats-server, redis-server,
# bubblewrap) and builds only the four product binaries in release (loopgate, loopgate-manager,
# loopgate-executor, loopgate-auditor); `make test` installs and builds the rest.
# Without LOOPGATE_MODEL_URL it installs llama-server + a local Qwen2.5-Coder model and serves
# it with scripts/model-server.sh; with LOOPGATE_MODEL_URL (+ LOOPGATE_MODEL, LOOPGATE_API_KEY)
# it uses that OpenAI-compatible endpoint instead.
# Env: LOOPGATE_DEMO_MODEL (0.5b|1.5b, default 0.5b), LOOPGATE_DEMO_TASK (examples/hello/task.toml),
#      LOOPGATE_SERVER (http://127.0.0.1:7600), LOOPGATE_UP_TIMEOUT_S (120),
#      LOOPGATE_BIN_DIR (use the loopgate binaries there instead of building release ones),
#      LOOPGATE_DEMO_REPO (a git repository: the run starts from its HEAD with `submit --repo`,
#      and a completed run comes back as a branch with `loopgate apply`; see
#      examples/repo-more-itertools and scripts/repo-demo.sh).
# Exit code 0 only if the run completed (and, with LOOPGATE_DEMO_REPO, `apply` wrote its branch).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"
STATE="$REPO/.loopgate"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
SIZE="${LOOPGATE_DEMO_MODEL:-0.5b}"
TASK="${LOOPGATE_DEMO_TASK:-examples/hello/task.toml}"
API="${LOOPGATE_SERVER:-http://127.0.0.1:7600}"
RESULT_DIR="$STATE/demo-result"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
mkdir -p "$STATE"

say() { echo "[demo] $*" >&2; }

[ -f "$TASK" ] || { say "task file $TASK not found"; exit 1; }

say "installing what the demo runs (nats-server, redis-server, bubblewrap)"
scripts/install-deps.sh demo
if [ -z "${LOOPGATE_MODEL_URL:-}" ]; then
  say "installing llama-server and the $SIZE model (set LOOPGATE_MODEL_URL to use another endpoint)"
  scripts/install-deps.sh llama >/dev/null
  scripts/install-deps.sh model "$SIZE" >/dev/null
fi

if [ -n "${LOOPGATE_BIN_DIR:-}" ]; then
  say "using the binaries in $LOOPGATE_BIN_DIR (LOOPGATE_BIN_DIR; not building)"
  BIN_DIR="$LOOPGATE_BIN_DIR"
else
  say "building the release binaries (loopgate, loopgate-manager, -executor, -auditor)"
  cargo build --release --bins -p loopgate-cli -p loopgate-manager -p loopgate-executor -p loopgate-auditor
  BIN_DIR="$CARGO_TARGET_DIR/release"
fi
export PATH="$BIN_DIR:$CACHE/bin:$PATH"

UP_PID=""
STARTED_MODEL=""
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
    say "stopping loopgate up (pid $UP_PID)"
    kill -TERM "$UP_PID" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$UP_PID" 2>/dev/null || break; sleep 0.2; done
    kill -KILL "$UP_PID" 2>/dev/null || true
    wait "$UP_PID" 2>/dev/null || true
  fi
  if [ -n "$STARTED_MODEL" ]; then scripts/model-server.sh stop || true; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

if [ -z "${LOOPGATE_MODEL_URL:-}" ]; then
  if ! scripts/model-server.sh status >/dev/null 2>&1; then STARTED_MODEL=1; fi
  LOOPGATE_MODEL_URL="$(scripts/model-server.sh start "$SIZE" | tail -n1)"
  export LOOPGATE_MODEL_URL
  export LOOPGATE_MODEL="${LOOPGATE_MODEL:-qwen2.5-coder-$SIZE-instruct}"
fi
say "model: ${LOOPGATE_MODEL:-<default>} at $LOOPGATE_MODEL_URL"

if curl -fsS --max-time 3 "$API/readyz" >/dev/null 2>&1; then
  say "another loopgate is already serving $API (a second \`loopgate up\` would clash on its ports and .loopgate/); stop it first"
  exit 1
fi
say "starting loopgate up (log: $STATE/up.log)"
# A task with a [gui] table gets a gui executor (headless Chromium, the browser_* tools).
UP_ARGS=()
if grep -q '^\[gui\]' "$TASK"; then
  say "the task has a [gui] table: starting a gui executor too (needs chromium)"
  scripts/install-deps.sh chromium
  UP_ARGS+=(--gui)
fi
loopgate up "${UP_ARGS[@]}" > "$STATE/up.log" 2>&1 &
UP_PID=$!
deadline=$((SECONDS + ${LOOPGATE_UP_TIMEOUT_S:-120}))
until curl -fsS --max-time 3 "$API/readyz" >/dev/null 2>&1; do
  if ! kill -0 "$UP_PID" 2>/dev/null; then
    say "loopgate up exited; last log lines:"; tail -n 40 "$STATE/up.log" >&2; exit 1
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    say "loopgate not ready within ${LOOPGATE_UP_TIMEOUT_S:-120} s; last log lines:"
    tail -n 40 "$STATE/up.log" >&2; exit 1
  fi
  sleep 0.5
done
say "$(grep -m1 'loopgate is up' "$STATE/up.log" || echo "loopgate is up: $API")"

SUBMIT_ARGS=()
if [ -n "${LOOPGATE_DEMO_REPO:-}" ]; then
  git -C "$LOOPGATE_DEMO_REPO" rev-parse --verify -q HEAD >/dev/null \
    || { say "LOOPGATE_DEMO_REPO=$LOOPGATE_DEMO_REPO is not a git repository with a commit"; exit 1; }
  SUBMIT_ARGS+=(--repo "$LOOPGATE_DEMO_REPO")
fi
say "submitting $TASK${LOOPGATE_DEMO_REPO:+ from the repository $LOOPGATE_DEMO_REPO}"
set +e
loopgate submit "$TASK" "${SUBMIT_ARGS[@]}" --watch | tee "$STATE/submit.log"
SUBMIT_RC=${PIPESTATUS[0]}
set -e

# The run id is the first line submit prints on stdout (a UUID if there is one, else its last word).
FIRST_LINE="$(head -n1 "$STATE/submit.log" || true)"
RUN="$(grep -oE '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}' <<<"$FIRST_LINE" | head -n1 || true)"
[ -n "$RUN" ] || RUN="$(awk '{print $NF}' <<<"$FIRST_LINE")"
if [ -z "$RUN" ]; then say "could not read a run id from submit's output"; exit 1; fi

echo
say "final status of run $RUN (includes the evidence):"
loopgate status "$RUN" --json | tee "$STATE/demo-status.json" || true
echo
rm -rf "$RESULT_DIR"
if loopgate checkout "$RUN" "$RESULT_DIR"; then
  say "final snapshot checked out to $RESULT_DIR:"
  (cd "$RESULT_DIR" && find . -type f | sort | head -n 50) >&2
else
  say "checkout failed"
fi

if [ "$SUBMIT_RC" -eq 0 ] && [ -n "${LOOPGATE_DEMO_REPO:-}" ]; then
  say "applying run $RUN to $LOOPGATE_DEMO_REPO (verified first; HEAD, index and working tree untouched)"
  if loopgate apply "$RUN" --repo "$LOOPGATE_DEMO_REPO" --key "$STATE/auditor-keys.pub"; then
    git -C "$LOOPGATE_DEMO_REPO" log --stat -1 "loopgate/${RUN:0:8}" >&2 || true
  else
    say "apply refused run $RUN"; SUBMIT_RC=1
  fi
fi
if [ "$SUBMIT_RC" -eq 0 ]; then
  say "run $RUN COMPLETED"
else
  say "run $RUN did NOT complete (submit exit code $SUBMIT_RC); see $STATE/up.log and $STATE/submit.log"
fi
exit "$SUBMIT_RC"
