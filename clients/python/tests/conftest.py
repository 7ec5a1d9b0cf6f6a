"""A real ``arbor serve`` for the tests: one per session (two tenants, ``alice`` and ``bob``,
on a Unix socket and TCP), and :func:`start_server` for tests that need their own flags.

The binary is ``$ARBOR_BIN``, else ``target/debug/arbor`` of the repository. Without it the
tests are skipped, unless ``$ARBOR_REQUIRE_SERVER`` is set (as ``make`` does), when they fail.
"""

from __future__ import annotations

import importlib.util
import os
import secrets
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

import arbor
from arbor.local import LocalServer

REPO = Path(__file__).resolve().parents[3]

HAS_HARBOR = sys.version_info >= (3, 12) and importlib.util.find_spec("harbor") is not None
"""Whether Harbor (Python >= 3.12 only) is importable here; where it is not,
tests/test_harbor.py runs tests/with_harbor/ in a 3.12 venv instead."""

collect_ignore_glob = [] if HAS_HARBOR else ["with_harbor/*"]
DEFAULT_BIN = REPO / "target" / "debug" / "arbor"


def server_binary() -> str:
    """The ``arbor`` binary to test, or a skip (a failure under ``$ARBOR_REQUIRE_SERVER``)."""
    binary = Path(os.environ.get("ARBOR_BIN") or DEFAULT_BIN)
    if binary.is_file() and os.access(binary, os.X_OK):
        return str(binary)
    why = f"no arbor binary at {binary} (build it with `cargo build -p arbor`, or set $ARBOR_BIN)"
    if os.environ.get("ARBOR_REQUIRE_SERVER"):
        pytest.fail(why + "; $ARBOR_REQUIRE_SERVER is set", pytrace=False)
    pytest.skip(why)


@dataclass
class Server:
    """A running test server.

    Attributes:
        process: The ``arbor serve`` child.
        home: Its store directory.
        tokens: Tenant name to bearer token (empty: single-tenant).
    """

    process: LocalServer
    home: Path
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        """The Unix socket address."""
        return self.process.url

    @property
    def http_url(self) -> str:
        """The TCP address."""
        assert self.process.http_url is not None, "this server does not listen on TCP"
        return self.process.http_url

    def client(self, tenant: str | None = None, *, tcp: bool = False) -> arbor.Client:
        """A sync client, as ``tenant``."""
        return arbor.Client(self.http_url if tcp else self.url, token=self.tokens.get(tenant or ""))

    def async_client(self, tenant: str | None = None) -> arbor.AsyncClient:
        """An async client, as ``tenant``."""
        return arbor.AsyncClient(self.url, token=self.tokens.get(tenant or ""))


StartServer = Callable[..., Server]


def _start(root: Path, *, tenants: Sequence[str], args: Sequence[str]) -> Server:
    home = root / "home"
    home.mkdir(parents=True)
    tokens = {name: secrets.token_hex(16) for name in tenants}
    tokens_file = None
    if tokens:
        tokens_file = root / "tokens"
        tokens_file.write_text("# test tenants\n" + "".join(f"{n} {t}\n" for n, t in tokens.items()))
    process = LocalServer(
        binary=server_binary(),
        home=home,
        listen="127.0.0.1:0",
        tokens=tokens_file,
        args=args,
    ).start()
    return Server(process=process, home=home, tokens=tokens)


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The session's server: tenants ``alice`` and ``bob``."""
    srv = _start(tmp_path_factory.mktemp("server"), tenants=("alice", "bob"), args=())
    yield srv
    srv.process.stop()


@pytest.fixture
def start_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StartServer]:
    """Start a server of the test's own (``start_server("--ttl", "2")``), stopped after it."""
    started: list[Server] = []

    def start(*args: str, tenants: Sequence[str] = ("alice",)) -> Server:
        srv = _start(tmp_path_factory.mktemp("own-server"), tenants=tenants, args=args)
        started.append(srv)
        return srv

    yield start
    for srv in started:
        srv.process.stop()


@pytest.fixture
def alice(server: Server) -> Iterator[arbor.Client]:
    """Tenant alice's client; sandboxes left open by the test are closed after it."""
    with server.client("alice") as c:
        yield c
        for sb in c.sandboxes():
            sb.close(missing_ok=True)


@pytest.fixture
def bob(server: Server) -> Iterator[arbor.Client]:
    """Tenant bob's client (likewise)."""
    with server.client("bob") as c:
        yield c
        for sb in c.sandboxes():
            sb.close(missing_ok=True)


PROJECT_FILES = {
    "calc.py": "def add(a, b):\n    return a + b\n",
    "test_calc.py": textwrap.dedent(
        """\
        import unittest

        from calc import add


        class TestAdd(unittest.TestCase):
            def test_add(self):
                self.assertEqual(add(2, 3), 5)


        if __name__ == "__main__":
            unittest.main()
        """
    ),
    "data/notes.txt": "first line\nsecond line\n",
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A small Python project directory (a module, its unittest, a data file)."""
    root = tmp_path / "project"
    for rel, text in PROJECT_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def base(alice: arbor.Client, project: Path) -> arbor.Snapshot:
    """The project imported as alice's snapshot."""
    return alice.import_dir(project)
