"""CLI: --version, list, and one-line errors with exit code 2."""

import subprocess
import sys

import pytest

from ampbench import __version__
from ampbench.cli import main


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ampbench", *args], capture_output=True, text=True, timeout=120)


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and __version__ in r.stdout and "torch" in r.stdout


def test_list_shows_every_precision_and_alias(capsys):
    r = run_cli("list")
    assert r.returncode == 0
    for word in ("fp32", "O0", "amp-fp16", "O1", "16-mixed", "master-fp16", "O2", "pure-fp16", "O3", "bf16-true"):
        assert word in r.stdout


@pytest.mark.parametrize("args,expect", [
    (["list", "gpus"], "cannot list 'gpus'"),
    (["--bogus"], "No such option"),
    (["nosuchcommand"], "No such command"),
])
def test_bad_input_is_one_line_exit_2(args, expect):
    r = run_cli(*args)
    assert r.returncode == 2
    assert expect in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_main_exits_2_in_process(capsys):
    with pytest.raises(SystemExit) as e:
        main(["list", "gpus"])
    assert e.value.code == 2
