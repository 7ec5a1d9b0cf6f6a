"""The Harbor adapter's tests (tests/with_harbor/) where Harbor cannot be imported: every Harbor
release needs Python >= 3.12 and the project's venv is 3.11, so they run in a 3.12 venv
(``$ARBOR_HARBOR_PYTHON``, default ``.venv-harbor/bin/python``; README.md says how to make it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HAS_HARBOR, server_binary

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(HAS_HARBOR, reason="harbor is importable here: tests/with_harbor/ runs directly")


def test_harbor_adapter_in_a_python_312_venv() -> None:
    binary = server_binary()
    python = Path(os.environ.get("ARBOR_HARBOR_PYTHON") or ROOT / ".venv-harbor" / "bin" / "python")
    if not python.exists():
        why = f"no Python 3.12 venv with harbor at {python} (see README.md, or set $ARBOR_HARBOR_PYTHON)"
        if os.environ.get("ARBOR_REQUIRE_SERVER"):
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    proc = subprocess.run(
        [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/with_harbor"],
        cwd=ROOT,
        # This checkout's package, whatever the venv has installed.
        env={
            **os.environ,
            "ARBOR_BIN": binary,
            "ARBOR_REQUIRE_SERVER": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")])),
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    sys.stdout.write(proc.stdout[-5000:])
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
