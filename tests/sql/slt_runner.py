"""sqllogictest scripts run as incremental views: every query a ``ddflow.sql`` view kept
exact while its tables change, checked against SQLite after every commit.

A sqllogictest script (SQLite's format) is a list of records: ``statement ok|error``,
``query <types> <sort> [label]`` with its SQL and, after ``----``, the expected values (or
``N values hashing to H``), ``hash-threshold N``, ``halt``, and ``skipif``/``onlyif <engine>``
conditions; this runner is the engine ``sqlite``. A file is run in two passes:

1. *Plan* (SQLite only). The statements run on a *target* SQLite database, exactly as the
   file says. Each run of queries is a *segment*: its queries become views first, then the
   tables move from what ddflow holds to the target's rows in three commits (inserts in
   batches; deletes; rows deleted and re-inserted a commit later; updates that set a column to
   NULL or another value and are undone; a duplicate row; a row of NULLs in an empty table).
   A *mirror* SQLite database holds what ddflow holds and answers every live query after
   every commit: those answers are the oracle.
2. *Run* (ddflow). The same DDL, views and commits replayed on ``ddflow.sql.Database``, the
   views split into groups (one database each) so no database holds hundreds of views. After
   every commit each view's ``rows()`` must equal the mirror's answer (as a multiset; the
   order of ``nosort`` results only at the end of a segment, where the file's answer is
   deterministic), and at the end of its segment the file's recorded answer.

Each query ends in one outcome: ``passed``, ``unsupported`` (``UnsupportedSQL``, with the
construct it names), ``wrong`` (a repro: SQL, rows, expected, got) or ``crashed`` (any
other exception, with the head of its traceback).

Values are compared as sqllogictest prints them (its ``slt_sqlite.c``): ``I`` as a 32-bit
integer, ``R`` as ``%.3f``, ``T`` as text with ``(empty)`` for ``''`` and ``@`` for control
characters, ``NULL`` for NULL; ``rowsort`` sorts rows and ``valuesort`` values as strings.

Usage: ``python tests/sql/slt_runner.py [FILE ...] [--json OUT] [--repro] [-v]``
(no files: the whole vendored sample under ``tests/sql/slt/``).
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import json
import random
import re
import sqlite3
import sys
import time
import traceback
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

ENGINE = "sqlite"
SLT_DIR = Path(__file__).resolve().parent / "slt"
FAST_QUERIES = 30  # the default test runs each file's first queries only
TAIL_EVENTS = 60  # how far past its last query a group's views stay checked
GROUP_SIZE = 16  # views per Database: creating a view rebuilds the dataflow of all views

Row = tuple[Any, ...]


# -- the sqllogictest format ---------------------------------------------------------------
@dataclass(frozen=True)
class Record:
    """One record of a script: its kind, first line number and what it carries."""

    kind: str  # "statement" | "query" | "hash-threshold" | "halt"
    line: int
    sql: str = ""
    expect_ok: bool = True  # statements: "ok" or "error"
    types: str = ""  # queries: one of I/T/R per column
    sort: str = "nosort"
    label: str = ""
    expected: tuple[str, ...] | None = None  # listed values
    expected_hash: tuple[int, str] | None = None  # (values, md5)
    threshold: int = 0
    skip: bool = False  # a skipif/onlyif condition excludes it for ENGINE


_HASH_RE = re.compile(r"^(\d+) values hashing to ([0-9a-f]{32})$")


def parse_script(text: str) -> list[Record]:
    """The records of a script, in order (skipped ones included, marked ``skip``)."""
    lines = text.split("\n")
    records: list[Record] = []
    i, n = 0, len(lines)
    while i < n:
        line = lines[i].rstrip("\r")
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        skip = False
        tokens = line.split()
        while tokens and tokens[0] in ("skipif", "onlyif"):
            engine = tokens[1] if len(tokens) > 1 else ""
            match = engine.lower() == ENGINE
            if (tokens[0] == "skipif") == match:
                skip = True
            i += 1
            tokens = lines[i].rstrip("\r").split() if i < n else []
        start = i + 1  # the line of "statement"/"query", as sqllogictest reports it
        i += 1
        body: list[str] = []
        while i < n and lines[i].strip():
            body.append(lines[i].rstrip("\r"))
            i += 1
        kind = tokens[0] if tokens else ""
        if kind == "statement":
            records.append(
                Record("statement", start, "\n".join(body), expect_ok=tokens[1] == "ok", skip=skip)
            )
        elif kind == "query":
            sql_lines, result = body, None
            if "----" in body:
                k = body.index("----")
                sql_lines, result = body[:k], body[k + 1 :]
            expected, hashed = None, None
            if result is not None:
                m = _HASH_RE.match(result[0]) if len(result) == 1 else None
                if m:
                    hashed = (int(m.group(1)), m.group(2))
                else:
                    expected = tuple(result)
            records.append(
                Record(
                    "query",
                    start,
                    "\n".join(sql_lines),
                    types=tokens[1],
                    sort=tokens[2] if len(tokens) > 2 else "nosort",
                    label=tokens[3] if len(tokens) > 3 else "",
                    expected=expected,
                    expected_hash=hashed,
                    skip=skip,
                )
            )
        elif kind == "hash-threshold":
            records.append(Record("hash-threshold", start, threshold=int(tokens[1]), skip=skip))
        elif kind == "halt":
            records.append(Record("halt", start, skip=skip))
        # anything else (a stray line) is ignored, as sqllogictest does
    return records


def cut_script(text: str, max_bytes: int) -> str:
    """The longest prefix of whole records (blank-line separated) within ``max_bytes``."""
    if len(text.encode()) <= max_bytes:
        return text
    out: list[str] = []
    size = 0
    for block in re.split(r"\n\n+", text):
        b = len(block.encode()) + 2
        if size + b > max_bytes:
            break
        out.append(block)
        size += b
    return "\n\n".join(out) + "\n"


# -- values as sqllogictest prints them ----------------------------------------------------
_INT_PREFIX = re.compile(r"^\s*([+-]?\d+)")
_REAL_PREFIX = re.compile(r"^\s*([+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)")


def _int64(v: Any) -> int:
    """SQLite's integer value of ``v`` (sqlite3_column_int64)."""
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, int):
        return ((v + 2**63) % 2**64) - 2**63
    if isinstance(v, float | Decimal):
        f = float(v)
        if f != f:
            return 0
        if f <= -(2.0**63):
            return -(2**63)
        if f >= 2.0**63:
            return 2**63 - 1
        return int(f)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    m = _INT_PREFIX.match(str(v))
    return _int64(int(m.group(1))) if m else 0


