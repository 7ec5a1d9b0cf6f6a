"""Arbor's trusted check runner: the entry point (see arbor_runner.py).

Kept to a few lines because a script run as `__main__` is compiled from
source every time; the runner proper is imported from precompiled bytecode.
"""

import os
import sys

sys.path[:0] = [os.path.join(os.environ.get("ARBOR_CHECKS", "/verifier"), ".arbor")]

import arbor_runner  # noqa: E402

arbor_runner.start()
