"""CLI: --version, list, and one-line errors with exit code 2."""

import dataclasses
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


def test_list_at_80_columns_shows_every_word_of_every_mode_and_workload(monkeypatch):
    """At 80 columns (a pipe, a small terminal) the tables stack, led by the name: no column squeezed to "…", no line
    over 80, every summary and workload description whole once its wrapping is undone."""
    from ampbench import seam
    from ampbench.cli import core
    from ampbench.precision import aliases_of, get, list_precisions
    from tests.conftest import cli

    monkeypatch.setattr(core.console, "_width", 80)
    code, out, _ = cli("list", "precisions")
    code2, out2, _ = cli("list", "workloads")
    assert code == code2 == 0
    for text in (out, out2):
        assert "…" not in text and max(len(line) for line in text.splitlines()) <= 80

    def unwrapped(text: str) -> str:  # every word in the tables' cells (a wrapped cell's words, line by line)
        return " ".join(w for line in text.splitlines() for w in line.replace("│", " ").split())

    words = unwrapped(out).split()
    for name in list_precisions():
        for w in (*get(name).summary.split(), *", ".join(aliases_of(name)).split()):
            assert w in words, (name, w)
    words2 = unwrapped(out2).split()
    for entry in (w for fw in seam.all_frameworks() for w in fw.workloads()):
        assert entry.name in words2
        assert all(w in words2 for w in entry.description.split() if len(w) <= 24), entry.name
    assert "ampbench[hf])" in words2  # (a cell's text, not markup)


def test_list_shows_a_refusal_with_brackets_as_written(monkeypatch):
    """Where torchao is missing the fp8 modes say "pip install 'ampbench[fp8]'": text, not a markup tag."""
    import ampbench.precision as precision
    from ampbench.precision.support import Support
    from tests.conftest import cli

    real = precision.supported
    monkeypatch.setattr(precision, "supported", lambda name, device="cpu": Support(
        False, "torchao is not installed; pip install 'ampbench[fp8]' (torchao)") if name.startswith("fp8") else
        real(name, device))
    code, out, _ = cli("list", "precisions")
    assert code == 0 and "'ampbench[fp8]'" in out, out


def test_list_says_a_reason_several_modes_share_once(monkeypatch):
    """A CPU without AVX512-FP16 had "fp16 math is emulated and slower than fp32 here" under each fp16 mode, and the
    fp8 note under each fp8 mode: each is a numbered note below the table, the modes point at it."""
    import ampbench.precision as precision
    from ampbench.precision.support import Support
    from tests.conftest import cli

    real = precision.supported

    def fake(name: str, device: str = "cpu") -> Support:
        if "fp16" in name:
            return Support(True, note="fp16 math is emulated here")
        return Support(False, "no fp8 here") if name.startswith("fp8") else real(name, device)

    monkeypatch.setattr(precision, "supported", fake)
    code, out, _ = cli("list", "precisions")
    assert code == 0
    assert out.count("fp16 math is emulated here") == 1 and "[1] fp16 math is emulated here" in out
    assert out.count("no fp8 here") == 1 and "[2] no fp8 here" in out
    assert out.count("ok (cpu) [1]") == 3 and out.count("no [2]") == 3


@pytest.mark.parametrize("args,expect", [
    (["list", "gpu"], "cannot list 'gpu': choose one of all, precisions, workloads, gpus"),
    (["--bogus"], "No such option"),
    (["nosuchcommand"], "No such command"),
])
def test_bad_input_is_one_line_exit_2(args, expect):
    r = run_cli(*args)
    assert r.returncode == 2
    assert expect in r.stderr
    assert "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("args,expect", [
    # (click suggested "--tensorboard" for train's --workload: its workload is an argument, without a flag)
    (["train", "--workload", "mnist-cnn"], "No such option '--workload': workload is train's argument, given without "
                                           "a flag: ampbench train WORKLOAD [OPTIONS] (see: ampbench train --help)"),
    (["diagnose", "--workloads", "x"], "No such option '--workloads': workload is diagnose's argument"),
    (["list", "--what", "modes"], "No such option '--what': what is list's argument"),
    # (run's suggestion was "one of: '--tensorboard', '--workloads'": the plural is the one)
    (["run", "--workload", "mnist-cnn"], "No such option '--workload'. Did you mean '--workloads'? (see: ampbench run"),
    (["run", "--precison", "fp32"], "(Did you mean one of: '--precision', '--precisions', '--preset'?)"),
])
def test_an_unknown_option_names_the_argument_or_the_option_meant(capsys, args, expect):
    with pytest.raises(SystemExit) as e:
        main(args)
    err = capsys.readouterr().err
    assert e.value.code == 2 and expect in " ".join(err.split()) and len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("args,flag,following", [
    # (click said "Got unexpected extra argument (20)")
    (["train", "mnist-cnn", "--compile", "--max-steps", "20"], "--compile", "--max-steps"),
    (["run", "--compile", "--workloads=mnist-cnn"], "--compile", "--workloads=mnist-cnn"),
    (["train", "mnist-cnn", "-o", "--precision", "fp32"], "-o", "--precision"),
    (["train", "mnist-cnn", "--checkpoint", "--help"], "--checkpoint", "--help"),  # (trained into a dir "--help")
])
def test_an_option_followed_by_another_is_refused_naming_both(capsys, args, flag, following):
    with pytest.raises(SystemExit) as e:
        main(args)
    err = " ".join(capsys.readouterr().err.split())
    assert e.value.code == 2
    assert f"{flag} needs a value, and the option {following} follows it: give {flag} VALUE" in err, err