def _double(v: Any) -> float:
    """SQLite's real value of ``v`` (sqlite3_column_double)."""
    if isinstance(v, int | float | Decimal):
        return float(v)
    if isinstance(v, bytes):
        v = v.decode("utf-8", "replace")
    m = _REAL_PREFIX.match(str(v))
    return float(m.group(1)) if m else 0.0


def real_text(f: float) -> str:
    """A REAL as SQLite renders it as text (``%!.15g``: 15 significant digits, always a
    decimal point). Rounds the exact binary value half away from zero; SQLite's long-double
    printf can round the other way when the 16th digit is exactly a tie (rare here)."""
    if f != f:
        return ""
    if f in (float("inf"), float("-inf")):
        return "Inf" if f > 0 else "-Inf"
    if f == 0:
        return "0.0"
    sign = "-" if f < 0 else ""
    d = Decimal(abs(f))
    e = d.adjusted()
    m = d.scaleb(-e).quantize(Decimal("1." + "0" * 14), rounding="ROUND_HALF_UP")
    if m >= 10:
        e += 1
        m = (m / 10).quantize(Decimal("1." + "0" * 14), rounding="ROUND_HALF_UP")
    if e < -4 or e >= 15:
        mant = str(m).rstrip("0")
        mant = mant + "0" if mant.endswith(".") else mant
        return f"{sign}{mant}e{'-' if e < 0 else '+'}{abs(e):02d}"
    fixed = f"{m.scaleb(e):.{max(14 - e, 0)}f}"
    if "." in fixed:
        fixed = fixed.rstrip("0")
        fixed = fixed + "0" if fixed.endswith(".") else fixed
    else:
        fixed += ".0"
    return sign + fixed


def real_3f(f: float) -> str:
    """``%.3f`` as SQLite's printf wrote it when the files were made: the magnitude plus
    0.0005 (in floating point), rounded to 16 significant digits (later ones print as 0),
    then truncated to 3 decimals."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "Inf" if f > 0 else "-Inf"
    sign = "-" if f < 0 else ""
    d = Decimal(abs(f) + 0.0005)
    if d >= 1:
        digits = len(str(int(d)))
        if digits > 16:
            q = Decimal(10) ** (digits - 16)
            d = (d / q).quantize(Decimal(1), rounding="ROUND_HALF_UP") * q
        else:
            d = d.quantize(Decimal(10) ** -(16 - digits), rounding="ROUND_HALF_UP")
    d = d.quantize(Decimal("0.001"), rounding="ROUND_DOWN")
    return f"{sign}{d:.3f}"


def _text(v: Any) -> str:
    if isinstance(v, str):
        return v
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return real_text(v)
    if isinstance(v, Decimal):
        return real_text(float(v)) if v != v.to_integral_value() else str(int(v))
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def plain(v: Any) -> Any:
    """A numpy scalar as the Python value it holds; other values unchanged."""
    if hasattr(v, "item") and not isinstance(v, int | float | str | bytes | Decimal):
        return v.item()
    return v


def format_value(v: Any, t: str) -> str:
    """One value as sqllogictest prints it for column type ``t`` (I, R or T)."""
    v = plain(v)
    if v is None:
        return "NULL"
    if t == "I":
        i = _int64(v) & 0xFFFFFFFF
        return str(i - 2**32 if i >= 2**31 else i)
    if t == "R":
        return real_3f(_double(v))
    s = _text(v)
    if s == "":
        return "(empty)"
    return "".join("@" if b < 0x20 or b > 0x7E else chr(b) for b in s.encode("utf-8"))


def format_rows(rows: Iterable[Sequence[Any]], types: str) -> list[tuple[str, ...]]:
    """Rows as tuples of printed values; a row of the wrong width raises ``ValueError``."""
    out = []
    for r in rows:
        if len(r) != len(types):
            raise ValueError(f"a row of {len(r)} columns for types {types!r}: {tuple(r)!r}")
        out.append(tuple(format_value(v, t) for v, t in zip(r, types, strict=True)))
    return out


def result_values(frows: list[tuple[str, ...]], sort: str) -> list[str]:
    """The printed values in sqllogictest's order for ``sort`` (nosort/rowsort/valuesort)."""
    if sort == "rowsort":
        frows = sorted(frows)
    values = [v for r in frows for v in r]
    if sort == "valuesort":
        values.sort()
    return values


def values_hash(values: list[str]) -> str:
    return hashlib.md5("".join(v + "\n" for v in values).encode()).hexdigest()


def matches_recorded(values: list[str], rec: Record) -> bool:
    """Whether printed values agree with the file's recorded answer (listed or hashed)."""
    if rec.expected_hash is not None:
        n, h = rec.expected_hash
        return len(values) == n and values_hash(values) == h
    if rec.expected is not None:
        return list(rec.expected) == values
    return True


# -- plan: the file on SQLite, the commits and the oracle ----------------------------------
_CREATE_TABLE = re.compile(r"^\s*CREATE\s+(TEMP\s+|TEMPORARY\s+)?TABLE\b", re.I)
_DROP_TABLE = re.compile(r"^\s*DROP\s+TABLE\b", re.I)
_VIEW_DDL = re.compile(r"^\s*(CREATE\s+(TEMP\s+|TEMPORARY\s+)?VIEW|DROP\s+VIEW)\b", re.I)


