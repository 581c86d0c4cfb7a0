"""The journal of idempotency keys: one SQLite file, so a key the client made survives its process.

A submission's key is written before the first attempt and stays until the server's answer names its
job; a process killed in between, run again with the same request, finds the open entry (same identity,
same request) and sends the same key: the server answers with the one job it made, or makes it now.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import os
import secrets
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A key is remembered by the server for the job's retention (JOBGATE_JOB_TTL, 720 h by default);
# a finished entry is kept as long, then pruned.
DEFAULT_RETENTION = 720 * 3600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
  key TEXT PRIMARY KEY,
  scope TEXT NOT NULL,
  path TEXT NOT NULL,
  fingerprint TEXT NOT NULL,
  type TEXT NOT NULL,
  state TEXT NOT NULL,          -- pending | accepted | done
  job_id TEXT,
  created_at REAL NOT NULL,
  updated_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_open ON entries (scope, path, fingerprint, state);
"""


def default_path() -> Path:
    """$XDG_STATE_HOME/jobgate/journal.sqlite, else ~/.local/state/jobgate/journal.sqlite."""
    base = os.environ.get("XDG_STATE_HOME", "")
    root = Path(base) if base and os.path.isabs(base) else Path.home() / ".local" / "state"
    return root / "jobgate" / "journal.sqlite"


def new_key() -> str:
    """A new random idempotency key (the format pkg/client uses)."""
    return "jg-" + base64.b32encode(secrets.token_bytes(20)).decode().rstrip("=")


def _canon(v: Any) -> Any:
    # 63 and 63.0 are one number to the server (RFC 8785 reads doubles); so they are here.
    if isinstance(v, float) and math.isfinite(v) and v.is_integer() and abs(v) < 2**53:
        return int(v)
    if isinstance(v, dict):
        return {str(k): _canon(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_canon(x) for x in v]
    return v


def fingerprint(body: Any) -> str:
    """The journal's identity of a request: SHA-256 of its canonical JSON (key order, white space and
    63 vs 63.0 do not matter). Unlike the server's it does not apply the type's defaults."""
    raw = json.dumps(_canon(body), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(raw.encode()).hexdigest()


@dataclass(frozen=True)
class Entry:
    key: str
    scope: str
    path: str
    fingerprint: str
    type: str
    state: str
    job_id: str | None
    created_at: float

    @property
    def open(self) -> bool:
        return self.state in ("pending", "accepted")


class KeyConflict(Exception):
    """The caller's key is journaled for another request."""

    def __init__(self, entry: Entry) -> None:
        self.entry = entry
        super().__init__(f"the journal holds this key for a different {entry.type} request")


class Journal:
    """The SQLite journal. Each operation opens the file, so several processes can share it; SQLite's
    lock serialises them (``busy_timeout`` bounds the wait)."""

    def __init__(self, path: str | os.PathLike[str] | None = None, retention: float = DEFAULT_RETENTION) -> None:
        self.path = Path(path) if path is not None else default_path()
        self.retention = retention

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fresh = not self.path.exists()
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None)
        try:
            if fresh:
                # The file holds raw keys: private to its user.
                with contextlib.suppress(OSError):
                    os.chmod(self.path, 0o600)
            db.execute("PRAGMA busy_timeout = 10000")
            db.executescript(_SCHEMA)
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            db.close()

    @staticmethod
    def _row(r: Any) -> Entry:
        return Entry(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7])

    _COLS = "key, scope, path, fingerprint, type, state, job_id, created_at"

    def claim(
        self, scope: str, path: str, typ: str, fp: str, key: str | None, fresh: bool = False
    ) -> tuple[Entry, bool]:
        """The entry a submission uses, written before anything is sent: the caller's key (refused when
        it is journaled for another request), else the open entry of the same request (a rerun after a
        crash), else a new key. Returns it and whether it was reused."""
        now = time.time()
        with self._tx() as db:
            db.execute("DELETE FROM entries WHERE state = 'done' AND updated_at < ?", (now - self.retention,))
            if key is not None:
                r = db.execute(f"SELECT {self._COLS} FROM entries WHERE key = ?", (key,)).fetchone()
                if r is not None:
                    e = self._row(r)
                    if e.fingerprint != fp or e.scope != scope or e.path != path:
                        raise KeyConflict(e)
                    return e, True
            elif not fresh:
                r = db.execute(
                    f"SELECT {self._COLS} FROM entries WHERE scope = ? AND path = ? AND fingerprint = ?"
                    " AND state IN ('pending', 'accepted') ORDER BY created_at DESC LIMIT 1",
                    (scope, path, fp),
                ).fetchone()
                if r is not None:
                    return self._row(r), True
            e = Entry(key or new_key(), scope, path, fp, typ, "pending", None, now)
            db.execute(
                "INSERT INTO entries (key, scope, path, fingerprint, type, state, job_id, created_at, updated_at)"
                " VALUES (?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                (e.key, scope, path, fp, typ, e.state, now, now),
            )
            return e, False

    def record(self, key: str, job_id: str, ended: bool) -> None:
        """The server answered with the entry's job (or batch): a repeat no longer reuses the key once
        the job ended; until then an identical submit still resolves to it."""
        with self._tx() as db:
            db.execute(
                "UPDATE entries SET job_id = ?, state = ?, updated_at = ? WHERE key = ?",
                (job_id, "done" if ended else "accepted", time.time(), key),
            )

    def forget(self, key: str) -> None:
        """The server refused the request for good (invalid, or the key is another request's)."""
        with self._tx() as db:
            db.execute("DELETE FROM entries WHERE key = ?", (key,))

    def finished(self, job_id: str) -> None:
        """The job was seen terminal: its entry is no longer open."""
        with self._tx() as db:
            db.execute(
                "UPDATE entries SET state = 'done', updated_at = ? WHERE job_id = ? AND state != 'done'",
                (time.time(), job_id),
            )

    def entries(self, scope: str | None = None) -> list[Entry]:
        with self._tx() as db:
            if scope is None:
                rows = db.execute(f"SELECT {self._COLS} FROM entries ORDER BY created_at").fetchall()
            else:
                rows = db.execute(
                    f"SELECT {self._COLS} FROM entries WHERE scope = ? ORDER BY created_at", (scope,)
                ).fetchall()
        return [self._row(r) for r in rows]
