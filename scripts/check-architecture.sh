#!/usr/bin/env bash
# Mechanical checks of the crate boundaries in docs/architecture.md. Run by `make lint` and
# `make test`; names every broken rule and exits non-zero if there is one.
#   - the auditor, the executor and the check runner they share never link the Redis client
#     (only the manager reaches Redis)
#   - `common` holds types and pure logic: no async runtime, NATS, Redis or HTTP (with every
#     feature on, `openapi` included)
#   - `api` (the manager's HTTP API types) holds types only: no async runtime, NATS, Redis or HTTP
#   - `checks` (the check runner) is handed what it checks: no snapshot store, no model
#   - the bus stays out of the libraries that need none: no `transport` in `snapshot`, `checks`,
#     `common`, `protocol`; `process` (child processes) and `workspace-walk` (the freezer's
#     walk) link no NATS or Redis, `workspace-walk` no async runtime either
#   - the CLI never links the NATS client (it talks to the manager's HTTP API only)
#   - binaries never depend on each other
#   - no file-level import cycle in any workspace crate
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
CARGO="${CARGO:-cargo}"
fail=0

deps_of() { # deps_of PACKAGE [TREE ARGS]: the normal (non-dev, non-build) dependency closure of a package, one name a line
  local pkg="$1"
  shift
  "$CARGO" tree -e normal -p "$pkg" "$@" --prefix none --format '{p}' 2>/dev/null | awk '{print $1}' | sort -u
}
forbid() { # forbid PACKAGE DEP REASON [TREE ARGS, e.g. --all-features]
  local pkg="$1" dep="$2" reason="$3" deps
  shift 3
  # A graph cargo cannot resolve (a dependency cycle) fails the check instead of passing it.
  if ! deps="$(deps_of "$pkg" "$@")"; then
    echo "architecture: cannot read the dependencies of $pkg${*:+ with $*}:" >&2
    "$CARGO" tree -e normal -p "$pkg" "$@" 2>&1 >/dev/null | head -n 4 >&2 || true
    fail=1
    return
  fi
  if grep -qx "$dep" <<<"$deps"; then
    echo "architecture: $pkg depends on $dep ($reason)${*:+ with $*}" >&2
    "$CARGO" tree -e normal -p "$pkg" "$@" -i "$dep" 2>/dev/null | head -n 8 >&2 || true
    fail=1
  fi
}

for worker in loopgate-auditor loopgate-executor loopgate-checks loopgate-browser loopgate-desktop; do
  forbid "$worker" redis "workers must never reach Redis; the run store is the manager's"
done
# --all-features: also with `openapi` (the utoipa derives the API crate turns on).
for dep in tokio async-nats redis reqwest axum; do
  forbid loopgate-common "$dep" "common holds types and pure decision logic only" --all-features
done
for dep in tokio async-nats redis reqwest axum; do
  forbid loopgate-api "$dep" "the API crate holds request and response types only, no I/O"
done
for dep in loopgate-snapshot loopgate-models; do
  forbid loopgate-checks "$dep" "the check runner runs checks on what it is handed, nothing more"
done
for lib in loopgate-snapshot loopgate-checks loopgate-common loopgate-protocol; do
  forbid "$lib" loopgate-transport "the bus is the daemons' and the worker runtime's, not this library's"
done
for lib in loopgate-process loopgate-workspace-walk; do
  for dep in async-nats redis; do
    forbid "$lib" "$dep" "child processes and the workspace walk need no bus"
  done
done
forbid loopgate-workspace-walk tokio "the workspace walk is blocking filesystem code, usable without a runtime"
forbid loopgate-cli async-nats "the CLI talks to the manager's HTTP API, never to NATS"
for bin in loopgate-manager loopgate-executor loopgate-auditor loopgate-cli; do
  for other in loopgate-manager loopgate-executor loopgate-auditor loopgate-cli; do
    [ "$bin" = "$other" ] || forbid "$bin" "$other" "binaries never depend on each other"
  done
done

python3 scripts/import_cycles.py || fail=1
python3 scripts/single_owner.py || fail=1

if [ "$fail" = 0 ]; then echo "architecture: crate boundaries hold"; fi
exit "$fail"
