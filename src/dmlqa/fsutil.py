"""Small file-system helpers shared by the stages: atomic writes readers may be reading, and sizes
as reasons show them (the fetcher's download cap and the local-document cap must read alike)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write_text(path: Path, data: str) -> None:
    """Write via a temporary file in the same folder and ``os.replace``: readers see old or new, never half.

    The file keeps its permissions (a new one gets 0644: mkstemp's 0600 would hide a shared home's
    files from other readers), and the data is fsynced before the rename.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(tmp, mode)
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


_KIB = 1024
_MIB = 1024 * 1024


def format_size(n: int) -> str:
    """``50 MB``, ``1.5 MB``, ``10 KB``, ``900 bytes``: sizes in reasons must read at a glance."""
    if n >= _MIB:
        return f"{n // _MIB} MB" if n % _MIB == 0 else f"{n / _MIB:.1f} MB"
    if n >= _KIB:
        return f"{n // _KIB} KB" if n % _KIB == 0 else f"{n / _KIB:.1f} KB"
    return f"{n} bytes"
