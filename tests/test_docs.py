"""Every command in a ``bash`` block of README.md and docs/*.md runs, as written, so no doc can drift from the CLI.

Each command runs in this process (``ampbench.cli.main``) in a sandbox holding the files the docs name
(tests/doc_fixtures: m.py, my_net.py, my_pkg/, tweets/ ...), against a store filled by one tiny real run.
What keeps it fast, and what it changes:
- ``run`` commands are checked with ``--dry-run`` on the tiny preset: every option, every workload built
  and its model run forward on two samples, the plan printed; nothing is measured. A ``run`` the docs show
  on the tiny preset runs for real (2 timed steps).
- hf: models (BERT-base, GPT-2 as configured) are built from a small config (HF_SMALL).
- ``train`` and ``diagnose`` run for real on the tiny preset, for 2 steps; ``hw`` times 64 x 64 GEMMs.
- every command gets the sandbox's ``--db`` where it takes one.
A command documented for another device or for an optional extra is expected to refuse here with the documented
one-line reason (EXPECTED_HERE), and that is checked too.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import cli

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = Path(__file__).with_name("doc_fixtures")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MNIST = ROOT.parent / "shared" / "data" / "mnist"

EXPECTED_HERE: list[tuple[str, bool, str]] = [
    # (in the command, when it cannot run here, the one line it must say instead)
    ("--measure maxbatch", not torch.cuda.is_available(), "--measure maxbatch on CPU needs --memory-budget"),
    ("timm:", importlib.util.find_spec("timm") is None, "ampbench[timm]"),
]


def documented_commands() -> list[tuple[str, str]]:
    """(where, command) of every ``ampbench ...`` line in a bash block, comments dropped; a ``;``-chain stays one
    entry (its commands run in order: ``export --out a.json; import a.json`` reads what the first wrote, whatever
    worker runs it)."""
    out = []
    for doc in DOCS:
        text = doc.read_text()
        for block in re.finditer(r"^```bash\n(.*?)^```", text, re.S | re.M):
            first = text[: block.start(1)].count("\n") + 1
            for i, line in enumerate(block.group(1).splitlines()):
                parts = [p.strip() for p in " ".join(shlex.split(line, comments=True)).split(";")] if line.strip() else []
                chain = [p for p in parts if p.startswith("ampbench ")]
                if chain:
                    out.append((f"{doc.relative_to(ROOT)}:{first + i}", "; ".join(chain)))
    return out


COMMANDS = documented_commands()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The files the docs name, a store with one tiny run in it, and 'another GPU's' export to import."""
    home = tmp_path_factory.mktemp("docs")
    work = home / "work"
    shutil.copytree(FIXTURES, work)
    if MNIST.is_dir():  # ../shared/data/mnist, as the README's train command writes it
        (home / "shared" / "data").mkdir(parents=True)
        (home / "shared" / "data" / "mnist").symlink_to(MNIST)
    db = str(work / "results.db")
    code, _, err = cli("run", "--workloads", "mnist-cnn", "--preset", "tiny", "--precisions", "fp32,amp-bf16", "--steps",
                       "2", "--warmup", "1", "--no-isolate", "--no-report", "--db", db, "--json", str(home / "b.json"))
    assert code == 0, err
    import json

    # compare --runs: the same run again under another id (its rows as measured: every change 0, so a documented
    # --fail-if-slower gate passes whatever the machine's load did to two real runs)
    again = json.loads((home / "b.json").read_text())
    first = again["runs"][0]["run_id"]
    for r in [*again["runs"], *again["rows"]]:
        r["run_id"] = "again-" + r["run_id"]
    (home / "again.json").write_text(json.dumps(again))
    code, _, err = cli("import", str(home / "again.json"), "--db", db)
    assert code == 0, err
    (work / "runs.txt").write_text(f"{first},again-{first}")

    other = json.loads((home / "b.json").read_text())  # the same run as if measured on another device
    for r in [*other["runs"], *other["rows"]]:
        r["run_id"] = "docs-" + r["run_id"]
        r["device_name"] = "Example GPU B (docs test fixture)"
    (work / "gpu-b.json").write_text(json.dumps(other))
    return work


HF_SMALL = {"hf:bert": ["-o", "num_hidden_layers=1", "-o", "hidden_size=32", "-o", "num_attention_heads=2",
                        "-o", "intermediate_size=64"],
            "hf:gpt2": ["-o", "n_layer=1", "-o", "n_embd=32", "-o", "n_head=2"]}
