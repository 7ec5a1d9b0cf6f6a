"""What :class:`arbor.Client` and :class:`arbor.AsyncClient` share: the address, the token,
the timeouts, and the translation of httpx's failures into :mod:`arbor.errors`."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import httpx

from . import _api
from .errors import ArborError, Timeout

DEFAULT_TIMEOUT_S = 300.0
"""The client's default wait for an answer (connect: at most 10 s)."""


class ClientConfig:
    """The connection settings of a client.

    Args:
        url: ``http://HOST:PORT``, ``https://...`` or ``unix:///path/to.sock``; default
            ``$ARBOR_URL``.
        token: The bearer token (multi-tenant servers); default ``$ARBOR_TOKEN`` if set.
        timeout: Seconds to wait for an answer (an exec waits its own timeout plus 30 s).
    """

    def __init__(self, url: str | None, token: str | None, timeout: float) -> None:
        url = url or os.environ.get("ARBOR_URL")
        if not url:
            raise ValueError("no server address: pass a URL, set $ARBOR_URL, or use Client.local()")
        self.url = url
        self.base_url, self.uds = _api.parse_base_url(url)
        token = token if token is not None else os.environ.get("ARBOR_TOKEN") or None
        self.headers = {"Authorization": f"Bearer {token}"} if token else {}
        self.timeout = httpx.Timeout(timeout, connect=min(timeout, 10.0))

    def timeout_for(self, req: _api.Req) -> httpx.Timeout:
        """The httpx timeout of one request (its own read timeout, if it has one)."""
        if isinstance(req.read_timeout, _api._Default):
            return self.timeout
        return httpx.Timeout(
            connect=self.timeout.connect,
            read=req.read_timeout,
            write=self.timeout.write,
            pool=self.timeout.pool,
        )


@contextmanager
def translate_errors(req: _api.Req) -> Iterator[None]:
    """Raise httpx's client-side failures as :class:`arbor.Timeout` or :class:`ArborError`."""
    try:
        yield
    except httpx.TimeoutException as e:
        raise Timeout(f"{req.method} {req.path}: {type(e).__name__}: {e}", code="timeout") from e
    except httpx.TransportError as e:
        raise ArborError(f"{req.method} {req.path}: {type(e).__name__}: {e}", code="transport") from e
