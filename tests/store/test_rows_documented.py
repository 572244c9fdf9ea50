from pathlib import Path

from ampbench.store import ROW_KEYS, STATUSES

README = (Path(__file__).resolve().parents[2] / "README.md").read_text()


def test_every_row_key_and_status_is_documented_in_readme() -> None:
    missing = [k for k in ROW_KEYS if f"| `{k}` |" not in README]
    assert not missing, f"document these result keys in README: {missing}"
    assert all(f"| `{s}` |" in README for s in STATUSES)
