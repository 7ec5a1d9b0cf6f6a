# Arbor. The two commands for a fresh machine:
#   make demo   import a sample workspace, fork it, run commands in the forks, show the diffs
#   make test   fmt, clippy, the tests (overlay and copy backends), every bundled task validated,
#               the Python package's tests against a real server, and the tests again unprivileged
SHELL := /bin/bash
CARGO ?= cargo
export CARGO
# tch (the trainer) links the libtorch of the project's venv (.ci/prerequisites installs it).
export PATH := $(CURDIR)/.venv/bin:$(PATH)
export LIBTORCH_USE_PYTORCH := 1
# CI builds once from a clean clone: incremental caches only cost disk there.
ifdef CI
export CARGO_INCREMENTAL := 0
endif
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
# pytest for the checks' trusted environment, and the PyPI suites of the
# verifier's compatibility test (.ci/prerequisites fills both).
export ARBOR_VERIFIER_SITE ?= $(abspath $(TARGET_DIR))/verifier-site
export ARBOR_UPSTREAM_SDISTS ?= $(abspath $(TARGET_DIR))/upstream-sdists
# The S3-compatible server the remote tests start (.ci/prerequisites builds it).
export ARBOR_S3_SERVER ?= $(abspath $(TARGET_DIR))/tools/bin/s3s-fs

.PHONY: demo test test-unprivileged fuzz bench bench-llm bench-bundle bench-fleet bench-memory prerequisites experiment experiment-credit

heading = @printf '\n\033[1m==> %s\033[0m\n' "$(1)"

prerequisites:
	@.ci/prerequisites

demo: prerequisites
	$(call heading,the WebAssembly guests (.ci/build-guests))
	@.ci/build-guests
	$(call heading,cargo build --release -p arbor -p arbor-train (and the sandbox helper))
	$(CARGO) build --release -p arbor -p arbor-train -p arbor-runtime --bins
	$(call heading,demo)
	@cli/demo/demo.sh
	$(call heading,demo: the Python quickstart (clients/python/examples/quickstart.py against Client.local()))
	ARBOR_BIN=$(abspath $(TARGET_DIR))/release/arbor .venv/bin/python clients/python/examples/quickstart.py

# The WebAssembly backend (runtime/core/src/wasm) is compiled, linted and
# tested with the rest; .ci/build-guests builds its Python guest first.
WASM := --features arbor-runtime/wasm,arbor-envs/wasm,arbor/wasm,arbor-tests/wasm
# The same for commands that select only some packages (cargo refuses a
# feature of a package it was not asked to build).
WASM_BENCH := --features arbor-runtime/wasm

