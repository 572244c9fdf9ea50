"""Where ampbench writes, checked before any work starts: a benchmark that runs for an hour and then
cannot write its JSON (the path is a directory, the folder is read-only) has lost the hour.

Writers themselves write a ``.tmp`` next to the target and rename it (atomic), so a kill mid-write
never leaves a half-written file where a good one was.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ampbench.errors import AmpbenchError

STDOUT = "-"


def _creatable_dir(d: Path, option: str, path: Path) -> None:
    if d.exists() and not d.is_dir():
        raise AmpbenchError(f"{option} {path}: {d} is a file, not a directory")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise AmpbenchError(f"{option} {path}: cannot create the directory {d} ({e.strerror or e})") from None
    try:  # (a file made and dropped, not os.access: root passes that on a read-only mount or in /proc)
        with tempfile.TemporaryFile(dir=d):
            pass
    except OSError as e:
        raise AmpbenchError(f"{option} {path}: the directory {d} is not writable ({e.strerror or e})") from None


def check_output_file(path: Path | None, option: str, example: str = "out.json") -> None:
    """``path`` can be written as a file (its directory is created if missing); ``-`` (stdout) passes."""
    if path is None or str(path) == STDOUT:
        return
    if path.is_dir():
        raise AmpbenchError(f"{option} {path} is a directory: give a file path, e.g. {path / example}")
    _creatable_dir(path.parent, option, path)
    if path.exists() and not os.access(path, os.W_OK):
        raise AmpbenchError(f"{option} {path}: the file exists and is not writable")


def check_output_dir(path: Path | None, option: str, holds: str) -> None:
    """``path`` is (or can be created as) a writable directory."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise AmpbenchError(f"{option} {path} is a file: give a directory ({holds} is written inside it)")
    _creatable_dir(path, option, path)


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a ``.tmp`` beside it, renamed over it (atomic on POSIX)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def check_data_dir(path: str | Path) -> Path:
    """``--data-dir`` names a directory (the readers find their files in it by name); a file or a missing path is one
    line saying which, and for a file what to give instead (a CSV given as itself read "is not a directory")."""
    p = Path(path)
    if p.is_dir():
        return p
    if p.is_file():
        raise AmpbenchError(f"--data-dir {p} is a file: give the directory that holds it ({p.parent or '.'}/; its "
                            "readers find train.csv [test.csv] or a single .csv, MNIST/CIFAR files, images/ masks/ "
                            "there by name)")
    raise AmpbenchError(f"--data-dir {p} does not exist")
