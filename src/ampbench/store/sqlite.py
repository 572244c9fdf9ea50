"""The embedded results store: SQLite (stdlib), versioned schema, WAL so two runs can write at once.

Each finished cell is committed at once (one transaction per row), so killing a run, even with
``kill -9``, loses only the cell in flight. Rows are stored whole as JSON next to a few indexed
columns; the schema version lives in ``PRAGMA user_version`` and :data:`MIGRATIONS` upgrades
older files in place.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
import uuid
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ampbench.errors import AmpbenchError
from ampbench.store.row_keys import row_problem

DB_ENV = "AMPBENCH_DB"

MIGRATIONS: list[str] = [
    # version 1: runs, one row per cell, hardware probes
    """
    CREATE TABLE runs (
        run_id TEXT PRIMARY KEY,
        created_at TEXT NOT NULL,
        finished_at TEXT,
        hostname TEXT,
        device TEXT,
        device_name TEXT,
        label TEXT,
        config TEXT NOT NULL
    );
    CREATE TABLE results (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL REFERENCES runs(run_id),
        cell_key TEXT NOT NULL,
        workload TEXT NOT NULL,
        preset TEXT,
        precision TEXT NOT NULL,
        device_name TEXT,
        batch_size INTEGER,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        row TEXT NOT NULL,
        UNIQUE (run_id, cell_key)
    );
    CREATE INDEX results_by_workload ON results (workload, precision);
    CREATE TABLE hw (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        device_name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        probe TEXT NOT NULL,
        UNIQUE (device_name, created_at)
    );
    """,
    # version 2: `ampbench diagnose` results (shown in the HTML report's workload sections)
    """
    CREATE TABLE diagnoses (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        workload TEXT NOT NULL,
        precision TEXT NOT NULL,
        device_name TEXT,
        created_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX diagnoses_by_workload ON diagnoses (workload, device_name);
    """,
    # version 3: `ampbench predict` rows (predictions on a named GPU: never mixed with measured results)
    """
    CREATE TABLE predictions (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        workload TEXT NOT NULL,
        precision TEXT NOT NULL,
        gpu TEXT NOT NULL,
        batch_size INTEGER,
        created_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    CREATE INDEX predictions_by_workload ON predictions (workload, gpu);
    """,
    # version 4: `ampbench hw --calibrate` kernel tables (a device's own kernel times: predict prices from them)
    """
    CREATE TABLE calibrations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        device_name TEXT NOT NULL,
        created_at TEXT NOT NULL,
        data TEXT NOT NULL
    );
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)
OUR_TABLES = {"runs", "results", "hw", "diagnoses", "predictions", "calibrations"}


def default_db_path() -> Path:
    """$AMPBENCH_DB, else $XDG_DATA_HOME/ampbench/results.db (~/.local/share/ampbench/results.db)."""
    if os.environ.get(DB_ENV):
        return Path(os.environ[DB_ENV]).expanduser()
    base = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "ampbench" / "results.db"


def _read_only(path: Path) -> str | None:
    """Why ``path`` (or, for a new store, the directory it would be made in) cannot be written, or None. SQLite in WAL
    mode also writes beside the file (its -wal and -shm), so the directory counts too."""
    existing = path if path.exists() else next((p for p in path.parents if p.exists()), None)
    if existing is None:
        return None
    folder = existing if existing.is_dir() else existing.parent
    try:
        if os.statvfs(folder).f_flag & os.ST_RDONLY:
            return "on a read-only filesystem"
    except OSError:
        pass
    if existing.is_file() and not os.access(existing, os.W_OK):
        return "this user cannot write the file"
    if not os.access(folder, os.W_OK):
        return f"this user cannot write its directory {folder}"
    return None