test: prerequisites
	$(call heading,the WebAssembly guests (.ci/build-guests))
	@.ci/build-guests
	$(call heading,[1/7] cargo fmt --all --check)
	$(CARGO) fmt --all --check
	$(call heading,[2/7] cargo clippy --workspace --all-targets $(WASM) -- -D warnings)
	$(CARGO) clippy --workspace --all-targets $(WASM) -- -D warnings
	$(call heading,[3/7] cargo test --workspace $(WASM) (overlay backend, as $(shell id -un)))
	$(CARGO) test --workspace $(WASM)
	$(call heading,[4/7] cargo test --workspace $(WASM) (copy backend; the trainers' own crates are backend-free))
	ARBOR_BACKEND=copy $(CARGO) test --workspace --exclude arbor-trainer --exclude arbor-train $(WASM)
	$(call heading,[5/7] arbor task validate envs/tasks (every bundled task: gold 1; no-op, mutants, single candidates, canaries 0))
	@$(CARGO) test -q --workspace --no-run $(WASM)
	@home=$$(mktemp -d) && trap 'rm -rf "$$home"' EXIT && $(TARGET_DIR)/debug/arbor --home "$$home" task validate envs/tasks
	$(call heading,[6/7] pytest clients/python (the Python package against a real arbor serve: API, two tenants, bad input, adapters, gym, load test quick, schemathesis, the Ray fleet on 2 local nodes))
	ARBOR_BIN=$(abspath $(TARGET_DIR))/debug/arbor ARBOR_REQUIRE_SERVER=1 .venv/bin/python -m pytest -q clients/python/tests
	$(call heading,arbor links no libtorch (training is in arbor-train): .ci/check-no-torch with the venv hidden)
	@.ci/check-no-torch
	$(call heading,benches once in quick smoke mode (no timing assertions))
	$(CARGO) test --workspace --benches $(WASM)
	@$(MAKE) --no-print-directory test-unprivileged

# The same test binaries once more as an unprivileged user (when run as root).
# TESTS="cli ..." limits it to some test binaries.
test-unprivileged: prerequisites
	$(call heading,[7/7] the test binaries as an unprivileged user)
	@.ci/test-unprivileged

# The LLM policy's throughput at concurrency 1, 8, 32 against a local model
# server (benches/llm_policy.py): target/arbor-bench/llm-policy.{md,json,svg}.
bench-llm: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-runtime --bins
	$(call heading,benches/llm_policy.py (openai: policy, branched tree, local server))
	.venv/bin/python benches/llm_policy.py --arbor $(abspath $(TARGET_DIR))/release/arbor

# Bundle export/import throughput and incremental size (benches/bundle.py):
# target/arbor-bench/bundle.{md,json}.
bench-bundle: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-runtime --bins
	$(call heading,benches/bundle.py (whole arbor processes))
	.venv/bin/python benches/bundle.py --arbor $(abspath $(TARGET_DIR))/release/arbor

# The rollout fleet on a local Ray cluster of 1 and 2 Arbor nodes (benches/fleet.py):
# target/arbor-bench/fleet.{md,json}.
bench-fleet: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-runtime --bins
	$(call heading,benches/fleet.py (arbor.ray on ray.cluster_utils))
	.venv/bin/python benches/fleet.py --arbor $(abspath $(TARGET_DIR))/release/arbor

# Memory per sandbox: one idle sandbox and 64 idle forks (benches/memory.py):
# target/arbor-bench/memory.{md,json}. Machine-wide kernel figures: run it on a quiet machine.
bench-memory: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-runtime --bins
	$(call heading,benches/memory.py (PSS, RSS and kernel memory per sandbox))
	.venv/bin/python benches/memory.py --arbor $(abspath $(TARGET_DIR))/release/arbor

# The cargo-fuzz targets (fuzz/): every decoder of data Arbor does not
# control, each for FUZZ_SECONDS (default 20) from its seeds; not yet part of
# `make test` (the nightly build with coverage adds about 12 minutes).
fuzz:
	$(call heading,fuzz/run (cargo-fuzz, libFuzzer, FUZZ_SECONDS=$${FUZZ_SECONDS:-20} per target))
	@fuzz/run

# Criterion benches (benches/); the README's performance figures come from here.
# compare (the alternatives side by side) writes target/arbor-bench/compare.md,
# compare.json and fork-latency.svg.
bench:
	@.ci/prerequisites --bench
	$(call heading,cargo bench -p arbor-benches -p arbor-trainer -p arbor-runtime $(WASM_BENCH))
	@.ci/build-guests
	$(CARGO) bench -p arbor-benches -p arbor-trainer -p arbor-runtime $(WASM_BENCH)

# Exact ground-truth credit (`arbor credit eval`, full mode: the default
# tasks, budgets 30-480, 50 seeds; about half an hour on 2 cores): writes
# target/credit-eval/report.md, report.json and sign-accuracy.png. A fresh
# store per run (the exploration leaves thousands of snapshots behind).
experiment-credit: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-train -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-train -p arbor-runtime --bins
	$(call heading,arbor credit eval (full))
	@home=$$(mktemp -d) && trap 'rm -rf "$$home"' EXIT && \
		$(TARGET_DIR)/release/arbor --home "$$home" credit eval --out $(TARGET_DIR)/credit-eval

# The training experiment (`arbor train --compare`: grpo, branched and vine
# arms, 5 seeds each at an equal budget, success scored exactly on the
# explored tasks): target/arbor-train/report.md, report.json, learning-curve.png.
experiment: prerequisites
	$(call heading,cargo build --release -p arbor -p arbor-train -p arbor-runtime --bins)
	$(CARGO) build --release -p arbor -p arbor-train -p arbor-runtime --bins
	$(call heading,arbor train --compare (full))
	@home=$$(mktemp -d) && trap 'rm -rf "$$home"' EXIT && \
		$(TARGET_DIR)/release/arbor --home "$$home" train --compare --out $(TARGET_DIR)/arbor-train
