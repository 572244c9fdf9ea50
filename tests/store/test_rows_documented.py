from pathlib import Path

from ampbench.store import ROW_KEYS, STATUSES

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmark.md"


def test_every_row_key_and_status_is_documented() -> None:
    text = DOC.read_text()
    missing = [k for k in ROW_KEYS if f"| `{k}` | {ROW_KEYS[k]} |" not in text]
    assert not missing, f"document these result keys in {DOC.name} as rows.py says: {missing}"
    assert all(f"| `{s}` |" in text for s in STATUSES)


def test_every_framework_says_what_its_row_keys_hold_and_the_store_checks_it() -> None:
    """The store names no framework's columns: each framework types its own, and a row breaking the type is refused."""
    from ampbench import seam
    from ampbench.store.row_keys import row_problem

    for fw in seam.all_frameworks():
        assert set(fw.row_keys()) == set(fw.row_types()), fw.name
    good = {"run_id": "r", "cell_key": "k", "workload": "w", "precision": "fp32", "status": "error"}
    assert row_problem(good) is None
    samples = {str: 3, int: "three", bool: "yes", float: "x"}
    for key, kind in seam.row_types().items():
        problem = row_problem({**good, key: samples[kind]})
        assert problem is not None and problem.startswith(key), (key, problem)
