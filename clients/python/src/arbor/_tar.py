"""Tar streams: a local directory to a chunk iterator, and a tar back to a directory.

:func:`tar_chunks` writes the ustar/pax stream itself (headers from :mod:`tarfile`, the file
data read and sent in :data:`CHUNK`-sized pieces), so a large directory is never held in
memory. The server takes plain files, directories and symlinks; anything else (sockets,
FIFOs, devices) is refused here, naming the path, rather than left for the server to refuse.
"""

from __future__ import annotations

import os
import stat
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

CHUNK = 1 << 16
"""Bytes read from a file per chunk of the stream."""

_BLOCK = tarfile.BLOCKSIZE


def _entries(root: Path) -> Iterator[tuple[Path, str]]:
    """``(path, archive name)`` of everything below ``root``, parents before children,
    in a stable (sorted) order; symlinks are entries, never followed."""
    stack = [(root, "")]
    while stack:
        here, prefix = stack.pop()
        with os.scandir(here) as it:
            names = sorted(e.name for e in it)
        dirs = []
        for name in names:
            path = here / name
            arcname = f"{prefix}{name}"
            yield path, arcname
            if path.is_dir() and not path.is_symlink():
                dirs.append((path, f"{arcname}/"))
        stack.extend(reversed(dirs))


def _info(path: Path, arcname: str) -> tarfile.TarInfo:
    st = path.lstat()
    info = tarfile.TarInfo(arcname)
    info.mode = stat.S_IMODE(st.st_mode)
    info.mtime = int(st.st_mtime)
    if stat.S_ISLNK(st.st_mode):
        info.type = tarfile.SYMTYPE
        info.linkname = os.readlink(path)
    elif stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
    elif stat.S_ISREG(st.st_mode):
        info.type = tarfile.REGTYPE
        info.size = st.st_size
    else:
        raise ValueError(f"{path}: only files, directories and symlinks can be sent (not a special file)")
    return info


def tar_chunks(root: str | os.PathLike[str]) -> Iterator[bytes]:
    """The tar stream of the directory ``root`` (its contents, not the directory itself).

    Raises:
        NotADirectoryError: ``root`` is not a directory.
        ValueError: it holds a special file, or a file changed size while it was read.
    """
    base = Path(root)
    if not base.is_dir():
        raise NotADirectoryError(f"{base} is not a directory")
    for path, arcname in _entries(base):
        info = _info(path, arcname)
        yield info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="surrogateescape")
        if info.type != tarfile.REGTYPE:
            continue
        left = info.size
        with path.open("rb") as f:
            while left > 0:
                data = f.read(min(CHUNK, left))
                if not data:
                    raise ValueError(f"{path} shrank while it was being sent")
                left -= len(data)
                yield data
        pad = -info.size % _BLOCK
        if pad:
            yield b"\0" * pad
    yield b"\0" * (2 * _BLOCK)


def extract(fileobj: IO[bytes], dest: str | os.PathLike[str]) -> list[Path]:
    """Unpack a tar stream into ``dest`` (created if needed) with tarfile's ``data`` filter,
    which refuses absolute names, ``..`` and links that leave ``dest``.

    Returns:
        The paths written, in archive order.
    """
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with tarfile.open(fileobj=fileobj, mode="r|*") as tar:
        for member in tar:
            tar.extract(member, out, filter="data")
            written.append(out / member.name)
    return written
