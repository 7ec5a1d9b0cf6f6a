"""The upstream baseline of the compatibility test (tests/tests/upstream_compat.rs):
the checks run as upstream runs them, `python3 -m unittest` discovery or plain
`pytest`, in one interpreter with the code under test, in a sandbox. Per test
id, the outcome (pass, fail, error, skip, xfail, xpass) goes to the JSON file
named by the second argument.

    python3 -B /verifier/baseline.py unittest|pytest OUT.json ROOT...
"""
import io
import json
import os
import sys
import unittest

CHECKS = "/verifier/checks"
OUT = {}


class Result(unittest.TestResult):
    def addSuccess(self, test):
        OUT.setdefault(test.id(), "pass")

    def addFailure(self, test, err):
        OUT[test.id()] = "fail"

    def addError(self, test, err):
        # setUpClass/setUpModule errors come as a _ErrorHolder
        description = getattr(test, "description", None)
        OUT["fixture:" + description if description else test.id()] = "error"

    def addSkip(self, test, reason):
        OUT[test.id()] = "skip"

    def addExpectedFailure(self, test, err):
        OUT[test.id()] = "xfail"

    def addUnexpectedSuccess(self, test):
        OUT[test.id()] = "xpass"

    def addSubTest(self, test, subtest, err):
        if err is not None:
            OUT[test.id()] = "fail" if issubclass(err[0], test.failureException) else "error"


class Plugin:
    def pytest_runtest_logreport(self, report):
        nodeid = report.nodeid
        wasxfail = hasattr(report, "wasxfail")
        if report.when == "setup":
            if report.failed:
                OUT[nodeid] = "error"
            elif report.skipped:
                OUT[nodeid] = "xfail" if wasxfail else "skip"
        elif report.when == "call":
            if wasxfail:
                OUT[nodeid] = "xfail" if report.skipped else "xpass"
            elif report.passed:
                OUT[nodeid] = "pass"
            elif report.failed:
                OUT[nodeid] = "fail"
            else:
                OUT[nodeid] = "skip"
        elif report.when == "teardown" and report.failed:
            OUT[nodeid] = "error"


def main():
    mode, out = sys.argv[1], sys.argv[2]
    roots = [os.path.join("/workspace", r) for r in sys.argv[3:]] or ["/workspace"]
    os.chdir("/workspace")
    if mode == "pytest":
        sys.path[:0] = ["/verifier/site"] + roots
        import pytest
        pytest.main(["-q", "-p", "no:cacheprovider", "--rootdir", CHECKS, CHECKS], plugins=[Plugin()])
    else:
        sys.path[:0] = [CHECKS] + roots
        suite = unittest.TestLoader().discover(CHECKS, pattern="test*.py", top_level_dir=CHECKS)
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = io.StringIO(), io.StringIO()
        try:
            suite.run(Result())
        finally:
            sys.stdout, sys.stderr = saved
    with open(out, "w") as f:
        json.dump(OUT, f)


main()
