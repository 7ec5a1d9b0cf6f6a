"""The errors of the Arbor client.

Every error the server sends is a JSON body ``{"error": {"code": CODE, "message": TEXT}}``
with an HTTP status (``server/API.md``, "Errors"); :func:`error_from_response` turns it into
the matching subclass of :class:`ArborError`. Client-side failures (an httpx timeout, a
connection that could not be made, a local server that would not start) are errors too,
with ``status`` ``None``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping


class ArborError(Exception):
    """Base class of every error this package raises for the server's answers.

    Attributes:
        status: The HTTP status, or ``None`` for a client-side failure.
        code: The server's stable code (``not_found``, ``limit_exceeded``, ...), or a
            client-side one (``timeout``, ``transport``, ``server_start``, ``protocol``).
        message: The server's ``error.message`` (or the client-side reason).
    """

    def __init__(self, message: str, *, status: int | None = None, code: str = "error") -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __str__(self) -> str:
        where = f"{self.status} " if self.status is not None else ""
        return f"{where}{self.code}: {self.message}"


class BadRequest(ArborError):
    """400 ``bad_request``, 413 ``payload_too_large`` or 415 ``unsupported_media_type``."""


class Unauthorized(ArborError):
    """401: a missing or unknown bearer token."""


class NotFound(ArborError):
    """404: no such object (or another tenant's), an expired sandbox, an unknown route."""


class Conflict(ArborError):
    """409: the object's state refuses the operation."""


class LimitExceeded(ArborError):
    """429: a tenant's cap or creation rate.

    Attributes:
        retry_after: Seconds after which a retry may succeed (from the server's
            ``x-arbor-retry-after``, else ``Retry-After``), or ``None`` if it sent neither.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = 429,
        code: str = "limit_exceeded",
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, status=status, code=code)
        self.retry_after = retry_after


class Timeout(ArborError):
    """The client gave up waiting (an httpx connect, read, write or pool timeout)."""


class ServerError(ArborError):
    """5xx: a runtime fault (500 ``internal``) or a server shutting down (503)."""


_BY_STATUS: dict[int, type[ArborError]] = {
    400: BadRequest,
    401: Unauthorized,
    404: NotFound,
    409: Conflict,
    413: BadRequest,
    415: BadRequest,
}


def _retry_after(headers: Mapping[str, str]) -> float | None:
    for name in ("x-arbor-retry-after", "retry-after"):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return float(value)
        except ValueError:
            continue
    return None


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> ArborError:
    """The error for a non-success answer.

    Args:
        status: The HTTP status.
        headers: The response headers (case-insensitive mapping).
        body: The response body, ideally ``{"error": {"code", "message"}}``.

    Returns:
        The matching :class:`ArborError` subclass; a body that is not the API's error shape
        keeps its text as the message and the code ``http_<status>``.
    """
    code, message = f"http_{status}", body.decode("utf-8", "replace").strip()
    try:
        detail = json.loads(body)["error"]
        code, message = str(detail["code"]), str(detail["message"])
    except (ValueError, KeyError, TypeError):
        pass
    if status == 429:
        return LimitExceeded(message, status=status, code=code, retry_after=_retry_after(headers))
    if status >= 500:
        return ServerError(message, status=status, code=code)
    return _BY_STATUS.get(status, ArborError)(message, status=status, code=code)