def utcnow() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    created_at: str
    finished_at: str | None
    hostname: str | None
    device: str | None
    device_name: str | None
    label: str | None
    config: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class Store:
    """Results of every run, in one SQLite file. Safe for several processes (WAL, busy timeout)."""

    def __init__(self, path: str | Path | None = None, *, create: bool = True) -> None:
        """``create=False`` (commands that only read): a missing file is an error, never a new empty store.

        Before anything is read or written the file passes SQLite's own check (``PRAGMA quick_check``): a damaged
        store (a valid header over a damaged page) is refused with one line, so no run writes into it and no
        report is built from part of it."""
        self.path = Path(path) if path is not None else default_db_path()
        self.skipped_rows = 0
        """Stored rows that reading skipped because a key holds the wrong type (see rows.row_problem)."""
        if not create and not self.path.is_file():
            raise AmpbenchError(f"--db {self.path}: no results store there; run `ampbench run` or `ampbench import FILE` "
                                "first, or give the store's path")
        read_only = _read_only(self.path)
        if read_only and create:  # (a command that writes: refused before any work)
            raise AmpbenchError(f"--db {self.path} is read-only ({read_only}): this command stores rows; copy the store "
                                f"somewhere writable (cp {self.path} results.db) and give that --db")
        self.read_only = bool(read_only)
        """Opened for reading only (a store on a read-only filesystem, or a file this user cannot write)."""
        try:
            if create:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            if read_only:
                self._conn = self._open_read_only()
            else:
                self._conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            self._check_integrity()
            self._refuse_foreign(create)  # before anything is written to the file (even the journal mode)
            if not read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.execute("PRAGMA foreign_keys=ON")
            self._migrate()
        except sqlite3.DatabaseError as e:
            raise AmpbenchError(f"--db {self.path}: not a usable ampbench results store ({e})") from None
        except OSError as e:
            raise AmpbenchError(f"--db {self.path}: cannot open ({e.strerror or e})") from None

    def _open_read_only(self) -> sqlite3.Connection:
        """A read-only store: opened immutable (SQLite may create no -wal/-shm beside it, and nothing changes it
        meanwhile); with rows still in its write-ahead log (its writer did not close it), a private copy of both
        is read instead, so those rows are not missed."""
        wal = self.path.with_name(self.path.name + "-wal")
        if wal.is_file() and wal.stat().st_size > 0:
            self._copy_dir = tempfile.mkdtemp(prefix="ampbench-ro-")
            weakref.finalize(self, shutil.rmtree, self._copy_dir, True)  # (also when the store is never closed)
            copy = Path(self._copy_dir) / self.path.name
            shutil.copyfile(self.path, copy)
            shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
            return sqlite3.connect(copy, timeout=30.0, isolation_level=None)
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro&immutable=1", uri=True, timeout=30.0,
                               isolation_level=None)

    def close(self) -> None:
        self._conn.close()
        if getattr(self, "_copy_dir", None):
            shutil.rmtree(self._copy_dir, ignore_errors=True)

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _check_integrity(self) -> None:
        """SQLite's quick_check (every page's structure, not the row contents): refuse a damaged file untouched."""
        try:
            problems = [r[0] for r in self._conn.execute("PRAGMA quick_check").fetchall()]
        except sqlite3.DatabaseError as e:
            problems = [str(e)]
        if problems != ["ok"]:
            self._conn.close()
            if problems[0] == "file is not a database":
                raise AmpbenchError(f"--db {self.path}: not a usable ampbench results store (not an SQLite database); "
                                    "give an ampbench results store or a new file")
            raise AmpbenchError(f"--db {self.path} is damaged (SQLite's integrity check: {problems[0]}); nothing was "
                                "read from or written to it: restore it from a backup or export, or give another --db")

    def _refuse_foreign(self, create: bool = True) -> None:
        """Someone else's SQLite database: never add our tables to it, nor change its journal mode. A reader
        (``create=False``) never writes: an empty file (0 bytes, or a database with nothing in it) is no store."""
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        tables = {r[0] for r in self._conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        if not create and version == 0 and not tables:
            self._conn.close()
            raise AmpbenchError(f"--db {self.path}: not an ampbench results store (an empty file: nothing was ever "
                                "stored in it); give the store `ampbench run` or `ampbench import` wrote")
        if tables - OUR_TABLES - {"sqlite_sequence"} or (version == 0 and tables):
            self._conn.close()
            raise AmpbenchError(f"--db {self.path} is an SQLite database of something else (tables: "
                                f"{', '.join(sorted(tables))}); give a new file or an ampbench results store")

    def _migrate(self) -> None:
        version = self._conn.execute("PRAGMA user_version").fetchone()[0]
        if version > SCHEMA_VERSION:
            raise AmpbenchError(f"--db {self.path} has schema version {version}, newer than this ampbench "
                                f"({SCHEMA_VERSION}): upgrade ampbench")
        if version == SCHEMA_VERSION:
            return
        if self.read_only:
            raise AmpbenchError(f"--db {self.path} has schema version {version}, older than this ampbench's "
                                f"({SCHEMA_VERSION}), and is read-only, so it cannot be upgraded: copy it somewhere "
                                f"writable (cp {self.path} results.db) and give that --db")
        with self._tx() as c:
            version = c.execute("PRAGMA user_version").fetchone()[0]  # another process may have migrated
            for v in range(version, SCHEMA_VERSION):  # statement by statement: executescript() would COMMIT
                for stmt in MIGRATIONS[v].split(";"):
                    if stmt.strip():
                        c.execute(stmt)
            c.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    # -- runs --------------------------------------------------------------------------------
    def create_run(self, config: dict[str, Any], *, device: str, device_name: str, hostname: str,
                   label: str | None = None, run_id: str | None = None) -> RunInfo:
        info = RunInfo(run_id or new_run_id(), utcnow(), None, hostname, device, device_name, label, config)
        with self._tx() as c:
            c.execute("INSERT INTO runs VALUES (?,?,?,?,?,?,?,?)",
                      (info.run_id, info.created_at, None, hostname, device, device_name, label, json.dumps(config)))
        return info

    def finish_run(self, run_id: str) -> None:
        with self._tx() as c:
            c.execute("UPDATE runs SET finished_at=? WHERE run_id=?", (utcnow(), run_id))

    def runs(self) -> list[RunInfo]:
        cur = self._conn.execute("SELECT run_id, created_at, finished_at, hostname, device, device_name, label, config "
                                 "FROM runs ORDER BY created_at, rowid")
        return [RunInfo(*r[:7], json.loads(r[7])) for r in cur.fetchall()]

    def run(self, run_id: str) -> RunInfo:
        for r in self.runs():
            if r.run_id == run_id or (len(run_id) >= 4 and r.run_id.startswith(run_id)):
                return r
        known = ", ".join(r.run_id for r in self.runs()[-5:]) or "none yet"
        raise AmpbenchError(f"no run {run_id!r} in {self.path} (latest: {known})")

    def latest_run(self) -> RunInfo | None:
        runs = self.runs()
        return runs[-1] if runs else None

    # -- rows --------------------------------------------------------------------------------
    def add(self, row: dict[str, Any]) -> bool:
        """Commit one cell's row now. Returns False when (run_id, cell_key) was already stored."""
        with self._tx() as c:
            cur = c.execute(
                "INSERT OR IGNORE INTO results (run_id, cell_key, workload, preset, precision, device_name, batch_size, "
                "status, created_at, row) VALUES (?,?,?,?,?,?,?,?,?,?)",
                (row["run_id"], row["cell_key"], row["workload"], row.get("preset"), row["precision"],
                 row.get("device_name"), row.get("batch_size"), row["status"], row.get("created_at") or utcnow(),
                 json.dumps(row, allow_nan=True)),
            )
            return cur.rowcount == 1

    def stored_row(self, run_id: str, cell_key: str) -> dict[str, Any] | None:
        """The row stored for one cell of one run, as written (None when there is none)."""
        r = self._conn.execute("SELECT row FROM results WHERE run_id=? AND cell_key=?", (run_id, cell_key)).fetchone()
        return None if r is None else json.loads(r[0])

    def cell_keys(self, run_id: str) -> set[str]:
        return {r[0] for r in self._conn.execute("SELECT cell_key FROM results WHERE run_id=?", (run_id,))}

    def rows(self, run_id: str | None = None, workloads: list[str] | None = None,
             precisions: list[str] | None = None) -> list[dict[str, Any]]:
        """Stored rows (oldest first), optionally of one run / some workloads / some precisions."""
        sql, args = "SELECT row FROM results WHERE 1=1", []
        if run_id is not None:
            sql += " AND run_id=?"
            args.append(run_id)
        for col, values in (("workload", workloads), ("precision", precisions)):
            if values:
                sql += f" AND {col} IN ({','.join('?' * len(values))})"
                args.extend(values)
        out = []
        for (text,) in self._conn.execute(sql + " ORDER BY id", args):
            try:
                row = json.loads(text)
            except json.JSONDecodeError:
                row = None
            if row_problem(row) is None:
                out.append(row)
            else:  # (older imports were not validated): a reader never crashes on a stored row
                self.skipped_rows += 1
        return out

    # -- hardware probes -----------------------------------------------------------------------
    def add_hw(self, probe: dict[str, Any]) -> None:
        """Store a hardware probe once per (device, time). A probe without its time is stamped with it, in the stored
        probe too: its export carries the time, so importing it twice adds it once (it added it again when the
        second import fell in another second)."""
        probe = {**probe, "created_at": probe.get("created_at") or utcnow()}
        with self._tx() as c:
            c.execute("INSERT OR IGNORE INTO hw (device_name, created_at, probe) VALUES (?,?,?)",
                      (probe["device_name"], probe["created_at"], json.dumps(probe)))

    def hw(self, device_name: str | None = None) -> list[dict[str, Any]]:
        sql, args = "SELECT probe FROM hw", []
        if device_name is not None:
            sql += " WHERE device_name=?"
            args.append(device_name)
        return [json.loads(r[0]) for r in self._conn.execute(sql + " ORDER BY id", args)]

    # -- kernel calibrations -----------------------------------------------------------------
    def add_calibration(self, table: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO calibrations (device_name, created_at, data) VALUES (?,?,?)",
                      (table["device_name"], table.get("created_at") or utcnow(),
                       json.dumps(table, allow_nan=True, default=str)))

    def calibrations(self, device_name: str | None = None) -> list[dict[str, Any]]:
        """Stored kernel tables (``ampbench hw --calibrate``), oldest first; of one device when named."""
        sql, args = "SELECT data FROM calibrations", []
        if device_name is not None:
            sql += " WHERE device_name=?"
            args.append(device_name)
        return [json.loads(r[0]) for r in self._conn.execute(sql + " ORDER BY id", args)]

    # -- diagnoses ---------------------------------------------------------------------------
    def add_diagnosis(self, diagnosis: dict[str, Any]) -> None:
        with self._tx() as c:
            c.execute("INSERT INTO diagnoses (workload, precision, device_name, created_at, data) VALUES (?,?,?,?,?)",
                      (diagnosis["target"], diagnosis["precision"], diagnosis.get("device_name"),
                       diagnosis.get("created_at") or utcnow(), json.dumps(diagnosis, allow_nan=True, default=str)))

    def diagnoses(self, workload: str | None = None, device_name: str | None = None) -> list[dict[str, Any]]:
        """Stored diagnoses, oldest first (optionally of one workload on one device)."""
        sql, args = "SELECT data FROM diagnoses WHERE 1=1", []
        for col, v in (("workload", workload), ("device_name", device_name)):
            if v is not None:
                sql += f" AND {col}=?"
                args.append(v)
        return [json.loads(r[0]) for r in self._conn.execute(sql + " ORDER BY id", args)]

    # -- predictions -------------------------------------------------------------------------
    def add_predictions(self, rows: list[dict[str, Any]]) -> None:
        """``ampbench predict``'s rows, in one transaction (all of a command's rows or none)."""
        with self._tx() as c:
            for row in rows:
                row = {**row, "created_at": row.get("created_at") or utcnow()}
                c.execute("INSERT INTO predictions (workload, precision, gpu, batch_size, created_at, data) "
                          "VALUES (?,?,?,?,?,?)", (row["workload"], row["precision"], row["gpu"], row.get("batch_size"),
                                                   row["created_at"], json.dumps(row, allow_nan=True, default=str)))

    def predictions(self, workloads: list[str] | None = None, gpu: str | None = None) -> list[dict[str, Any]]:
        """Stored predictions, oldest first (optionally of these workloads, on one GPU)."""
        sql, args = "SELECT data FROM predictions WHERE 1=1", []
        if workloads is not None:
            sql += f" AND workload IN ({','.join('?' * len(workloads))})"
            args += workloads
        if gpu is not None:
            sql += " AND gpu=?"
            args.append(gpu)
        return [json.loads(r[0]) for r in self._conn.execute(sql + " ORDER BY id", args)]

    # -- exchange ----------------------------------------------------------------------------
    def import_runs(self, runs: list[dict[str, Any]]) -> int:
        n = 0
        with self._tx() as c:
            for r in runs:
                cur = c.execute("INSERT OR IGNORE INTO runs VALUES (?,?,?,?,?,?,?,?)",
                                (r["run_id"], r["created_at"], r.get("finished_at"), r.get("hostname"),
                                 r.get("device"), r.get("device_name"), r.get("label"), json.dumps(r.get("config", {}))))
                n += cur.rowcount
        return n


def new_run_id() -> str:
    """Sortable and unique across machines: UTC time + random suffix."""
    return datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
