# loopgate — build, test, demo. GNU make. Works from a fresh clone; third-party servers and the
# local model come from scripts/install-deps.sh (cached under ~/.cache/loopgate/).
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

CARGO ?= cargo
# Cached across clean clones (CI clones fresh every time).
CARGO_TARGET_DIR ?= $(HOME)/.cache/loopgate/target
export CARGO_TARGET_DIR
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MODEL_SIZE ?= 0.5b

.PHONY: help deps model-deps build build-debug test test-only demo bench chaos soak image-test lint fmt model-server model-server-stop clean check-toolchain

help:
	@echo "make deps          nats-server + redis-server into ~/.cache/loopgate/bin"
	@echo "make model-deps    llama-server + Qwen2.5-Coder $(MODEL_SIZE) GGUF (for the real-model e2e test)"
	@echo "make test          deps, model-deps (best effort), build bins, cargo test --workspace"
	@echo "make demo          run examples/hello end to end against a local model (scripts/demo.sh): installs"
	@echo "                   only nats-server, redis-server, bubblewrap, llama-server + model and builds"
	@echo "                   only the four product binaries (no linters, no benches)"
	@echo "make bench         benchmarks -> docs/benchmarks.md + docs/bench/*.svg (scripts/bench.sh;"
	@echo "                   BENCH_SKIP_ARMS=1 skips the real-model arms, BENCH_MODELS=\"1.5b 0.5b\","
	@echo "                   BENCH_SKIP_HUMANEVAL=1, BENCH_HUMANEVAL_N=40, BENCH_DEMO_RUNS=10 (0 skips),"
	@echo "                   BENCH_SKIP_LONG=1 skips the long tasks (examples/long, every arm: hours),"
	@echo "                   BENCH_LONG_ARGS=\"--arms continuation,loopgate --tasks ledger-cli\")"
	@echo "make chaos         chaos run: kill -9 / SIGSTOP managers, workers, nats-server, redis-server, cut"
	@echo "                   links at a fault proxy, fill the executors' work-dir tmpfs, while 100 runs"
	@echo "                   are in flight; prints the figures of docs/reliability.md"
	@echo "                   (CHAOS_ARGS=\"--duration-secs 300 --runs 100 --strict\")"
	@echo "make soak          no faults, 100 runs kept in flight for 30 min; is the manager's RSS flat?"
	@echo "                   (SOAK_ARGS=\"--duration-secs 1800 --runs 100 --strict\"; docs/benchmarks.md)"
	@echo "make image-test    build the role images with podman (Debian root fs, no registry) and run"
	@echo "                   e2e tests with every daemon from its image (scripts/image-test.sh)"
	@echo "make lint          cargo fmt --check + clippy -D warnings + crate boundaries (scripts/check-architecture.sh)"
	@echo "make build         release binaries"
	@echo "make model-server  start llama-server on 127.0.0.1:\$${LOOPGATE_MODEL_PORT:-8080} (model-server-stop)"

check-toolchain:
	@command -v $(CARGO) >/dev/null || { echo "error: cargo not found; install Rust (rust-version in Cargo.toml) first" >&2; exit 1; }

deps:
	scripts/install-deps.sh services

model-deps:
	scripts/install-deps.sh llama
	scripts/install-deps.sh model $(MODEL_SIZE)

build: check-toolchain
	$(CARGO) build --release --workspace --bins -j$(JOBS)

build-debug: check-toolchain
	$(CARGO) build --workspace --bins -j$(JOBS)

# The e2e tests spawn the workspace binaries (test-support's workspace_bin), so build them first.
# A failed model install is not fatal: the real-model test prints a visible SKIP line instead.
test: check-toolchain deps
	@start=$$SECONDS; \
	if ! $(MAKE) --no-print-directory model-deps; then \
	  echo; echo "WARNING: could not install llama-server / the $(MODEL_SIZE) model;"; \
	  echo "WARNING: the real-model end-to-end test will be SKIPPED (see output above)."; echo; \
	fi; \
	echo "[make test] deps ready after $$((SECONDS - start)) s"
	@start=$$SECONDS; $(CARGO) build --workspace --bins -j$(JOBS); \
	echo "[make test] binaries built in $$((SECONDS - start)) s"
	scripts/check-architecture.sh
	@start=$$SECONDS; $(CARGO) test --workspace --no-fail-fast -j$(JOBS); \
	echo "[make test] tests passed in $$((SECONDS - start)) s"

# Tests only, assuming deps are installed (quick local loop).
test-only: check-toolchain
	$(CARGO) build --workspace --bins -j$(JOBS)
	scripts/check-architecture.sh
	$(CARGO) test --workspace --no-fail-fast -j$(JOBS)

# Only what the demo runs (scripts/install-deps.sh demo, llama, model) and the four product
# binaries in release; the test and deploy linters come with `make test` (make deps).
demo: check-toolchain
	scripts/demo.sh

# Harness cost, throughput, prompt size, snapshot cost and the real-model arms, then the report.
bench: check-toolchain
	scripts/bench.sh

# The long chaos run (the short one is in `make test`): debug binaries, like the e2e tests.
# `--production`: 30 minutes of faults (kills, freezes, partitions, full disks) with executor
# steps of about 5-60 s and checks of 1-10 s, then up to 30 minutes for the runs to end.
CHAOS_ARGS ?= --production
chaos: check-toolchain deps
	$(CARGO) build --workspace --bins -j$(JOBS)
	$(CARGO) run -p loopgate-bench --bin chaos-bench -j$(JOBS) -- $(CHAOS_ARGS)

# The memory soak (issue 43): the chaos stack without faults, the manager's RSS followed.
SOAK_ARGS ?= --duration-secs 1800 --runs 100
soak: check-toolchain deps
	$(CARGO) build --workspace --bins -j$(JOBS)
	$(CARGO) run -p loopgate-bench --bin chaos-bench -j$(JOBS) -- --soak $(SOAK_ARGS)

# The role images built with podman on this machine and the stack run from them (not in CI:
# it downloads a Debian root filesystem, Node, the agent CLIs and Chromium into the images).
image-test: check-toolchain
	scripts/image-test.sh

lint: check-toolchain
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -j$(JOBS) -- -D warnings
	scripts/check-architecture.sh

fmt: check-toolchain
	$(CARGO) fmt --all

model-server:
	scripts/model-server.sh start $(MODEL_SIZE)

model-server-stop:
	scripts/model-server.sh stop

# Local state only; caches under ~/.cache/loopgate stay.
clean:
	-scripts/model-server.sh stop
	rm -rf .loopgate
