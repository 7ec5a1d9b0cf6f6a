#!/usr/bin/env python3
"""Find each swe-local instance's FAIL_TO_PASS and PASS_TO_PASS by running its
hidden test files through Arbor, in sandboxes on the task's image, on the
unfixed code (a no-op) and on the gold fix; never on the host.

    python3 envs/swe-local/discover_ids.py ARBOR TASKS_DIR > ids.json

TASKS_DIR holds tasks imported by `arbor task import-swe` (their id lists are
ignored: every test of the check files is run). FAIL_TO_PASS: the tests that
fail on the no-op and pass with the fix; PASS_TO_PASS: the tests that pass on
both. A test that fails with the fix is in neither list (stderr says which).
The output is the shape of test_ids.json (keyed by project name).
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib


def verdict(arbor, home, suite, task_id, actions):
    """The per-check results of running `actions` on the task."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(actions, f)
    try:
        p = subprocess.run(
            [arbor, "--json", "--home", home, "task", "--tasks", suite, "run", task_id,
             "--actions", f.name],
            capture_output=True, text=True, check=False,
        )
    finally:
        os.unlink(f.name)
    try:
        checks = json.loads(p.stdout)["verdict"]["task"]["checks"]
    except (ValueError, KeyError) as e:
        sys.exit(f"{task_id}: arbor task run gave no verdict ({e}): {p.stdout[-2000:]} {p.stderr[-2000:]}")
    return {c["id"]: c["passed"] for c in checks}, checks


def main():
    arbor, tasks = sys.argv[1], sys.argv[2]
    home = tempfile.mkdtemp(prefix="swe-ids-home-")
    out = {}
    try:
        for task_id in sorted(os.listdir(tasks)):
            src = os.path.join(tasks, task_id, "task.toml")
            if not task_id.startswith("swe-local-") or not os.path.isfile(src):
                continue
            suite = tempfile.mkdtemp(prefix="swe-ids-")
            try:
                shutil.copytree(os.path.join(tasks, task_id), os.path.join(suite, task_id))
                toml_path = os.path.join(suite, task_id, "task.toml")
                text = open(toml_path).read()
                # Without id lists, the checks are every test of the check files.
                text = re.sub(r"fail_to_pass = \[.*?\]\n", "", text, flags=re.S)
                text = re.sub(r"pass_to_pass = \[.*?\]\n", "", text, flags=re.S)
                open(toml_path, "w").write(text)
                with open(os.path.join(suite, "manifest.toml"), "w") as m:
                    m.write(f'[splits]\nswe-local = ["{task_id}"]\n')
                gold = tomllib.loads(text)["gold"]
                before, _ = verdict(arbor, home, suite, task_id, [{"exec": "true"}])
                after, checks = verdict(arbor, home, suite, task_id, gold)
            finally:
                shutil.rmtree(suite, ignore_errors=True)
            for c in checks:
                if not c["passed"]:
                    print(f"{task_id}: fails with the fix, left out: {c['id']}: {c['detail'][:160]}",
                          file=sys.stderr)
            name = task_id.removeprefix("swe-local-").removesuffix("-1")
            out[name] = {
                "FAIL_TO_PASS": sorted(i for i, ok in after.items() if ok and not before.get(i)),
                "PASS_TO_PASS": sorted(i for i, ok in after.items() if ok and before.get(i)),
            }
            print(f"{task_id}: {len(out[name]['FAIL_TO_PASS'])} fail-to-pass, "
                  f"{len(out[name]['PASS_TO_PASS'])} pass-to-pass", file=sys.stderr)
    finally:
        shutil.rmtree(home, ignore_errors=True)
    json.dump(out, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