@dataclass
class Query:
    qid: int
    rec: Record
    segment: int


@dataclass
class Commit:
    """One commit's changes: table -> (rows deleted, rows inserted)."""

    changes: dict[str, tuple[list[Row], list[Row]]]


@dataclass
class Event:
    kind: str  # "ddl" | "define" | "drop" | "commit" | "check" | "final"
    sql: str = ""
    expect_ok: bool = True
    qids: tuple[int, ...] = ()
    commit: Commit | None = None
    checkpoint: int = -1
    table: str = ""  # ddl: the table a DROP TABLE drops


@dataclass
class Snapshot:
    """The mirror at a checkpoint: its tables' rows and each live query's answer."""

    tables: dict[str, list[Row]]
    answers: dict[int, list[Row] | str]  # qid -> rows (SQLite's order) or an error message


@dataclass
class FilePlan:
    name: str
    queries: dict[int, Query]
    events: list[Event]
    snapshots: list[Snapshot]
    ddl: dict[str, str]  # table -> its CREATE TABLE statement (for repros)
    columns: dict[str, list[tuple[str, str, bool]]]  # table -> (name, affinity, not null)
    notes: list[str] = field(default_factory=list)
    skipped: int = 0
    oracle_disagrees: dict[int, str] = field(default_factory=dict)  # qid -> what differs


