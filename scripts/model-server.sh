#!/usr/bin/env bash
# Local OpenAI-compatible model server (llama-server + Qwen2.5-Coder GGUF + the repo's
# fenced-tools chat template), backgrounded, state under .loopgate/ in the repo.
#   scripts/model-server.sh start [0.5b|1.5b]   start (or reuse), wait for /health, print base URL
#   scripts/model-server.sh stop
#   scripts/model-server.sh status               exit 0 iff running and healthy
# Env: LOOPGATE_MODEL_PORT (8080), LOOPGATE_LLAMA_THREADS (nproc), LOOPGATE_MODEL_CTX (8192),
#      LOOPGATE_MODEL_LOAD_TIMEOUT_S (180), LOOPGATE_LLAMA_SERVER, LOOPGATE_MODEL_GGUF, LOOPGATE_CACHE.
# The last line printed by start/status is the base URL (http://127.0.0.1:PORT/v1); the model
# name to request is qwen2.5-coder-<size>-instruct.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
STATE="$REPO/.loopgate"
PIDFILE="$STATE/model-server.pid"
INFOFILE="$STATE/model-server.info"
LOG="$STATE/model-server.log"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
PORT="${LOOPGATE_MODEL_PORT:-8080}"
TEMPLATE="$REPO/deploy/llama/qwen-fenced-tools.jinja"

log() { echo "[model-server] $*" >&2; }

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid; pid=$(cat "$PIDFILE")
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

healthy() { curl -fsS --max-time 3 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

find_llama() {
  if [ -n "${LOOPGATE_LLAMA_SERVER:-}" ]; then echo "$LOOPGATE_LLAMA_SERVER"; return; fi
  if [ -x "$CACHE/bin/llama-server" ]; then echo "$CACHE/bin/llama-server"; return; fi
  command -v llama-server || true
}

start() {
  local size="${1:-0.5b}"
  local model="qwen2.5-coder-$size-instruct"
  mkdir -p "$STATE"
  if pid=$(running_pid); then
    local port; port=$(sed -n 's/^port=//p' "$INFOFILE" 2>/dev/null || echo "$PORT")
    log "already running (pid $pid, $(sed -n 's/^model=//p' "$INFOFILE" 2>/dev/null))"
    echo "http://127.0.0.1:$port/v1"; return
  fi
  local llama gguf
  llama=$(find_llama)
  [ -n "$llama" ] && [ -x "$llama" ] || { log "llama-server not found; run scripts/install-deps.sh llama"; exit 1; }
  gguf="${LOOPGATE_MODEL_GGUF:-$CACHE/models/qwen2.5-coder-$size-instruct-q4_k_m.gguf}"
  [ -f "$gguf" ] || { log "weights $gguf not found; run scripts/install-deps.sh model $size"; exit 1; }
  if healthy "$PORT"; then log "port $PORT already serves something else; set LOOPGATE_MODEL_PORT"; exit 1; fi

  log "starting $model on 127.0.0.1:$PORT (log: $LOG)"
  : > "$LOG"
  nohup "$llama" -m "$gguf" --alias "$model" --host 127.0.0.1 --port "$PORT" \
    -t "${LOOPGATE_LLAMA_THREADS:-$(nproc 2>/dev/null || echo 2)}" -c "${LOOPGATE_MODEL_CTX:-8192}" \
    -ngl 0 --parallel 1 --jinja --chat-template-file "$TEMPLATE" >>"$LOG" 2>&1 < /dev/null &
  local pid=$!
  echo "$pid" > "$PIDFILE"
  printf 'port=%s\nmodel=%s\n' "$PORT" "$model" > "$INFOFILE"

  local deadline=$((SECONDS + ${LOOPGATE_MODEL_LOAD_TIMEOUT_S:-180}))
  until healthy "$PORT"; do
    if ! kill -0 "$pid" 2>/dev/null; then
      log "llama-server exited during startup; last log lines:"; tail -n 30 "$LOG" >&2
      rm -f "$PIDFILE" "$INFOFILE"; exit 1
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      log "not healthy within ${LOOPGATE_MODEL_LOAD_TIMEOUT_S:-180} s; last log lines:"; tail -n 30 "$LOG" >&2
      stop; exit 1
    fi
    sleep 0.5
  done
  log "ready: model $model (export LOOPGATE_MODEL=$model)"
  echo "http://127.0.0.1:$PORT/v1"
}

stop() {
  local pid
  if ! pid=$(running_pid); then log "not running"; rm -f "$PIDFILE" "$INFOFILE"; return 0; fi
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then log "still alive after SIGTERM; killing"; kill -KILL "$pid" 2>/dev/null || true; fi
  rm -f "$PIDFILE" "$INFOFILE"
  log "stopped (pid $pid)"
}

status() {
  local pid port
  if ! pid=$(running_pid); then log "not running"; exit 3; fi
  port=$(sed -n 's/^port=//p' "$INFOFILE" 2>/dev/null || echo "$PORT")
  if healthy "$port"; then
    log "running (pid $pid, $(sed -n 's/^model=//p' "$INFOFILE" 2>/dev/null)), healthy"
    echo "http://127.0.0.1:$port/v1"
  else
    log "running (pid $pid) but /health is not OK yet"; exit 4
  fi
}

case "${1:-}" in
  start) start "${2:-0.5b}" ;;
  stop) stop ;;
  status) status ;;
  *) log "usage: $0 start [0.5b|1.5b] | stop | status"; exit 2 ;;
esac
