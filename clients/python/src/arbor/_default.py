"""The client an adapter uses when it is given none."""

from __future__ import annotations

import os

from .client import Client


def default_client() -> Client:
    """``Client($ARBOR_URL, token=$ARBOR_TOKEN)`` if ``$ARBOR_URL`` is set, else
    :meth:`Client.local` (a private server; the caller owns it and must close it)."""
    if os.environ.get("ARBOR_URL"):
        return Client()
    return Client.local()
