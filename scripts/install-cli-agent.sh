#!/usr/bin/env bash
# Installs a CLI coding agent from npm into the loopgate cache, for `[agents.NAME]` executor
# profiles (see docs/backends.md):
#   scripts/install-cli-agent.sh opencode [VERSION]   # opencode-ai     -> $CACHE/bin/opencode
#   scripts/install-cli-agent.sh codex [VERSION]      # @openai/codex   -> $CACHE/bin/codex
#   scripts/install-cli-agent.sh claude [VERSION]     # @anthropic-ai/claude-code -> $CACHE/bin/claude
# Each agent gets its own npm prefix under $CACHE/agents/<name>; the last line printed is the
# executable's path. Env: LOOPGATE_CACHE (~/.cache/loopgate). Needs node >= 18 and npm.
set -euo pipefail

CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
log() { echo "[install-cli-agent] $*" >&2; }

agent="${1:-}"
version="${2:-latest}"
case "$agent" in
  opencode) package="opencode-ai"; bin="opencode" ;;
  codex) package="@openai/codex"; bin="codex" ;;
  claude) package="@anthropic-ai/claude-code"; bin="claude" ;;
  *) log "usage: $0 opencode|codex|claude [VERSION]"; exit 2 ;;
esac

command -v npm >/dev/null || { log "npm not found (install Node.js >= 18)"; exit 1; }
prefix="$CACHE/agents/$agent"
mkdir -p "$prefix" "$CACHE/bin"
if [ -x "$prefix/node_modules/.bin/$bin" ] && [ "$version" = "latest" ] && [ -z "${LOOPGATE_REINSTALL:-}" ]; then
  log "$package already installed ($("$prefix/node_modules/.bin/$bin" --version 2>/dev/null | head -n1)); LOOPGATE_REINSTALL=1 to update"
else
  log "installing $package@$version into $prefix"
  npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error "$package@$version" >&2
fi
ln -sf "$prefix/node_modules/.bin/$bin" "$CACHE/bin/$bin"
log "$bin $("$CACHE/bin/$bin" --version 2>/dev/null | head -n1)"
echo "$CACHE/bin/$bin"
