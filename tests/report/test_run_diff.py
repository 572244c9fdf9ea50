"""``ampbench compare --runs BEFORE,AFTER``: the same cells in two runs, each change judged against its noise.

Oracles: every change and noise is recomputed here from the rows' own keys (ratio, quadrature sum, sample standard
deviation written out); the verdicts are checked on both sides of each boundary; the two H200 leases' stored runs
give the real-data path, checked against their export files read directly.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from ampbench.bench.config import RunConfig
from ampbench.cells import CellId, defaults_left_out
from ampbench.report import run_diff as rd
from ampbench.store import Store, derive
from tests.conftest import cli
from tests.report.conftest import _row

ROOT = Path(__file__).resolve().parents[2]


class _Info:
    def __init__(self, run_id: str, config: dict | None = None, created_at: str = "2026-11-27T05:47:53+00:00") -> None:
        self.run_id, self.created_at, self.device_name, self.hostname = run_id, created_at, "NVIDIA H200", "vm"
        self.config = config or {"identity": {"steps": 30}}


def _ok(run: str, precision: str, sps: float, noise: float | None = None, **kw: object) -> dict:
    kw.setdefault("peak_allocated_bytes", 2**30)
    return _row(run, "bert", precision, sps, samples_per_s_noise=noise, **kw)


def _change(before: dict | None, after: dict | None, **kw: object) -> rd.CellChange:
    row = before or after
    assert row is not None
    return rd.change_of(CellId.of(row), before, after, **kw)  # type: ignore[arg-type]


def test_the_change_and_its_noise_are_the_rows_own() -> None:
    """change = after / before - 1; noise = both cells' block noise, both repeats' spread and both runs' fp32 drift,
    in quadrature: written out here term by term."""
    reps_a, reps_b = [100.0, 104.0, 98.0], [120.0, 118.0]

    def rel_sd(xs: list[float]) -> float:
        m = sum(xs) / len(xs)
        return math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) / m

    before = _ok("a", "amp-bf16", 100.0, 0.01, samples_per_s_repeats=reps_a)
    after = _ok("b", "amp-bf16", 120.0, 0.02, samples_per_s_repeats=reps_b)
    base_a, base_b = _ok("a", "fp32", 50.0, baseline_drift=0.03), _ok("b", "fp32", 50.0, baseline_drift=0.04)
    c = rd.change_of(CellId.of(before), before, after, base_a, base_b)
    assert c.change == pytest.approx(120.0 / 100.0 - 1)
    expected = math.sqrt(0.01**2 + rel_sd(reps_a) ** 2 + 0.03**2 + 0.02**2 + rel_sd(reps_b) ** 2 + 0.04**2)
    assert c.noise == pytest.approx(expected)
    assert c.verdict == rd.FASTER  # (+20% against 2 x ~6.6%)


def test_fp32_s_drift_alone_is_no_noise_estimate() -> None:
    """Cells of under 6 timed steps measure no noise of their own; fp32's drift between its two measurements is one
    difference of two numbers: it widens an estimate (above) and stands for none -- no verdict, however large."""
    base_a, base_b = _ok("a", "fp32", 50.0, baseline_drift=0.03), _ok("b", "fp32", 50.0, baseline_drift=0.04)
    c = rd.change_of(CellId.of(_ok("a", "tf32", 100.0)), _ok("a", "tf32", 100.0), _ok("b", "tf32", 150.0), base_a, base_b)
    assert c.noise is None and c.verdict == rd.UNKNOWN
    one = rd.change_of(CellId.of(_ok("a", "tf32", 100.0)), _ok("a", "tf32", 100.0, 0.01), _ok("b", "tf32", 150.0),
                       base_a, base_b)  # (one run measured the cell's noise: both drifts join it)
    assert one.noise == pytest.approx(math.sqrt(0.01**2 + 0.03**2 + 0.04**2))


@pytest.mark.parametrize(("after", "noise", "verdict", "text"), [
    (103.0, 0.01, rd.FASTER, "faster"),         # +3% > 2 x 1.41%
    (102.0, 0.01, rd.SAME, "within noise"),     # +2% < 2 x 1.41%
    (97.0, 0.01, rd.SLOWER, "slower"),
    (100.8, 0.001, rd.SAME, "within 1%"),       # beyond 2 x noise (0.28%) but under the 1% that counts
    (101.5, 0.001, rd.FASTER, "faster"),
    (150.0, None, rd.UNKNOWN, "noise unknown"),  # nothing measured the noise: no verdict, however large
])
def test_a_change_counts_beyond_twice_its_noise_and_the_smallest_change(after: float, noise: float | None,
                                                                       verdict: str, text: str) -> None:
    c = _change(_ok("a", "tf32", 100.0, noise), _ok("b", "tf32", after, noise))
    assert (c.verdict, rd.verdict_text(c)) == (verdict, text)
    loose = _change(_ok("a", "tf32", 100.0, noise), _ok("b", "tf32", after, noise), min_change=0.0)
    if noise is not None and abs(after / 100 - 1) > 2 * math.hypot(noise, noise):
        assert loose.verdict in (rd.FASTER, rd.SLOWER)


def test_statuses_and_cells_measured_once() -> None:
    ok_a, ok_b = _ok("a", "amp-fp16", 100.0, 0.01), _ok("b", "amp-fp16", 90.0, 0.01)
    oom_a = _row("a", "bert", "amp-fp16", None, status="oom", reason="CUDA out of memory")
    oom_b = _row("b", "bert", "amp-fp16", None, status="oom", reason="CUDA out of memory")
    cases = [(ok_a, oom_b, rd.NOW_FAILS, "now fails (oom)"), (oom_a, ok_b, rd.NOW_RUNS, "now runs (was oom)"),
             (oom_a, oom_b, rd.BOTH_FAIL, "fails in both (oom)"), (ok_a, None, rd.BEFORE_ONLY, "before only"),
             (None, ok_b, rd.AFTER_ONLY, "after only")]
    for a, b, verdict, text in cases:
        c = _change(a, b)
        assert (c.verdict, rd.verdict_text(c), c.change, rd.change_text(c)) == (verdict, text, None, "-")
    assert _change(ok_a, oom_b).slower_by_more_than(0.5)  # a cell that stopped running fails any gate
    slower = _change(ok_a, ok_b)  # -10% +- 1.4%
    assert slower.slower_by_more_than(0.05) and not slower.slower_by_more_than(0.10)
    assert not _change(ok_b, ok_a).slower_by_more_than(0.0)


def test_memory_compares_one_measure_and_rss_only_beyond_its_noise() -> None:
    a = _ok("a", "fp32", 100.0, 0.01, peak_allocated_bytes=1000)
    b = _ok("b", "fp32", 100.0, 0.01, peak_allocated_bytes=1250)
    assert _change(a, b).memory_change == pytest.approx(0.25)
    split = dict(weights_bytes=10, grads_bytes=10, optimizer_bytes=20, activation_bytes=60)
    cpu = _ok("b", "fp32", 100.0, 0.01, device="cpu", memory_source="exact split", **split)
    c = _change(a, cpu)
    assert c.memory_change is None and c.memory_note == "not the same measure (peak before, exact after)"
    rss = dict(device="cpu", memory_source="rss growth")
    one = _change(_ok("a", "fp32", 1.0, 0.01, cpu_rss_peak_bytes=100, **rss),
                  _ok("b", "fp32", 1.0, 0.01, cpu_rss_peak_bytes=300, **rss))
    assert one.memory_change is None and "unmeasured" in (one.memory_note or "")
    noisy = _change(_ok("a", "fp32", 1.0, 0.01, cpu_rss_peak_bytes_repeats=[100, 200], **rss),
                    _ok("b", "fp32", 1.0, 0.01, cpu_rss_peak_bytes_repeats=[150, 250], **rss))
    assert noisy.memory_change is None and noisy.memory_note == "RSS growth within the readings' noise"
    clear = _change(_ok("a", "fp32", 1.0, 0.01, cpu_rss_peak_bytes_repeats=[100, 110], **rss),
                    _ok("b", "fp32", 1.0, 0.01, cpu_rss_peak_bytes_repeats=[300, 310], **rss))
    assert clear.memory_change == pytest.approx(300 / 100 - 1)  # (each side its readings' lower median)


def test_what_differs_between_the_runs_is_listed_with_left_out_defaults_named() -> None:
    """A run's stored config leaves a setting out while it holds its default: --repeats 3 against a plain run reads
    'repeats 1 -> 3', not '- -> 3'."""
    defaults = defaults_left_out(RunConfig, "run")
    assert defaults["repeats"] == 1
    a = [_ok("a", "fp32", 100.0, 0.01)]
    b = [_ok("b", "fp32", 100.0, 0.01, env={**a[0]["env"], "torch": "2.13"})]  # type: ignore[dict-item]
    diff = rd.diff_runs(_Info("a"), a, _Info("b", {"identity": {"steps": 20, "repeats": 3}}), b, defaults)
    assert diff.differences == [("torch", "2.11", "2.13"), ("repeats", "1", "3"), ("steps", "30", "20")]
    same = rd.diff_runs(_Info("a"), a, _Info("c"), [_ok("c", "fp32", 100.0, 0.01)], defaults)
    assert same.differences == [] and "nothing the rows recorded" in rd.header_lines(same)[2]


def test_settings_of_a_measurement_differ_only_between_runs_that_both_took_it() -> None:
    """A throughput run stores convergence placeholders (200 steps, 3 seeds): against a tiny converge run (30 x 2)
    they are no difference; two converge runs' steps are, and so are two max-batch searches' margins."""
    a, b = [_ok("a", "fp32", 100.0, 0.01)], [_ok("b", "fp32", 100.0, 0.01)]

    def info(run: str, measures: list[str], **identity: object) -> _Info:
        return _Info(run, {"identity": {"steps": 20, "measures": measures, **identity}})

    conv = dict(converge_steps=30, seeds=2, memory_margin=0.05, inference_batch=None)
    tput = dict(converge_steps=200, seeds=3, memory_margin=0.05, inference_batch=None)
    diff = rd.diff_runs(info("a", ["throughput", "converge"], **conv), a, info("b", ["throughput"], **tput), b, {})
    assert diff.differences == []
    diff = rd.diff_runs(info("a", ["converge"], **conv), a, info("b", ["converge"], **tput), b, {})
    assert diff.differences == [("converge_steps", "30", "200"), ("seeds", "2", "3")]
    mb = rd.diff_runs(info("a", ["maxbatch"], memory_margin=0.25), a, info("b", ["maxbatch"], memory_margin=0.05), b, {})
    assert mb.differences == [("memory_margin", "0.25", "0.05")]
    one = rd.diff_runs(info("a", ["maxbatch"], memory_margin=0.25), a, info("b", ["memory"], memory_margin=0.05), b, {})
    assert one.differences == []
    # A config without its measures (hand-made) keeps every setting, as before.
    old = rd.diff_runs(_Info("a", {"identity": {"seeds": 2}}), a, _Info("b", {"identity": {"seeds": 3}}), b, {})
    assert old.differences == [("seeds", "2", "3")]


def test_defaults_left_out_are_exactly_what_a_run_identity_omits_at_their_default() -> None:
    config = RunConfig(device="cpu", axes=RunConfig.__dataclass_fields__["axes"].default_factory(  # type: ignore[misc]
        precisions=("fp32",)))
    left = defaults_left_out(RunConfig, "run")
    assert left and not set(left) & set(config.identity())


def _store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "d.db")
    a = s.create_run({"identity": {"steps": 30}}, device="cuda:0", device_name="NVIDIA A100-SXM4-80GB",
                     hostname="gpu-box").run_id
    for r in (_row(a, "bert", "fp32", 1000.0, samples_per_s_noise=0.005, peak_allocated_bytes=4 * 2**30),
              _row(a, "bert", "amp-bf16", 3000.0, samples_per_s_noise=0.005, peak_allocated_bytes=2 * 2**30),
              _row(a, "bert", "amp-fp16", 3100.0, samples_per_s_noise=0.005, peak_allocated_bytes=2 * 2**30),
              _row(a, "vit", "fp32", 500.0, samples_per_s_noise=0.005)):
        s.add(r)
    b = s.create_run({"identity": {"steps": 30}}, device="cuda:0", device_name="NVIDIA A100-SXM4-80GB",
                     hostname="gpu-box").run_id
    env = {"device": "cuda:0", "capability": "8.0", "torch": "2.13", "hostname": "gpu-box", "driver": "550.54",
           "cuda": "12.4", "cudnn": 90100}
    for r in (_row(b, "bert", "fp32", 1003.0, samples_per_s_noise=0.005, peak_allocated_bytes=4 * 2**30, env=env),
              _row(b, "bert", "amp-bf16", 2700.0, samples_per_s_noise=0.005, peak_allocated_bytes=2 * 2**30, env=env),
              _row(b, "bert", "amp-fp16", None, status="oom", reason="CUDA out of memory", env=env),
              _row(b, "unet", "fp32", 80.0, samples_per_s_noise=0.005, env=env)):
        s.add(r)
    return s


def test_compare_runs_prints_each_setting_and_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ampbench.cli import core

    monkeypatch.setattr(core.console, "_width", 80)
    db = str(_store(tmp_path).path)
    code, out, err = cli("compare", "--db", db, "--runs", "previous,latest")
    assert code == 0, err
    tables = [line for line in out.splitlines() if line[:1] in "┏┃┡│└"]  # (messages are one line: the terminal wraps)
    assert tables and max(len(line) for line in tables) <= 80 and "…" not in out
    flat = " ".join(out.split())
    assert "what differs: torch 2.11 -> 2.13" in flat
    assert "bert (small), batch 64, eager" in flat and "vit (small)" in flat and "unet (small)" in flat
    for word in ("+0.3%", "-10.0%", "slower", "now fails (oom)", "before only", "after only", "3.00x -> 2.69x"):
        assert word in flat, word
    assert flat.endswith("5 cells: 1 slower, 1 now fails, 1 unchanged, 1 before only, 1 after only; the largest "
                         "slowdown: bert (small) amp-bf16, batch 64, eager -10.0% ±0.7%"), flat
    code, _, err = cli("compare", "--db", db, "--runs", "previous,latest", "--fail-if-slower", "5")
    assert code == 1 and err.count("\n") == 1 and "2 cells slower than 5 % beyond the noise or no longer running" in err
    code, _, err = cli("compare", "--db", db, "--runs", "previous,latest", "--fail-if-slower", "5", "--precisions",
                       "fp32")
    assert code == 0, err


def test_compare_runs_as_json_and_markdown(tmp_path: Path) -> None:
    db = str(_store(tmp_path).path)
    code, out, _ = cli("compare", "--db", db, "--runs", "previous,latest", "--format", "json")
    doc = json.loads(out)
    assert code == 0 and doc["counts"] == {"slower": 1, "now fails": 1, "unchanged": 1, "before only": 1,
                                           "after only": 1} and doc["significance"] == 2.0
    (bf16,) = [c for c in doc["cells"] if c["precision"] == "amp-bf16"]
    assert bf16["change"] == pytest.approx(2700 / 3000 - 1) and bf16["verdict"] == "slower"
    assert bf16["before"]["samples_per_s"] == 3000 and bf16["after"]["memory_bytes"] == 2 * 2**30
    code, md, _ = cli("compare", "--db", db, "--runs", "previous,latest", "--format", "md", "--workloads", "bert")
    assert code == 0 and md.count("| precision | before /s |") == 1 and "| amp-bf16 | 3,000 | 2,700 | -10.0% ±0.7% |" in md


@pytest.mark.parametrize(("args", "message"), [
    (["--runs", "x"], "--runs 'x': give two runs, BEFORE,AFTER"),
    (["--runs", "latest,latest"], "both name run"),
    (["--runs", "nope,latest"], "no run 'nope'"),
    (["--fail-if-slower", "5"], "--fail-if-slower compares two runs: give --runs BEFORE,AFTER"),
    (["--format", "json"], "--format compares two runs"),
    (["--runs", "previous,latest", "--reference", "H200"], "--reference normalises devices"),
    (["--runs", "previous,latest", "--min-change", "-1"], "--min-change -1: a percentage from 0 to 100"),
    (["--runs", "previous,latest", "--format", "xml"], "--format 'xml': choose table, md or json"),
    (["--runs", "previous,latest", "--workloads", "gpt2"], "measured no cell in common (of the workloads and"),
])
def test_compare_runs_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], message: str) -> None:
    code, out, err = cli("compare", "--db", str(_store(tmp_path).path), *args)
    assert code == 2 and message in err and err.count("\n") == 1 and "Traceback" not in err, err


def test_two_h200_leases_compared_from_their_exports(tmp_path: Path) -> None:
    """The committed H200 runs of two leases (the real-scale suite, nine hours apart): each paired change is the
    export files' own samples/s ratio, and what differs is what their configs say."""
    files = [ROOT / "benchmarks/results/h200/truth/runs.json", ROOT / "benchmarks/results/h200/lease3/runs.json"]
    db = tmp_path / "h200.db"
    for f in files:
        assert cli("import", "--db", str(db), str(f))[0] == 0
    code, out, err = cli("compare", "--db", str(db), "--runs", "20261127-0547,20261127-1450", "--format", "json")
    assert code == 0, err
    doc = json.loads(out)
    raw = {}
    for f in files:
        for r in json.loads(f.read_text())["rows"]:
            if r["status"] == "ok" and not r.get("repeat_of") and r["precision"] != "fp32":
                raw.setdefault((r["run_id"][:15], r["workload"], r["precision"]), r["samples_per_s"])
    # (fp32's closing measurement is folded into its row, as every reader folds it: the other modes are one row each)
    paired = [c for c in doc["cells"] if c["change"] is not None and c["precision"] != "fp32"]
    assert len(paired) >= 20
    for c in paired:
        a, b = raw[("20261127-054753", c["workload"], c["precision"])], raw[("20261127-145038", c["workload"],
                                                                              c["precision"])]
        assert c["change"] == pytest.approx(b / a - 1), c
    assert {"what": "steps", "before": "30", "after": "20"} in doc["differences"]
    assert all(d["what"] not in ("torch", "device", "driver") for d in doc["differences"])  # one GPU, one stack
    rows = derive(Store(db).rows())
    assert rows  # (the store reads back whole)