def test_a_path_option_followed_by_a_flag_writes_nothing(capsys, tmp_path, monkeypatch):
    # (`--checkpoint --resume` trained and wrote its checkpoint to a directory named "--resume")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["train", "mnist-cnn", "--checkpoint", "--resume"])
    assert e.value.code == 2 and "--checkpoint needs a value" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_an_option_value_that_is_no_option_is_taken_as_given():
    from ampbench.cli.core import _option_taken_as_value

    assert _option_taken_as_value(["train", "mnist-cnn", "--compile", "on", "--max-steps", "2"]) is None
    assert _option_taken_as_value(["train", "--checkpoint", "--", "--resume"]) is None  # (after --: arguments)
    assert _option_taken_as_value(["run", "--resume", "--workloads", "x"]) is None  # (a flag takes no value)
    assert _option_taken_as_value(["nosuch", "--a", "--b"]) is None and _option_taken_as_value([]) is None


def test_main_exits_2_in_process(capsys):
    with pytest.raises(SystemExit) as e:
        main(["list", "gpu"])
    assert e.value.code == 2


@pytest.mark.parametrize("command", [["results"], ["report", "--format", "md", "--out", "-"], ["compare"],
                                     ["export", "--out", "x.json"]])
def test_a_reader_on_an_empty_file_says_it_is_no_store_and_writes_nothing(command, tmp_path, monkeypatch):
    from tests.conftest import cli

    monkeypatch.chdir(tmp_path)
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    code, out, err = cli(*command, "--db", str(empty))
    assert code == 2 and err.count("\n") == 1 and "not an ampbench results store (an empty file" in err, err
    assert empty.stat().st_size == 0 and not (tmp_path / "x.json").exists()


def test_ctrl_c_says_what_was_stored_and_how_to_finish(tmp_path, monkeypatch):
    """Ctrl-C during a run: exit 130, the cells stored so far named, and the --resume command that finishes it."""
    import shlex

    from ampbench.bench import runner
    from tests.conftest import cli

    real, calls = runner.execute, []

    def interrupted(*args, **kwargs):  # the second cell is interrupted
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "execute", interrupted)
    db = tmp_path / "r.db"
    args = ["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--steps", "2",
            "--warmup", "1", "--no-isolate", "--no-report", "--db", str(db)]
    code, out, err = cli(*args)
    assert code == 130 and "interrupted: 1 cell of 3 stored in run" in err and err.count("\n") == 1, err
    resume = err.split("finish the run with: ampbench ", 1)[1].strip()
    assert shlex.split(resume) == [*args, "--resume"]
    monkeypatch.setattr(runner, "execute", real)
    code, out, err = cli(*shlex.split(resume))  # the printed command finishes the run
    assert code == 0, err
    from ampbench.store import Store

    assert len(Store(db, create=False).rows()) == 3


def test_both_spellings_of_the_precision_option_everywhere(tmp_path):
    from ampbench.store import Store
    from tests.conftest import cli
    from tests.report.conftest import _row

    store = Store(tmp_path / "r.db")
    store.add(_row(store.create_run({"identity": {}}, device="cuda:0", device_name="GPU", hostname="h").run_id,
                   "resnext", "fp32", 100.0))
    db = ["--db", str(store.path)]
    for command in (["run", "--dry-run", "--workloads", "tabular-mlp", "--preset", "tiny"], ["results", *db],
                    ["compare", *db]):
        for flag in ("--precision", "--precisions"):
            code, out, err = cli(*command, flag, "no-such-mode")
            assert code == 2 and "no-such-mode" in err and "No such option" not in err, (command, flag, err)
    for command in (["train", "tabular-mlp"], ["diagnose", "tabular-mlp"]):
        code, out, err = cli(*command, "--precisions", "no-such-mode")
        assert code == 2 and "no-such-mode" in err and "No such option" not in err, err


