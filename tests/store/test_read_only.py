"""A healthy store on a read-only filesystem (or a file this user cannot write): readers read it (opened read-only,
immutable), writers refuse in one line before any work; "damaged" is said only of a real integrity failure."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    """A store written by a run, then made read-only: a read-only bind mount where this user may mount (root), else
    the file and its directory without write permission (another user); skipped where neither can be done."""
    src = tmp_path / "src"
    src.mkdir()
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16",
                       "--steps", "2", "--warmup", "1", "--no-isolate", "--no-report", "--db", str(src / "r.db"))
    assert code == 0, err
    cli("predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32",
        "--db", str(src / "r.db"))
    mnt = tmp_path / "ro"
    mnt.mkdir()
    mounted = os.geteuid() == 0 and subprocess.run(["mount", "--bind", str(src), str(mnt)], capture_output=True).returncode == 0
    if mounted and subprocess.run(["mount", "-o", "remount,ro,bind", str(mnt)], capture_output=True).returncode == 0:
        try:
            yield mnt / "r.db"
        finally:
            gone = subprocess.run(["umount", str(mnt)], capture_output=True, text=True)
        assert gone.returncode == 0, f"the store is still held open by a command that ended: {gone.stderr}"
        return
    if mounted:
        subprocess.run(["umount", str(mnt)], capture_output=True)
    if os.geteuid() == 0:
        pytest.skip("cannot make a read-only filesystem here (root, and mount refused)")
    shutil.copy(src / "r.db", mnt / "r.db")
    (mnt / "r.db").chmod(0o444)
    mnt.chmod(0o555)
    try:
        yield mnt / "r.db"
    finally:
        mnt.chmod(0o755)


def test_readers_read_a_read_only_store(read_only_store: Path) -> None:
    for args in (["results"], ["results", "--format", "json"], ["report", "--format", "md", "--out", "-"],
                 ["compare"], ["export", "--out", "-"]):
        code, out, err = cli(*args, "--db", str(read_only_store))
        assert code == 0 and "damaged" not in err, (args, err)
        assert out.strip(), args
    code, out, err = cli("report", "--db", str(read_only_store))  # (the default place is beside the store)
    assert code == 2 and "is read-only, and the report goes beside it by default: give --out" in err


def test_writers_say_the_store_is_read_only_in_one_line_before_any_work(read_only_store: Path) -> None:
    for args in (["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--resume"],
                 ["predict", "--gpu", "t4", "--workloads", "tabular-mlp", "--preset", "tiny"]):
        code, out, err = cli(*args, "--db", str(read_only_store))
        assert code == 2 and "is read-only" in err and "damaged" not in err, (args, err)
        assert len(err.strip().splitlines()) == 1 and not out.strip(), (args, out)


def test_damaged_is_said_of_a_real_integrity_failure_only(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                       "--warmup", "1", "--no-isolate", "--no-report", "--db", str(db))
    assert code == 0, err
    data = bytearray(db.read_bytes())
    page = 4096
    data[page: page + 600] = b"\xff" * 600  # (the file's header valid, its second page's b-tree header damaged)
    db.write_bytes(bytes(data))
    for p in tmp_path.glob("r.db-*"):
        p.unlink()
    code, _, err = cli("results", "--db", str(db))
    assert code == 2 and ("damaged" in err or "not a usable" in err), err


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="no /proc/self/fd to list open files")
def test_a_command_closes_the_store_it_opened(tmp_path: Path) -> None:
    """Every command run in a process that goes on (the Python API, a notebook) closes its store, its write-ahead log
    and shared memory when it ends, ok or not: nothing holds the file (an unmount of a read-only mount was refused
    as busy)."""
    db = tmp_path / "r.db"

    def held() -> list[str]:
        out = []
        for fd in Path("/proc/self/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith(str(db)):
                out.append(target)
        return out

    code, _, err = cli("run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "2",
                       "--warmup", "1", "--no-isolate", "--no-report", "--db", str(db))
    assert code == 0 and not held(), (err, held())
    for args in (["results"], ["compare"], ["export", "--out", "-"], ["report", "--format", "md", "--out", "-"],
                 ["results", "--run", "no-such-run"]):
        cli(*args, "--db", str(db))
        assert not held(), (args, held())