def test_a_run_measuring_memory_alone_is_not_timed_not_failed() -> None:
    timed = _ok("a", "fp32", 100.0, 0.01, peak_allocated_bytes=1000)
    memory_only = _ok("b", "fp32", None, None, peak_allocated_bytes=1100)  # type: ignore[arg-type]
    c = _change(timed, memory_only)
    assert (c.verdict, c.change, c.memory_change) == (rd.NOT_TIMED, None, pytest.approx(0.1))
    assert not c.slower_by_more_than(0.0) and rd.cell_line(c)["after"] == "-"


def test_since_last_finds_the_latest_run_on_the_same_device_with_shared_timed_cells(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")

    def run(device: str, *rows: tuple[str, str, float | None]) -> str:
        run_id = s.create_run({"identity": {}}, device="cuda:0", device_name=device, hostname="h").run_id
        for workload, precision, sps in rows:
            s.add(_row(run_id, workload, precision, sps, device_name=device, samples_per_s_noise=0.001))
        return run_id

    a100, h100 = "NVIDIA A100-SXM4-80GB", "NVIDIA H100"
    first = run(a100, ("bert", "fp32", 100.0), ("bert", "amp-bf16", 300.0))
    run(h100, ("bert", "fp32", 500.0))          # another device: never the baseline of an A100 run
    run(a100, ("vit", "fp32", 50.0))            # no shared cell
    run(a100, ("bert", "fp32", None))           # shared, but timed in neither... (memory alone)
    last = run(a100, ("bert", "fp32", 100.5), ("bert", "amp-bf16", 240.0), ("unet", "fp32", 10.0))
    diff = rd.since_last(s, s.run(last))
    assert diff is not None and diff.before.run_id == first
    assert [(c.cell.precision, c.verdict) for c in diff.changes] == [("fp32", rd.SAME), ("amp-bf16", rd.SLOWER)]
    line = rd.since_line(diff)
    assert line.startswith(f"since run {first} (") and f"compare --runs {first},{last}" in line
    assert "2 cells: 1 slower, 1 unchanged; the largest slowdown: bert (small) amp-bf16, batch 64, eager -20.0%" in line
    assert rd.since_last(s, s.run(first)) is None
    assert "(what differs" not in line  # (the same environment and settings)
    diff.after = replace(diff.after, env={**diff.after.env, "torch": "2.13"})
    assert "the last on this device to measure these cells (what differs: torch 2.11 -> 2.13): 2 cells" in \
        rd.since_line(diff)


def test_run_ends_with_what_changed_since_the_last_run_of_its_cells(tmp_path: Path) -> None:
    db = str(tmp_path / "r.db")
    args = ["run", "--workloads", "tabular-mlp", "--preset", "tiny", "--precisions", "fp32", "--steps", "3",
            "--warmup", "1", "--no-isolate", "--no-report", "--db", db]
    code, out, err = cli(*args)
    assert code == 0 and "since run" not in out, err
    first = Store(tmp_path / "r.db").latest_run().run_id  # type: ignore[union-attr]
    code, out, err = cli(*args)
    assert code == 0, err
    (line,) = [line for line in out.splitlines() if line.startswith("since run")]
    assert line.startswith(f"since run {first} (") and "the last on this device to measure this cell: 1 cell: " in line


def test_a_runs_report_has_a_since_section_and_the_first_run_none(tmp_path: Path) -> None:
    from ampbench.report import build_report

    s = _store(tmp_path)
    first, second = (r.run_id for r in s.runs())
    _, md = build_report(s, second, "md")
    section = md.split(f"### Since run {first}", 1)[1]
    assert "#### bert (small), batch 64, eager" in section and "| amp-bf16 | 3,000 | 2,700 | -10.0% ±0.7% | slower |" \
        in section and "3 cells: 1 slower, 1 now fails, 1 unchanged; the largest" in section
    _, html = build_report(s, second, "html")
    assert f'<h2 id="since">Since run {first}' in html and '<span class="bad">slower</span>' in html
    assert "Since run" not in build_report(s, first, "md")[1] and "Since run" not in build_report(s, first, "html")[1]


def test_the_run_settings_defaults_are_found_when_not_given() -> None:
    a, b = [_ok("a", "fp32", 100.0, 0.01)], [_ok("b", "fp32", 100.0, 0.01)]
    found = rd.diff_runs(_Info("a"), a, _Info("b", {"identity": {"steps": 30, "repeats": 3}}), b)
    assert found.differences == [("repeats", "1", "3")]


def test_picking_precisions_keeps_fp32s_drift_in_each_modes_noise(tmp_path: Path) -> None:
    """compare --runs --precisions amp-bf16: fp32's rows are still read (their drift is part of amp-bf16's noise),
    only the table leaves them out -- the verdict did not change with the filter (it did: 'faster' alone, 'within
    noise' beside fp32)."""
    s = Store(tmp_path / "d.db")
    for sps in (100.0, 104.0):
        run = s.create_run({"identity": {}}, device="cpu", device_name="cpu", hostname="h").run_id
        s.add(_row(run, "bert", "fp32", 100.0, samples_per_s_noise=0.005, baseline_drift=0.03))
        s.add(_row(run, "bert", "amp-bf16", sps, samples_per_s_noise=0.005))
    docs = [json.loads(cli("compare", "--db", str(s.path), "--runs", "previous,latest", "--format", "json", *extra)[1])
            for extra in ([], ["--precisions", "amp-bf16"])]
    (every,), (picked,) = ([c for c in d["cells"] if c["precision"] == "amp-bf16"] for d in docs)
    assert picked == every and every["noise"] == pytest.approx(math.sqrt(2 * 0.005**2 + 2 * 0.03**2))
    assert every["verdict"] == "unchanged" and [c["precision"] for c in docs[1]["cells"]] == ["amp-bf16"]


def test_since_last_keeps_the_earlier_runs_fp32_drift_when_this_run_timed_amp_alone(tmp_path: Path) -> None:
    s = Store(tmp_path / "s.db")
    first = s.create_run({"identity": {}}, device="cpu", device_name="cpu", hostname="h").run_id
    s.add(_row(first, "bert", "fp32", 100.0, samples_per_s_noise=0.0, baseline_drift=0.04, device_name="cpu"))
    s.add(_row(first, "bert", "amp-bf16", 200.0, samples_per_s_noise=0.01, device_name="cpu"))
    second = s.create_run({"identity": {}}, device="cpu", device_name="cpu", hostname="h").run_id
    s.add(_row(second, "bert", "amp-bf16", 190.0, samples_per_s_noise=0.01, device_name="cpu"))
    diff = rd.since_last(s, s.run(second))
    assert diff is not None and [c.cell.precision for c in diff.changes] == ["amp-bf16"]
    (c,) = diff.changes
    assert c.noise == pytest.approx(math.sqrt(0.01**2 + 0.04**2 + 0.01**2)) and c.verdict == rd.SAME  # (-5% < 2 x 4.2%)


def test_fp32_moving_beyond_its_noise_is_said_as_the_machines_move() -> None:
    """Every mode 20% slower, fp32 too: a summary that named only "the largest slowdown" read as a regression of one
    mode; fp32's own move says the machine (or the software under every mode) moved."""
    before = [_ok("a", p, 100.0 * k, 0.01) for p, k in (("fp32", 1), ("amp-bf16", 2))]
    after = [_ok("b", p, 80.0 * k, 0.01) for p, k in (("fp32", 1), ("amp-bf16", 2))]
    diff = rd.diff_runs(_Info("a"), derive(before), _Info("b"), derive(after), {})
    assert rd.summary_line(diff).endswith("; fp32 itself ran 20% slower (the median of its 1 setting): the machine or "
                                          "the software under every mode moved, not one mode -- the x fp32 columns "
                                          "compare each mode's gain")
    calm = rd.diff_runs(_Info("a"), derive(before), _Info("b"), derive([after[0] | {"samples_per_s": 100.0},
                                                                      after[1]]), {})
    assert rd.baseline_moved(calm) is None


def test_history_marks_each_move_beyond_the_noise_against_the_run_before(tmp_path: Path) -> None:
    """Three runs of one setting: amp-bf16 100 -> 100.5 (within 1%) -> 80 (-20.4%, beyond 2 x its noise), the
    torch version changing at the third; another device's run of the same cell is a series of its own (one run:
    none)."""
    from ampbench.report.history import history, point_text

    s = Store(tmp_path / "h.db")
    for sps, torch in ((100.0, "2.11"), (100.5, "2.11"), (80.0, "2.13")):
        run = s.create_run({"identity": {}}, device="cuda:0", device_name="NVIDIA A100-SXM4-80GB", hostname="h").run_id
        env = {"device": "cuda:0", "torch": torch, "hostname": "gpu-box"}
        s.add(_row(run, "bert", "fp32", 50.0, samples_per_s_noise=0.005, env=env))
        s.add(_row(run, "bert", "amp-bf16", sps, samples_per_s_noise=0.005, env=env))
    other = s.create_run({"identity": {}}, device="cuda:0", device_name="NVIDIA H100", hostname="h").run_id
    s.add(_row(other, "bert", "amp-bf16", 300.0, device_name="NVIDIA H100"))
    (series,) = history(derive(s.rows()), s.runs())
    runs = [r for r, _ in series.runs]
    amp = [series.points["amp-bf16"][r] for r in runs]
    assert [p.verdict for p in amp] == [None, rd.SAME, rd.SLOWER]
    assert amp[2].change == pytest.approx(80.0 / 100.5 - 1) and point_text(amp[2]) == f"80.0 {80.0 / 100.5 - 1:+.1%}"
    assert point_text(amp[1]) == "100" and series.env == {runs[2]: "torch 2.11 -> 2.13"}
    assert len(history(derive(s.rows()), s.runs(), last=2)[0].runs) == 2
    code, out, err = cli("compare", "--db", str(s.path), "--history", "--precisions", "amp-bf16")
    assert code == 0 and "80.0 -20.4%" in out and f"{runs[2]}: torch 2.11 -> 2.13" in out and "fp32 /s" not in out
    doc = json.loads(cli("compare", "--db", str(s.path), "--history", "--format", "json")[1])
    assert [p["verdict"] for p in doc[0]["points"]["amp-bf16"]] == [None, "unchanged", "slower"]
    for args, message in ((["--runs", "a,b"], "--history is every run of the same cells; --runs"),
                          (["--last", "1"], "--last 1: at least 2 runs"), (["--format", "md"], "--format md"),
                          (["--workloads", "vit"], "no setting was timed in two runs")):
        code, _, err = cli("compare", "--db", str(s.path), "--history", *args)
        assert code == 2 and message in err and err.count("\n") == 1, err
    code, _, err = cli("compare", "--db", str(s.path), "--last", "3")
    assert code == 2 and "--last is how many runs --history keeps" in err and err.count("\n") == 1, err
