# Arbor. The two commands for a fresh machine:
#   make demo   import a sample workspace, fork it, run commands in the forks, show the diffs
#   make test   fmt, clippy, the tests (overlay and copy backends), and again unprivileged
SHELL := /bin/bash
CARGO ?= cargo
export CARGO

.PHONY: demo test test-unprivileged bench prerequisites

heading = @printf '\n\033[1m==> %s\033[0m\n' "$(1)"

prerequisites:
	@.ci/prerequisites

demo: prerequisites
	$(call heading,cargo build --release -p arbor)
	$(CARGO) build --release -p arbor
	$(call heading,demo)
	@cli/demo/demo.sh

test: prerequisites
	$(call heading,[1/5] cargo fmt --all --check)
	$(CARGO) fmt --all --check
	$(call heading,[2/5] cargo clippy --workspace --all-targets -- -D warnings)
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(call heading,[3/5] cargo test --workspace (overlay backend, as $(shell id -un)))
	$(CARGO) test --workspace
	$(call heading,[4/5] cargo test --workspace (copy backend))
	ARBOR_BACKEND=copy $(CARGO) test --workspace
	$(call heading,benches once in quick smoke mode (no timing assertions))
	$(CARGO) test -p arbor-benches --benches
	@$(MAKE) --no-print-directory test-unprivileged

# The same test binaries once more as an unprivileged user (when run as root).
# TESTS="cli ..." limits it to some test binaries.
test-unprivileged: prerequisites
	$(call heading,[5/5] the test binaries as an unprivileged user)
	@.ci/test-unprivileged

# Criterion benches (benches/); the README's performance figures come from here.
bench: prerequisites
	$(call heading,cargo bench -p arbor-benches)
	$(CARGO) bench -p arbor-benches