def test_help_shows_no_markup():
    from tests.conftest import cli

    for command in ("run", "train", "diagnose", "results", "report", "export", "import", "compare", "hw", "list"):
        code, out, err = cli(command, "--help")
        assert code == 0 and "``" not in out, command


def test_the_command_list_gives_each_summary_as_one_paragraph(monkeypatch):
    """`ampbench --help` kept a docstring's source line breaks: "...and the GPUs predict" then "knows." alone on the
    next line. At 300 columns each command's summary is one line of the panel."""
    import inspect

    from ampbench.cli import app
    from tests.conftest import cli

    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = cli("--help")
    assert code == 0
    for command in app.registered_commands:
        summary = " ".join(inspect.cleandoc(command.callback.__doc__).split("\n\n")[0].split())
        assert any(summary in line for line in out.splitlines()), command.name


def test_api_errors_name_the_parameter_as_python_spells_it_and_the_cli_its_flag(tmp_path) -> None:
    """MixedPrecision(optimizer_state="2bit") says optimizer_state='2bit'; the command line maps it to its flag."""
    import ampbench
    from ampbench.errors import AmpbenchError
    from tests.conftest import cli

    with pytest.raises(AmpbenchError) as e:
        ampbench.MixedPrecision("amp-bf16", optimizer_state="2bit")
    assert str(e.value).startswith("optimizer_state='2bit': choose from") and "--" not in str(e.value)
    code, _, err = cli("train", "tabular-mlp", "--preset", "tiny", "--precision", "amp-bf16", "--optimizer-state", "2bit")
    assert code == 2 and "--optimizer-state '2bit': choose from" in err and "optimizer_state=" not in err


def test_run_help_says_the_default_steps_the_run_takes() -> None:
    """--steps and --warmup name the defaults bench.suites gives a CPU and a GPU cell (the help said 50 and 10 on a GPU
    long after the GPU defaults became 20 and 3)."""
    from ampbench.bench.suites import default_steps
    from ampbench.command_options import MeasureArgs

    (cpu_steps, cpu_warmup), (gpu_steps, gpu_warmup) = default_steps("cpu"), default_steps("cuda")
    helps = {f.name: f.metadata["cli"].help for f in dataclasses.fields(MeasureArgs) if "cli" in f.metadata}
    assert (cpu_steps, cpu_warmup) == (gpu_steps, gpu_warmup)  # (else the help must say each)
    assert f"(default: {cpu_steps} on a CPU and a GPU)" in helps["steps"]
    assert f"(default: {cpu_warmup} on a CPU and a GPU)" in helps["warmup"]


def test_what_runs_is_a_line_in_a_log(capsys):
    """A spinner shows nothing in a log, where a trace or an estimate can take minutes: there it is a line as it
    starts (predict's tracing of each target, run's estimate)."""
    from ampbench.cli.core import console, working

    assert not console.is_terminal  # (pytest captures the output)
    with working("tracing hf:gpt2 (meta tensors: nothing computed)"):
        pass
    assert capsys.readouterr().out == "  tracing hf:gpt2 (meta tensors: nothing computed) ...\n"


def test_option_help_with_brackets_is_shown_as_written(monkeypatch):
    """typer's rich help read "needs ampbench[tensorboard]" as a markup tag and printed "needs ampbench": every
    bracketed word of an option's help shows as written."""
    import re
    import typing

    from ampbench.command_options import RunOptions, RunOutput
    from tests.conftest import cli

    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = cli("run", "--help")
    assert code == 0 and "needs ampbench[tensorboard];" in out
    sections = [*typing.get_type_hints(RunOptions).values(), RunOutput]
    helps = [f.metadata["cli"].help for s in sections for f in dataclasses.fields(s) if "cli" in f.metadata]
    words = {w.rstrip(";.,)") for h in helps for w in re.findall(r"\S*\[[^\]\s]+\]\S*", h)}
    assert "ampbench[tensorboard]" in words
    flat = " ".join(out.replace("│", " ").split())
    for word in words:
        assert word in flat, word
