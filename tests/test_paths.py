"""Where ampbench writes, checked before any work: a directory no file can be made in is one line, found by making
(and dropping) a file there -- not by permission bits, which root passes on a read-only mount or in /proc."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ampbench.errors import AmpbenchError
from ampbench.paths import check_output_dir, check_output_file


def test_a_writable_place_passes_and_is_left_as_it_was(tmp_path: Path) -> None:
    check_output_file(tmp_path / "new" / "out.json", "--json")
    check_output_dir(tmp_path / "reports", "--out-dir", "the report")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["new", "reports"]  # (the probe file is gone)
    check_output_file(Path("-"), "--out")  # (stdout)


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_directory_no_file_can_be_made_in_is_one_line_even_for_root() -> None:
    with pytest.raises(AmpbenchError, match=r"--json /proc/x.json: the directory /proc is not writable"):
        check_output_file(Path("/proc/x.json"), "--json")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes through permission bits")
def test_a_read_only_directory_is_one_line(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        with pytest.raises(AmpbenchError, match="is not writable"):
            check_output_file(ro / "x.json", "--json")
    finally:
        ro.chmod(0o700)


def test_a_directory_given_for_a_file_says_what_to_give(tmp_path: Path) -> None:
    with pytest.raises(AmpbenchError, match=f"--json {tmp_path} is a directory: give a file path"):
        check_output_file(tmp_path, "--json")
    (tmp_path / "f").write_text("x")
    with pytest.raises(AmpbenchError, match="is a file, not a directory"):
        check_output_file(tmp_path / "f" / "x.json", "--json")
