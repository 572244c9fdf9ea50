from pathlib import Path

from ampbench.store import ROW_KEYS, STATUSES

DOC = Path(__file__).resolve().parents[2] / "docs" / "benchmark.md"


def test_every_row_key_and_status_is_documented() -> None:
    text = DOC.read_text()
    missing = [k for k in ROW_KEYS if f"| `{k}` | {ROW_KEYS[k]} |" not in text]
    assert not missing, f"document these result keys in {DOC.name} as rows.py says: {missing}"
    assert all(f"| `{s}` |" in text for s in STATUSES)
