"""Schemathesis fuzzes every route of the server's own OpenAPI document; no answer may be a
5xx (``--checks not_a_server_error``). It runs on a server of its own (a low sandbox cap, so
fuzzed forks stay small), with a real snapshot and sandbox as the path parameters so the
routes' logic is reached, not only their 404s. Bounded to a few minutes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import StartServer

HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


def test_no_server_errors(start_server: StartServer, project: Path, tmp_path: Path) -> None:
    srv = start_server("--max-sandboxes", "4", "--ttl", "300")
    with srv.client("alice") as c:
        snap = c.import_dir(project, tag="fuzz-base")
        sandbox = c.sandbox(snap)
    config = tmp_path / "schemathesis.toml"
    config.write_text(f'[parameters]\n"path.ref" = "{snap.id}"\n"path.id" = "{sandbox.id}"\n"path.tag" = "fuzzed"\n')
    cli = Path(sys.executable).with_name("schemathesis")
    argv = [
        str(cli),
        "--config-file",
        str(config),
        "run",
        f"{srv.http_url}/v1/openapi.json",
        "--checks",
        "not_a_server_error",
        "--max-examples",
        "20",
        "-H",
        f"Authorization: Bearer {srv.tokens['alice']}",
        "--workers",
        "1",
        "--request-timeout",
        "60",
        "--no-color",
    ]
    if seed := os.environ.get("ARBOR_SCHEMATHESIS_SEED"):
        argv += ["--seed", seed]
    proc = subprocess.run(
        argv,
        cwd=tmp_path,
        env={**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    print(proc.stdout[-6000:])
    assert proc.returncode == 0, proc.stdout[-8000:] + proc.stderr[-2000:]
    with srv.client("alice") as c:
        assert c.health().status == "ok"
