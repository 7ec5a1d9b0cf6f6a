"""A deliberately weak check runner: the positive control of the attack
catalogue (tests/tests/attacks.rs). Never grade with it.

It is what a naive harness does: the hidden tests and the code under test
share one interpreter (unittest or pytest run in-process, pytest without
output capture, with the workspace on sys.path); the nonce stays in the environment and in a local variable;
results are kept in a module-level list, reported per test as they happen
(`ARBOR-PARTIAL`) and at the end in one line (`ARBOR-RESULT <nonce> <json>`),
formatted with a `json` imported when needed. The judge beside it
(`weak_reward` in attacks.rs) is as naive: any result line with the nonce
whose tests all passed (or were skipped) scores 1; without one (the runner
was killed or timed out), the partial reports score 1 when none failed.

Run as `python3 -I -S -B /verifier/weak_runner.py unittest|pytest` in a fork
of the final state, with the checks at /verifier/checks (and pytest at
/verifier/site).
"""
import os
import sys
import unittest

RESULTS = []


def record(test_id, outcome):
    RESULTS.append({"id": test_id, "outcome": outcome, "detail": ""})
    print(f"ARBOR-PARTIAL {os.environ['ARBOR_NONCE']} {test_id} {outcome}", flush=True)


class Result(unittest.TestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        record(test.id(), "pass")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        record(test.id(), "fail")

    def addError(self, test, err):
        super().addError(test, err)
        record(test.id(), "error")

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        record(test.id(), "skip")


class Plugin:
    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and not report.passed):
            if report.passed:
                outcome = "pass"
            elif report.skipped:
                outcome = "skip"
            else:
                outcome = "fail"
            record(report.nodeid, outcome)


def emit(nonce):
    import json

    print(f"ARBOR-RESULT {nonce} " + json.dumps({"tests": RESULTS}), flush=True)


def main(mode):
    nonce = os.environ["ARBOR_NONCE"]
    os.chdir("/workspace")
    sys.path[:0] = ["/verifier/checks", "/workspace"]
    if mode == "pytest":
        sys.path.insert(0, "/verifier/site")
        import pytest

        pytest.main(
            ["-q", "-s", "-p", "no:cacheprovider", "--rootdir", "/verifier/checks",
             "/verifier/checks"],
            plugins=[Plugin()],
        )
    else:
        suite = unittest.defaultTestLoader.discover(
            "/verifier/checks", top_level_dir="/verifier/checks"
        )
        suite.run(Result())
    emit(nonce)


main(sys.argv[1])
