"""What changed since the last lease of this GPU: this lease's default-suite run beside the newest committed one.

``gpu_session.sh truth`` ends with it: the suite run just measured (the latest run in ``--db`` whose label starts
with :data:`SUITE`) and the newest earlier suite run committed under ``--results`` (benchmarks/results/<gpu>/, any
``runs*.json`` below it), compared as ``ampbench compare --runs`` compares them -- each cell's change against the noise
both runs measured, what differs between the two (torch, driver, cuDNN, settings) -- written as Markdown to ``--out``.
The committed run is imported into a copy of the store, never into the lease's own (its export stays this lease's).

    python benchmarks/since_last_lease.py --db out/gpu/results.db --results benchmarks/results/nvidia-h200 \
        --out benchmarks/results/nvidia-h200/since_last_lease.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from ampbench.report.run_diff import diff_runs, markdown
from ampbench.store import Store, derive
from ampbench.store.exchange import import_file

SUITE = "the default GPU suite at real scale"
"""How ``gpu_session.sh truth`` labels the suite's run (``--label``), on every lease since the first."""


def newest_committed(results: Path, before: str) -> tuple[Path, str] | None:
    """(file, run id) of the newest suite run committed under ``results`` created before ``before`` (ISO time)."""
    found = []
    for path in sorted(results.rglob("runs*.json")):
        try:
            runs = json.loads(path.read_text()).get("runs") or []
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        found += [(r.get("created_at") or "", path, r["run_id"]) for r in runs
                  if str(r.get("label") or "").startswith(SUITE) and (r.get("created_at") or "") < before]
    if not found:
        return None
    _, path, run_id = max(found)
    return path, run_id


def since_last_lease(db: Path, results: Path) -> str:
    """The Markdown comparison, or one line saying why there is none."""
    store = Store(db, create=False)
    mine = [r for r in store.runs() if str(r.label or "").startswith(SUITE)]
    if not mine:
        return f"no run labelled '{SUITE}...' in {db}: nothing to compare\n"
    this = mine[-1]
    prior = newest_committed(results, this.created_at)
    if prior is None:
        return f"no earlier suite run committed under {results}: nothing to compare\n"
    path, prior_id = prior
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / "compare.db"
        shutil.copyfile(db, scratch)
        with Store(scratch) as s:
            import_file(s, path)
            before, after = s.run(prior_id), s.run(this.run_id)
            diff = diff_runs(before, derive(s.rows(before.run_id)), after, derive(s.rows(after.run_id)))
    return f"## This lease's suite run against {path} (ampbench compare --runs)\n\n" + markdown(diff)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, required=True, help="the lease's store (out/gpu/results.db)")
    ap.add_argument("--results", type=Path, required=True, help="benchmarks/results/<gpu>/: the committed runs")
    ap.add_argument("--out", type=Path, help="write the Markdown here (default: standard output)")
    a = ap.parse_args()
    text = since_last_lease(a.db, a.results)
    if a.out is None:
        sys.stdout.write(text)
    else:
        a.out.write_text(text)
        print(f"wrote {a.out}: {text.splitlines()[-1] if text.strip() else ''}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