"""hf: models the docs build at their configs' full size (BERT-base, GPT-2) are built from a small config here."""


def _with_test_options(args: list[str], db: str) -> list[str]:
    cmd = args[0]
    small = [x for name, opts in HF_SMALL.items() if name in args for x in opts]
    if cmd == "run":
        tiny = "--preset" in args and args[args.index("--preset") + 1] == "tiny"
        return args + small + ["--preset", "tiny"] + (
            ["--steps", "2", "--warmup", "1", "--seeds", "2", "--converge-steps", "3", "--no-isolate", "--no-report"]
            if tiny else ["--dry-run", "--no-isolate"]) + ["--db", db]
    if cmd == "train":
        return args + small + ["--preset", "tiny", "--max-steps", "2", "--epochs", "1"]
    if cmd == "diagnose":
        return args + ["--preset", "tiny", "--steps", "2", "--db", db]
    if cmd == "hw":
        return args + ["--sizes", "64", "--db", db]
    if cmd == "compare" and "--runs" in args:  # (previous,latest: the sandbox's two runs of the same cells, whatever
        # runs the other documented commands stored after them)
        i = args.index("--runs") + 1
        return [*args[:i], (Path(db).parent / "runs.txt").read_text(), *args[i + 1:], "--db", db]
    if cmd in ("results", "report", "export", "import", "compare"):
        return args + ["--db", db]
    if cmd == "predict":  # (traced on meta, nothing measured: the tiny preset only keeps the traces short)
        return args + ([] if "--model" in args else ["--preset", "tiny"]) + ["--db", db]
    return args


def test_the_docs_show_commands_and_no_synopsis_in_bash_blocks() -> None:
    assert len(COMMANDS) >= 40
    synopses = [(w, c) for w, c in COMMANDS if "[" in c or "..." in c or " | " in c]
    assert not synopses, f"put usage synopses in ```text blocks, runnable commands in ```bash: {synopses}"


@pytest.mark.parametrize(("where", "command"), COMMANDS, ids=[w for w, _ in COMMANDS])
def test_documented_command_runs_as_written(sandbox: Path, monkeypatch: pytest.MonkeyPatch, where: str,
                                            command: str) -> None:
    monkeypatch.chdir(sandbox)
    monkeypatch.syspath_prepend(str(sandbox))  # my_pkg.models: an importable module
    if "../shared/data/mnist" in command and not MNIST.is_dir():
        pytest.skip("needs ../shared/data/mnist (the real MNIST test set), absent beside this checkout")
    if "--optimizer-state" in command:  # torchao's update op by op: compiled, it takes 10-30 s per shape on a CPU
        monkeypatch.setenv("TORCHDYNAMO_DISABLE", "1")
    for one in command.split("; "):
        args = _with_test_options(shlex.split(one)[1:], str(sandbox / "results.db"))
        code, out, err = cli(*args)
        expected = [say for what, applies, say in EXPECTED_HERE if what in one and applies]
        if expected:
            assert code == 2 and expected[0] in err and err.count("\n") == 1, (where, err)
            continue
        assert code == 0, f"{where}: {one}\nexit {code}\n{err[-3000:]}\n{out[-2000:]}"


def test_token_id_range_is_the_same_in_help_docs_and_data() -> None:
    """Token inputs: ids in [1, V) with 0 left for padding (classification, regression), [0, V) for --task lm."""
    from ampbench.data import synthetic

    g = torch.Generator().manual_seed(0)
    ids, _ = synthetic.class_tokens(256, (16,), 50, 3, g)
    reg, _ = synthetic.regression_tokens(256, (16,), 50, 1, g)
    lm, _ = synthetic.lm_tokens(64, 16, 50, g)
    assert int(ids.min()) >= 1 and int(reg.min()) >= 1 and int(max(ids.max(), reg.max())) < 50
    assert int(lm.min()) == 0 and int(lm.max()) < 50
    import typer

    from ampbench.cli import app

    run = typer.main.get_command(app).commands["run"]  # type: ignore[attr-defined]
    (vocab,) = [p for p in run.params if p.name == "vocab_size"]
    assert "[1, V), 0 left for padding (--task lm: [0, V))" in vocab.help
    table = (ROOT / "docs" / "your-model.md").read_text()
    assert "int64 ids in `[1, V)`" in table and "int64 ids in `[0, V)`" in table
