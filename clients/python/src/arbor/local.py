"""Run ``arbor serve`` as a child process (what :meth:`arbor.Client.local` uses).

The server listens on a Unix socket in a private temporary directory (mode 0700), and
optionally on TCP; it is ready when it prints ``arbor serve: listening on ...`` to stderr
and answers ``GET /v1/health``. :meth:`LocalServer.stop` sends SIGTERM (the server closes
every sandbox, then exits) and waits, killing it only if it outlives the wait.
"""

from __future__ import annotations

import atexit
import ctypes
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import httpx

from .errors import ArborError

_READY = re.compile(r"arbor serve: listening on (.+)")
_RUNNING: weakref.WeakSet[LocalServer] = weakref.WeakSet()


@atexit.register
def _stop_all() -> None:
    """At interpreter exit, stop the servers nobody stopped (a client left unclosed)."""
    for server in list(_RUNNING):
        server.stop()


def _term_with_parent() -> None:
    """In the child before exec: SIGTERM when the parent thread dies (Linux only)."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM, 0, 0, 0)


def descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (children, their children, ...), sorted, read from ``/proc``.

    A local server's helpers are below it: a count taken before and after a run shows whether
    any process leaked.
    """
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        # The command may hold spaces and parentheses: the fields follow the last ')'.
        parents[int(entry)] = int(stat[stat.rindex(")") + 2 :].split()[1])
    below, frontier = set(), {pid}
    while frontier:
        frontier = {p for p, parent in parents.items() if parent in frontier} - below
        below |= frontier
    return sorted(below)


def find_binary(binary: str | os.PathLike[str] | None = None) -> str:
    """The ``arbor`` executable: ``binary``, else ``$ARBOR_BIN``, else ``arbor`` on ``PATH``.

    Raises:
        ArborError: none of them names an executable (code ``server_start``).
    """
    candidate = str(binary) if binary is not None else os.environ.get("ARBOR_BIN") or "arbor"
    found = shutil.which(candidate)
    if found is None:
        raise ArborError(
            f"no arbor executable at {candidate!r} (pass binary=, set $ARBOR_BIN or put arbor on PATH)",
            code="server_start",
        )
    return found


class LocalServer:
    """An ``arbor serve`` child process.

    Args:
        binary: The executable (default: ``$ARBOR_BIN``, else ``arbor`` on ``PATH``).
        home: The store directory (default: ``$ARBOR_HOME`` if set, else the CLI's own
            default: no ``--home`` is passed).
        listen: Also listen on this TCP address (``127.0.0.1:0`` picks a free port).
        tokens: A tokens file (``name token`` lines) for multi-tenant mode.
        args: More ``arbor serve`` flags (``["--max-sandboxes", "4"]``, ...).
        env: The child's environment (default: this process's).
        startup_timeout: Seconds to wait for the server to be ready.
        die_with_parent: Have the kernel send the server SIGTERM when the thread that
            started it dies (Linux ``PR_SET_PDEATHSIG``): a Ray node actor killed with its
            node takes its server (and so its sandboxes) with it.
    """

    def __init__(
        self,
        *,
        binary: str | os.PathLike[str] | None = None,
        home: str | os.PathLike[str] | None = None,
        listen: str | None = None,
        tokens: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: dict[str, str] | None = None,
        startup_timeout: float = 60.0,
        die_with_parent: bool = False,
    ) -> None:
        self.binary = find_binary(binary)
        home = home if home is not None else os.environ.get("ARBOR_HOME") or None
        self.home = None if home is None else Path(home)
        self._listen = listen
        self._tokens = tokens
        self._args = list(args)
        self._env = env
        self._startup_timeout = startup_timeout
        self._die_with_parent = die_with_parent
        self._dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self.socket: Path | None = None
        self.http_url: str | None = None

    @property
    def url(self) -> str:
        """The ``unix://`` address of the server's socket."""
        if self.socket is None:
            raise ArborError("the server is not running", code="server_start")
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int:
        """The server's process id."""
        if self._proc is None:
            raise ArborError("the server is not running", code="server_start")
        return self._proc.pid

    @property
    def log_path(self) -> Path:
        """The file the server's stderr goes to."""
        if self._dir is None:
            raise ArborError("the server is not running", code="server_start")
        return self._dir / "serve.log"

    def log(self) -> str:
        """What the server has written to stderr so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except (OSError, ArborError):
            return ""

    def argv(self) -> list[str]:
        """The command line the server runs with."""
        if self.socket is None:
            raise ArborError("the server is not running", code="server_start")
        argv = [self.binary]
        if self.home is not None:
            argv += ["--home", str(self.home)]
        argv += ["serve", "--unix", str(self.socket)]
        if self._listen is not None:
            argv += ["--listen", self._listen]
        if self._tokens is not None:
            argv += ["--tokens", str(self._tokens)]
        return argv + self._args

    def start(self) -> LocalServer:
        """Start the server and wait until it answers ``GET /v1/health``.

        Raises:
            ArborError: it exited, or was not ready within ``startup_timeout`` (code
                ``server_start``; the message ends with its stderr).
        """
        if self._proc is not None:
            return self
        self._dir = Path(tempfile.mkdtemp(prefix="arbor-serve-"))
        self.socket = self._dir / "arbor.sock"
        with self.log_path.open("wb") as log:
            self._proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self._env,
                preexec_fn=_term_with_parent if self._die_with_parent else None,
            )
        _RUNNING.add(self)
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._proc is not None and self.socket is not None
        deadline = time.monotonic() + self._startup_timeout
        transport = httpx.HTTPTransport(uds=str(self.socket))
        with httpx.Client(transport=transport, base_url="http://arbor", timeout=5.0) as http:
            while True:
                if self._proc.poll() is not None:
                    raise ArborError(
                        f"arbor serve exited with {self._proc.returncode}: {self.log().strip()}",
                        code="server_start",
                    )
                ready = _READY.search(self.log())
                if ready and self.socket.exists():
                    try:
                        if http.get("/v1/health").status_code == 200:
                            self.http_url = next(
                                (a.strip() for a in ready.group(1).split(",") if a.strip().startswith("http")),
                                None,
                            )
                            return
                    except httpx.TransportError:
                        pass
                if time.monotonic() > deadline:
                    raise ArborError(
                        f"arbor serve was not ready within {self._startup_timeout:.0f}s: {self.log().strip()}",
                        code="server_start",
                    )
                time.sleep(0.05)

    def stop(self, timeout: float = 30.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout`` seconds) and remove its
        temporary directory. Idempotent.

        Returns:
            Its exit status, or ``None`` if it was not running.
        """
        proc, self._proc = self._proc, None
        _RUNNING.discard(self)
        code = None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            code = proc.returncode
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
        self.socket = None
        return code

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