def _affinity(decl: str) -> str:
    """SQLite's type affinity of a declared column type."""
    d = decl.upper()
    if "INT" in d:
        return "INTEGER"
    if "CHAR" in d or "CLOB" in d or "TEXT" in d:
        return "TEXT"
    if "BLOB" in d or not d:
        return "BLOB"
    if "REAL" in d or "FLOA" in d or "DOUB" in d:
        return "REAL"
    return "NUMERIC"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _mentions(sql: str, name: str) -> bool:
    return re.search(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", sql, re.I) is not None


class _Planner:
    """Walks a script on SQLite, building the events a ddflow run replays and the oracle."""

    def __init__(self, name: str, records: list[Record]) -> None:
        self.name = name
        self.records = records
        self.rng = random.Random(zlib.crc32(name.encode()))
        self.target = sqlite3.connect(":memory:")
        self.mirror = sqlite3.connect(":memory:")
        self.events: list[Event] = []
        self.snapshots: list[Snapshot] = []
        self.queries: dict[int, Query] = {}
        self.live: list[int] = []  # qids whose views exist in ddflow
        self.pending: list[int] = []
        self.ddl: dict[str, str] = {}
        self.columns: dict[str, list[tuple[str, str, bool]]] = {}
        self.notes: list[str] = []
        self.skipped = 0
        self.segment = 0

    # tables of the mirror (and target): the same names and declared types
    def _tables(self, conn: sqlite3.Connection) -> list[str]:
        return [
            r[0]
            for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")
        ]

    def _rows(self, conn: sqlite3.Connection, table: str) -> list[Row]:
        return [tuple(r) for r in conn.execute(f"SELECT * FROM {_quote(table)}")]

    def plan(self) -> FilePlan:
        for rec in self.records:
            if rec.skip:
                self.skipped += rec.kind in ("statement", "query")
                continue
            if rec.kind == "halt":
                break
            if rec.kind == "statement":
                if self.pending:
                    self._flush()
                self._statement(rec)
            elif rec.kind == "query":
                qid = len(self.queries)
                self.queries[qid] = Query(qid, rec, self.segment)
                self.pending.append(qid)
        if self.pending:
            self._flush()
        return FilePlan(
            self.name,
            self.queries,
            self.events,
            self.snapshots,
            self.ddl,
            self.columns,
            self.notes,
            self.skipped,
        )

    def _statement(self, rec: Record) -> None:
        try:
            if sqlite3.complete_statement(rec.sql.strip().rstrip(";") + ";;"):
                pass
            try:
                self.target.execute(rec.sql)
            except sqlite3.ProgrammingError:  # several statements: sqlite3_exec runs them all
                self.target.executescript(rec.sql)
            self.target.commit()
            ok = True
        except sqlite3.Error as e:
            ok = False
            if rec.expect_ok:
                self.notes.append(
                    f"{self.name}:{rec.line}: SQLite {sqlite3.sqlite_version} "
                    f"fails a 'statement ok': {e}"
                )
        if not rec.expect_ok and ok:
            self.notes.append(
                f"{self.name}:{rec.line}: SQLite {sqlite3.sqlite_version} "
                "accepts a 'statement error'"
            )
        sql = rec.sql
        if _CREATE_TABLE.match(sql) or _DROP_TABLE.match(sql) or _VIEW_DDL.match(sql):
            table = ""
            if _DROP_TABLE.match(sql) and ok:
                m = re.match(r"^\s*DROP\s+TABLE\s+(IF\s+EXISTS\s+)?([\w$]+)", sql, re.I)
                table = m.group(2).lower() if m else ""
                gone = [q for q in self.live if _mentions(self.queries[q].rec.sql, table)]
                if gone:
                    self.events.append(Event("drop", qids=tuple(gone)))
                    self.live = [q for q in self.live if q not in gone]
            self.events.append(Event("ddl", sql=sql, expect_ok=ok, table=table))
            if ok:
                self._mirror_ddl(sql)

    def _mirror_ddl(self, sql: str) -> None:
        """The mirror follows the target's schema: tables with the declared types, no
        constraints (ddflow does not enforce them, so the mirror must not either)."""
        if _VIEW_DDL.match(sql):
            self.mirror.execute(sql)
            return
        have = set(self._tables(self.mirror))
        want = set(self._tables(self.target))
        for t in have - want:
            self.mirror.execute(f"DROP TABLE {_quote(t)}")
            self.columns.pop(t.lower(), None)
        for t in sorted(want - have):
            info = list(self.target.execute(f"PRAGMA table_info({_quote(t)})"))
            cols = ", ".join(f"{_quote(r[1])} {r[2]}" for r in info)
            self.mirror.execute(f"CREATE TABLE {_quote(t)}({cols})")
            self.columns[t.lower()] = [(r[1], _affinity(r[2]), bool(r[3])) for r in info]
            self.ddl[t.lower()] = sql
        self.mirror.commit()

    def _checkpoint(self) -> int:
        tables = {t.lower(): self._rows(self.mirror, t) for t in self._tables(self.mirror)}
        answers: dict[int, list[Row] | str] = {}
        for q in self.live:
            try:
                answers[q] = [tuple(r) for r in self.mirror.execute(self.queries[q].rec.sql)]
            except sqlite3.Error as e:
                answers[q] = f"SQLite error: {e}"
        self.snapshots.append(Snapshot(tables, answers))
        cp = len(self.snapshots) - 1
        self.events.append(Event("check", checkpoint=cp))
        return cp

    def _flush(self) -> None:
        """Views for the pending queries, then the tables moved to the target's rows in
        three commits with churn, checked after each."""
        qids = tuple(self.pending)
        self.pending = []
        self.events.append(Event("define", qids=qids))
        self.live.extend(qids)
        self._checkpoint()
        for commit in self._schedule():
            self._apply(commit)
            self.events.append(Event("commit", commit=commit))
            self._checkpoint()
        self.events.append(Event("final", qids=qids, checkpoint=len(self.snapshots) - 1))
        self.segment += 1

    def _apply(self, commit: Commit) -> None:
        for t, (dels, ins) in commit.changes.items():
            cols = self.columns[t]
            cond = " AND ".join(f"{_quote(c[0])} IS ?" for c in cols)
            for r in dels:
                cur = self.mirror.execute(
                    f"DELETE FROM {_quote(t)} WHERE rowid IN (SELECT rowid FROM {_quote(t)} "
                    f"WHERE {cond} LIMIT 1)",
                    r,
                )
                assert cur.rowcount == 1, (t, r)
            if ins:
                marks = ", ".join("?" for _ in cols)
                self.mirror.executemany(f"INSERT INTO {_quote(t)} VALUES({marks})", ins)
        self.mirror.commit()

    def _mutate(self, t: str, row: Row) -> Row:
        """The row with one column changed: to NULL, or to a nearby value of its type."""
        cols = self.columns[t]
        j = self.rng.randrange(len(cols))
        _, aff, not_null = cols[j]
        v = row[j]
        if v is not None and not not_null and self.rng.random() < 0.5:
            new: Any = None
        elif aff == "TEXT" or isinstance(v, str):
            new = "" if v is None or self.rng.random() < 0.3 else str(v) + "x"
        elif aff == "REAL" or isinstance(v, float):
            new = 0.0 if v is None else float(v) + 0.5
        else:
            new = 0 if v is None else int(v) + 1
        out = list(row)
        out[j] = new
        return tuple(out)

    def _synthetic(self, t: str) -> Row:
        """A row for an empty table: NULL where allowed, else a zero of the column's type."""
        out: list[Any] = []
        for _, aff, not_null in self.columns[t]:
            if not not_null:
                out.append(None)
            else:
                out.append("" if aff == "TEXT" else 0.0 if aff == "REAL" else 0)
        return tuple(out)

    def _schedule(self) -> list[Commit]:
        rng = self.rng
        c1: dict[str, tuple[list[Row], list[Row]]] = {}
        c2: dict[str, tuple[list[Row], list[Row]]] = {}
        c3: dict[str, tuple[list[Row], list[Row]]] = {}
        for t in sorted(self.columns):
            have = collections.Counter(self._rows(self.mirror, t))
            want = collections.Counter(self._rows(self.target, t))
            dels = list((have - want).elements())
            ins = list((want - have).elements())
            rng.shuffle(dels)
            rng.shuffle(ins)
            k1, k2 = len(ins) // 3, 2 * len(ins) // 3
            i1, i2, i3 = ins[:k1], ins[k1:k2], ins[k2:]
            d1, d2 = dels[: len(dels) // 2], dels[len(dels) // 2 :]
            # rows present after commit 1 and kept: deleted then restored, updated then undone
            after1 = list((have - collections.Counter(dels)).elements()) + i1
            rng.shuffle(after1)
            n = len(after1)
            k_del = (n + 3) // 4
            k_upd = (n + 3) // 4 if n > 1 else 0
            tmp_del = after1[:k_del]
            upd = after1[k_del : k_del + k_upd]
            mutated = [self._mutate(t, r) for r in upd]
            dup = [rng.choice(after1)] if n else []
            extra = [self._synthetic(t)] if n == 0 and not want else []
            c1[t] = (d1, i1)
            c2[t] = (d2 + tmp_del + upd, i2 + mutated + dup + extra)
            c3[t] = (mutated + dup + extra, i3 + tmp_del + upd)
        return [Commit(c) for c in (c1, c2, c3)]


def plan_file(name: str, text: str) -> FilePlan:
    """The events and oracle of a script (runs it on SQLite only)."""
    return _Planner(name, parse_script(text)).plan()


# -- run: the events on ddflow.sql ---------------------------------------------------------
@dataclass
class Outcome:
    status: str  # "passed" | "unsupported" | "wrong" | "crashed"
    detail: str = ""  # construct / what differs / traceback head
    checkpoint: int = -1  # wrong: where it first differed
    got: list[Row] | None = None
    final: bool = False  # wrong: at the end of the segment (vs the recorded answer)


class _GroupCrash(Exception):
    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _tb_head(e: BaseException, lines: int = 6) -> str:
    tb = traceback.format_exception(e)
    frames = [s.strip().replace("\n", " | ") for s in tb[1:-1]][-lines + 1 :]
    head = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
    return head + "".join("\n    " + f for f in frames)


def _compare(got: list[Row], want: list[Row], rec: Record, ordered: bool) -> str | None:
    """None if ``got`` prints as ``want`` does, else a short description."""
    try:
        fg = format_rows(got, rec.types)
    except ValueError as e:
        return str(e)
    fw = format_rows(want, rec.types)
    if rec.sort == "nosort" and not ordered:
        fg, fw = sorted(fg), sorted(fw)
    vg, vw = result_values(fg, rec.sort), result_values(fw, rec.sort)
    if vg == vw:
        return None
    return f"expected {_short(vw)} got {_short(vg)}"


def _short(values: list[str], n: int = 12) -> str:
    s = " ".join(values[:n])
    return f"[{s}{' ...' if len(values) > n else ''}] ({len(values)} values)"


class _Run:
    """One ddflow Database replaying a plan's events for a group of queries.

    The group runs from the ``define`` event of its first query to the ``final`` event of
    its last query, then on for ``tail`` more events (to the end of that segment): its views
    stay checked while later statements change the tables. Before its start only DDL is
    replayed; the rows of that moment are loaded in one commit right after the group's first
    views are defined.
    """

    def __init__(self, plan: FilePlan, qids: Sequence[int], tail: int = TAIL_EVENTS) -> None:
        import ddflow.sql as dsql

        self.dsql = dsql
        self.plan = plan
        self.qids = set(qids)
        self.db = dsql.Database(dialect="sqlite")
        self.views: dict[int, Any] = {}
        self.named: dict[str, str] = {}  # the file's own views: name -> SQL
        self.outcomes: dict[int, Outcome] = {}
        self.ddl_failures: list[str] = []
        self.broken: dict[str, str] = {}  # table -> the DDL failure that left it wrong
        events = plan.events
        self.start = min(
            i for i, ev in enumerate(events) if ev.kind == "define" and self.qids & set(ev.qids)
        )
        last = max(
            i for i, ev in enumerate(events) if ev.kind == "final" and self.qids & set(ev.qids)
        )
        self.stop = next(
            (i for i, ev in enumerate(events) if ev.kind == "final" and i >= last + tail),
            len(events) - 1,
        )

    def run(self) -> dict[int, Outcome]:
        events = self.plan.events
        for i, ev in enumerate(events[: self.stop + 1]):
            if i < self.start:
                if ev.kind == "ddl":
                    self._ddl(ev)
                continue
            getattr(self, "_" + ev.kind)(ev)
            if i == self.start:
                self._load(events[i + 1])
        for q in self.qids:
            self.outcomes.setdefault(q, Outcome("passed"))
        return self.outcomes

    def _load(self, check: Event) -> None:
        """The tables' rows at the group's start (the checkpoint after its first define)."""
        assert check.kind == "check"
        try:
            for t, rows in self.plan.snapshots[check.checkpoint].tables.items():
                if rows and t not in self.broken:
                    self.db.insert(t, rows)
            self.db.commit()
        except Exception as e:
            raise _GroupCrash("commit(): " + _tb_head(e)) from e

    def _ddl(self, ev: Event) -> None:
        sql = ev.sql
        try:
            if ev.table:
                for name, vsql in list(self.named.items()):
                    if _mentions(vsql, ev.table):
                        self.db.drop_view(name, if_exists=True)
                        del self.named[name]
            self.db.execute(sql)
            m = re.match(
                r"^\s*CREATE\s+(?:TEMP\w*\s+)?VIEW\s+(?:IF\s+NOT\s+EXISTS\s+)?"
                r"([\w$]+)\s+AS\s+(.*)$",
                sql,
                re.I | re.S,
            )
            if m:
                self.named[m.group(1).lower()] = m.group(2)
            m = re.match(r"^\s*DROP\s+VIEW\s+(?:IF\s+EXISTS\s+)?([\w$]+)", sql, re.I)
            if m:
                self.named.pop(m.group(1).lower(), None)
            if not ev.expect_ok:
                self.ddl_failures.append(f"accepted what SQLite rejects: {sql.splitlines()[0]}")
        except Exception as e:
            if not ev.expect_ok:
                return
            msg = f"{type(e).__name__}: {e} <- {sql.splitlines()[0]}"
            self.ddl_failures.append(msg)
            m = re.match(
                r"^\s*(?:CREATE|DROP)\s+(?:TEMP\w*\s+)?TABLE\s+(?:IF\s+(?:NOT\s+)?"
                r"EXISTS\s+)?([\w$]+)",
                sql,
                re.I,
            )
            if m:
                t = m.group(1).lower()
                self.broken[t] = msg
                for q in list(self.views):
                    if q not in self.outcomes and _mentions(self.plan.queries[q].rec.sql, t):
                        self.outcomes[q] = Outcome("crashed", "an earlier DDL failed: " + msg)

    def _define(self, ev: Event) -> None:
        for q in ev.qids:
            if q not in self.qids:
                continue
            sql = self.plan.queries[q].rec.sql
            bad = [m for t, m in self.broken.items() if _mentions(sql, t)]
            if bad:
                self.outcomes[q] = Outcome("crashed", "an earlier DDL failed: " + bad[0])
                continue
            try:
                self.views[q] = self.db.view(sql)
            except self.dsql.UnsupportedSQL as e:
                self.outcomes[q] = Outcome("unsupported", str(e).splitlines()[0])
            except Exception as e:
                self.outcomes[q] = Outcome("crashed", "view(): " + _tb_head(e))

    def _drop(self, ev: Event) -> None:
        for q in ev.qids:
            v = self.views.pop(q, None)
            if v is not None:
                self.db.drop_view(v.name, if_exists=True)

    def _commit(self, ev: Event) -> None:
        assert ev.commit is not None
        try:
            for t, (dels, ins) in ev.commit.changes.items():
                if t in self.broken:
                    continue
                if dels:
                    self.db.delete(t, dels)
                if ins:
                    self.db.insert(t, ins)
            self.db.commit()
        except Exception as e:
            raise _GroupCrash("commit(): " + _tb_head(e)) from e

    def _rows(self, q: int, v: Any) -> list[Row] | None:
        try:
            return [tuple(plain(x) for x in r) for r in v.rows()]
        except Exception as e:
            self.outcomes[q] = Outcome("crashed", "rows(): " + _tb_head(e))
            return None

    def _check(self, ev: Event) -> None:
        snap = self.plan.snapshots[ev.checkpoint]
        for q, v in list(self.views.items()):
            if q in self.outcomes:
                continue
            want = snap.answers.get(q)
            if want is None or isinstance(want, str):
                continue
            got = self._rows(q, v)
            if got is None:
                continue
            diff = _compare(got, want, self.plan.queries[q].rec, ordered=False)
            if diff is not None:
                self.outcomes[q] = Outcome("wrong", diff, ev.checkpoint, got)

    def _final(self, ev: Event) -> None:
        snap = self.plan.snapshots[ev.checkpoint]
        for q in ev.qids:
            v = self.views.get(q)
            if v is None or q in self.outcomes:
                continue
            rec = self.plan.queries[q].rec
            got = self._rows(q, v)
            if got is None:
                continue
            try:
                values = result_values(format_rows(got, rec.types), rec.sort)
            except ValueError as e:
                self.outcomes[q] = Outcome("wrong", str(e), ev.checkpoint, got, final=True)
                continue
            if matches_recorded(values, rec):
                continue
            want = snap.answers.get(q)
            if (
                q in self.plan.oracle_disagrees
                and isinstance(want, list)
                and _compare(got, want, rec, ordered=True) is None
            ):
                continue  # SQLite here answers otherwise than the file; ddflow agrees with it
            rec_vals = (
                list(rec.expected)
                if rec.expected is not None
                else [f"{rec.expected_hash[0]} values hashing to {rec.expected_hash[1]}"]
                if rec.expected_hash
                else []
            )
            self.outcomes[q] = Outcome(
                "wrong",
                f"recorded {_short(rec_vals)} got {_short(values)}",
                ev.checkpoint,
                got,
                final=True,
            )


def check_oracle(plan: FilePlan) -> None:
    """Fills ``plan.oracle_disagrees``: queries whose SQLite answer here (at the end of their
    segment) does not print as the file records it — a check of this runner's printing."""
    for ev in plan.events:
        if ev.kind != "final":
            continue
        snap = plan.snapshots[ev.checkpoint]
        for q in ev.qids:
            rec = plan.queries[q].rec
            want = snap.answers.get(q)
            if isinstance(want, str):
                plan.oracle_disagrees[q] = want
                continue
            assert want is not None
            values = result_values(format_rows(want, rec.types), rec.sort)
            if not matches_recorded(values, rec):
                plan.oracle_disagrees[q] = f"SQLite {sqlite3.sqlite_version} gives {_short(values)}"


def run_plan(
    plan: FilePlan,
    group_size: int = GROUP_SIZE,
    tail: int = TAIL_EVENTS,
    max_queries: int | None = None,
    run_cls: type[_Run] = _Run,
) -> tuple[dict[int, Outcome], list[str]]:
    """Every query's outcome on ddflow, and the DDL ddflow failed (or wrongly accepted).
    ``run_cls`` is the replay (tests pass a subclass that breaks answers on purpose)."""
    qids = sorted(plan.queries)[:max_queries]
    outcomes: dict[int, Outcome] = {}
    ddl_failures: dict[str, None] = {}
    for g in range(0, len(qids), group_size):
        group = qids[g : g + group_size]
        run = run_cls(plan, group, tail)
        try:
            outcomes.update(run.run())
        except _GroupCrash:
            # find the views that crash alone; the others get their own outcomes
            for q in group:
                solo = run_cls(plan, [q], tail)
                try:
                    outcomes.update(solo.run())
                except _GroupCrash as e:
                    outcomes[q] = Outcome("crashed", e.detail)
        ddl_failures.update(dict.fromkeys(run.ddl_failures))
    return outcomes, list(ddl_failures)


# -- repros of wrong answers ---------------------------------------------------------------
def _values_literal(r: Row) -> str:
    def lit(v: Any) -> str:
        if v is None:
            return "NULL"
        if isinstance(v, str):
            return "'" + v.replace("'", "''") + "'"
        return repr(v)

    return "(" + ", ".join(lit(v) for v in r) + ")"


def _one_shot(
    plan: FilePlan, sql: str, tables: dict[str, list[Row]], rec: Record
) -> tuple[list[Row], list[Row] | str] | None:
    """ddflow's rows and SQLite's for ``sql`` over ``tables`` loaded in one commit, or
    None if ddflow fails."""
    import ddflow.sql as dsql

    con = sqlite3.connect(":memory:")
    db = dsql.Database(dialect="sqlite")
    try:
        for t, rows in tables.items():
            ddl = plan.ddl.get(t)
            if ddl is None:
                continue
            db.execute(ddl)
            cols = plan.columns[t]
            con.execute(
                f"CREATE TABLE {_quote(t)}("
                + ", ".join(f"{_quote(c[0])} {c[1] if c[1] != 'BLOB' else ''}" for c in cols)
                + ")"
            )
            con.executemany(f"INSERT INTO {_quote(t)} VALUES({', '.join('?' for _ in cols)})", rows)
        v = db.view(sql)
        for t, rows in tables.items():
            if rows and t in plan.ddl:
                db.insert(t, rows)
        db.commit()
        got = [tuple(plain(x) for x in r) for r in v.rows()]
    except Exception:
        return None
    try:
        want: list[Row] | str = [tuple(r) for r in con.execute(sql)]
    except sqlite3.Error as e:
        want = str(e)
    return got, want


def repro(plan: FilePlan, q: int, out: Outcome) -> dict[str, Any]:
    """A small repro of a wrong answer: the tables the query reads at the checkpoint where
    it first differed, loaded in one commit and cut down row by row while ddflow still
    disagrees with SQLite; else the commits that led there."""
    rec = plan.queries[q].rec
    snap = plan.snapshots[out.checkpoint]
    tables = {t: rows for t, rows in snap.tables.items() if _mentions(rec.sql, t)}
    ordered = out.final

    def bad(tabs: dict[str, list[Row]]) -> tuple[list[Row], list[Row]] | None:
        res = _one_shot(plan, rec.sql, tabs, rec)
        if res is None or isinstance(res[1], str):
            return None
        got, want = res
        return (got, want) if _compare(got, want, rec, ordered) is not None else None

    first = bad(tables)
    info: dict[str, Any] = {
        "file": plan.name,
        "line": rec.line,
        "sql": rec.sql,
        "types": rec.types,
        "sort": rec.sort,
        "detail": out.detail,
    }
    if first is None:
        info["one_commit"] = False
        hist = []
        for ev in plan.events:
            if ev.kind == "commit" and ev.commit is not None:
                hist.append(
                    {
                        t: {"delete": d, "insert": i}
                        for t, (d, i) in ev.commit.changes.items()
                        if (d or i) and t in tables
                    }
                )
            if ev.kind == "check" and ev.checkpoint == out.checkpoint:
                break
        info["commits"] = hist
        info["tables"] = tables
        want = snap.answers.get(q)
        info["expected"] = want
        info["got"] = out.got
        return info
    cur = {t: list(rows) for t, rows in tables.items()}
    for t in list(cur):
        i = 0
        while i < len(cur[t]):
            trial = dict(cur)
            trial[t] = cur[t][:i] + cur[t][i + 1 :]
            if bad(trial) is not None:
                cur = trial
            else:
                i += 1
    got, want = bad(cur) or first
    info.update(one_commit=True, tables=cur, expected=want, got=got)
    return info


def format_repro(r: dict[str, Any]) -> str:
    lines = [
        f"{r['file']}:{r['line']}  ({r['types']} {r['sort']}) {r['detail']}",
        "  " + r["sql"].replace("\n", "\n  "),
    ]
    for t, rows in r["tables"].items():
        lines.append(f"  {t}: " + (", ".join(_values_literal(x) for x in rows) or "(empty)"))
    if not r["one_commit"]:
        lines.append("  (not reproduced in one commit; the commits before it:)")
        for k, c in enumerate(r["commits"]):
            lines.append(
                f"    commit {k + 1}: "
                + "; ".join(
                    f"{t} -{[_values_literal(x) for x in ch['delete']]} "
                    f"+{[_values_literal(x) for x in ch['insert']]}"
                    for t, ch in c.items()
                )
            )
    lines.append(f"  expected (SQLite): {r['expected']}")
    lines.append(f"  got (ddflow):      {r['got']}")
    return "\n".join(lines)


# -- files, totals, CLI --------------------------------------------------------------------
@dataclass
class FileResult:
    name: str
    outcomes: dict[int, Outcome]
    plan: FilePlan
    ddl_failures: list[str]
    seconds: float

    def counts(self) -> collections.Counter[str]:
        return collections.Counter(o.status for o in self.outcomes.values())

    def outcomes_by_line(self) -> dict[int, Outcome]:
        return {self.plan.queries[q].rec.line: o for q, o in self.outcomes.items()}

    def failures(self) -> dict[tuple[str, int], Outcome]:
        """(file, query line) -> outcome, for wrong and crashed queries."""
        return {
            (self.name, self.plan.queries[q].rec.line): o
            for q, o in self.outcomes.items()
            if o.status in ("wrong", "crashed")
        }


def sample_files(root: Path = SLT_DIR) -> list[Path]:
    return sorted(root.rglob("*.test"))


@functools.cache
def load_plan(path: Path, root: Path = SLT_DIR) -> FilePlan:
    """The plan of a script file, oracle checked (cached: plans are deterministic)."""
    name = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
    plan = plan_file(name, path.read_text())
    check_oracle(plan)
    return plan


def run_file(
    path: Path, root: Path = SLT_DIR, group_size: int = GROUP_SIZE, max_queries: int | None = None
) -> FileResult:
    """Plans the whole file, then runs its queries (the first ``max_queries`` of them)."""
    t0 = time.perf_counter()
    plan = load_plan(path, root)
    name = plan.name
    outcomes, ddl_failures = run_plan(plan, group_size, max_queries=max_queries)
    return FileResult(name, outcomes, plan, ddl_failures, time.perf_counter() - t0)


def construct_of(detail: str) -> str:
    """An UnsupportedSQL message reduced to the construct it names (SQL text dropped)."""
    s = re.sub(r"'[^']*'", "'…'", detail)
    s = re.sub(r"\s*\(.*$", "", s) if not s.startswith("(") else s
    s = re.sub(r"^(aggregate function|aggregate|function) (\w+).*$", r"\1 \2", s)
    return s.strip()[:90]


def crash_kind(detail: str) -> str:
    """A crash's first line with names, SQL and numbers blurred, to count crashes by kind."""
    s = detail.splitlines()[0]
    s = re.sub(r"\(SELECT .*\) AS \w+", "(subquery) AS _col", s)
    s = re.sub(r"'[^']*'", "'…'", s)
    s = re.sub(r"<- .*$", "", s)
    return s.strip()[:140]


def read_known_failures(path: Path) -> dict[tuple[str, int], str]:
    """``file:line  reason`` lines (``#`` comments) -> {(file, line): reason}."""
    known: dict[tuple[str, int], str] = {}
    if not path.exists():
        return known
    for raw in path.read_text().splitlines():
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        loc, _, reason = s.partition(" ")
        f, _, ln = loc.rpartition(":")
        known[(f, int(ln))] = reason.strip()
    return known


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="*", type=Path)
    ap.add_argument("--json", type=Path, help="write every outcome here")
    ap.add_argument("--repro", action="store_true", help="minimize and print wrong answers")
    ap.add_argument(
        "--write-known-failures",
        type=Path,
        help="write the wrong and crashed queries in known_failures format",
    )
    ap.add_argument("--group-size", type=int, default=GROUP_SIZE)
    ap.add_argument("--max-queries", type=int, help="run only each file's first N queries")
    ap.add_argument(
        "--write-floors",
        choices=["fast", "all"],
        help="record each file's pass count in slt/floors.json (fast: the first "
        f"{FAST_QUERIES} queries, as the default test runs them)",
    )
    ap.add_argument(
        "--oracle-only",
        action="store_true",
        help="only check that SQLite here prints the files' recorded answers",
    )
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    files = [p.resolve() for p in args.files] or sample_files()
    if args.write_floors == "fast":
        args.max_queries = FAST_QUERIES
    if args.oracle_only:
        bad = 0
        for path in files:
            name = (
                path.relative_to(SLT_DIR).as_posix() if path.is_relative_to(SLT_DIR) else path.name
            )
            plan = plan_file(name, path.read_text())
            check_oracle(plan)
            bad += len(plan.oracle_disagrees)
            print(
                f"{name:48s} {len(plan.queries):5d} queries, {len(plan.events):5d} events, "
                f"{len(plan.oracle_disagrees)} oracle≠recorded"
            )
            for n in plan.notes:
                print(f"    note: {n}")
            for q, d in plan.oracle_disagrees.items():
                print(f"    {name}:{plan.queries[q].rec.line}: {d}")
        return 1 if bad else 0
    totals: collections.Counter[str] = collections.Counter()
    constructs: collections.Counter[str] = collections.Counter()
    crashes: collections.Counter[str] = collections.Counter()
    results = []
    for path in files:
        r = run_file(path, group_size=args.group_size, max_queries=args.max_queries)
        results.append(r)
        c = r.counts()
        totals.update(c)
        for o in r.outcomes.values():
            if o.status == "unsupported":
                constructs[construct_of(o.detail)] += 1
            elif o.status == "crashed":
                crashes[crash_kind(o.detail)] += 1
        print(
            f"{r.name:48s} {len(r.outcomes):5d} queries  passed {c['passed']:5d}  "
            f"unsupported {c['unsupported']:5d}  wrong {c['wrong']:4d}  crashed "
            f"{c['crashed']:4d}  ({r.seconds:.1f}s, {r.plan.skipped} skipped, "
            f"{len(r.plan.oracle_disagrees)} oracle≠recorded)",
            flush=True,
        )
        for d in r.ddl_failures:
            print(f"    DDL: {d}")
        if args.verbose:
            for n in r.plan.notes:
                print(f"    note: {n}")
            for q, d in r.plan.oracle_disagrees.items():
                print(f"    oracle≠recorded {r.plan.queries[q].rec.line}: {d}")
    n = sum(totals.values())
    print(
        f"\nTOTAL {n} queries: passed {totals['passed']}, unsupported "
        f"{totals['unsupported']}, wrong {totals['wrong']}, crashed {totals['crashed']}"
    )
    print("\nunsupported constructs:")
    for k, v in constructs.most_common():
        print(f"  {v:6d}  {k}")
    print("\ncrashes:")
    for k, v in crashes.most_common():
        print(f"  {v:6d}  {k}")
    repros = []
    print("\nwrong answers:")
    for r in results:
        for q, o in sorted(r.outcomes.items()):
            if o.status != "wrong":
                continue
            rec = r.plan.queries[q].rec
            if args.repro:
                rp = repro(r.plan, q, o)
                repros.append(rp)
                print(format_repro(rp) + "\n")
            else:
                print(
                    f"  {r.name}:{rec.line} {'final' if o.final else 'cp' + str(o.checkpoint)}"
                    f" {o.detail[:200]}"
                )
    if args.verbose:
        print("\ncrashed queries:")
        for r in results:
            for q, o in sorted(r.outcomes.items()):
                if o.status == "crashed":
                    print(f"  {r.name}:{r.plan.queries[q].rec.line} {o.detail}")
    if args.write_known_failures:
        lines = [
            "# sqllogictest queries that give a wrong answer or crash on ddflow.sql today.",
            "# file:line (of the query record)  status: reason. test_slt.py fails on any",
            "# other wrong/crashed query, and on an entry here that no longer fails.",
            "",
        ]
        for r in results:
            for (f, ln), o in sorted(r.failures().items()):
                reason = o.detail.splitlines()[0][:150]
                lines.append(f"{f}:{ln}  {o.status}: {reason}")
        args.write_known_failures.write_text("\n".join(lines) + "\n")
    if args.write_floors:
        path = SLT_DIR / "floors.json"
        floors = json.loads(path.read_text()) if path.exists() else {}
        floors.setdefault(args.write_floors, {}).update(
            {r.name: r.counts()["passed"] for r in results}
        )
        floors = {k: dict(sorted(v.items())) for k, v in sorted(floors.items())}
        path.write_text(json.dumps(floors, indent=1) + "\n")
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "totals": dict(totals),
                    "constructs": dict(constructs.most_common()),
                    "files": {
                        r.name: {
                            "seconds": round(r.seconds, 2),
                            "counts": dict(r.counts()),
                            "ddl_failures": r.ddl_failures,
                            "queries": {
                                r.plan.queries[q].rec.line: {"status": o.status, "detail": o.detail}
                                for q, o in sorted(r.outcomes.items())
                            },
                        }
                        for r in results
                    },
                    "repros": repros,
                },
                indent=1,
                default=str,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
