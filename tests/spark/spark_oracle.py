"""Spark SQL as the oracle for ``ddflow.sql.spark.maintain``: after every refresh each view
must equal ``spark.sql(view)`` over the tables' current contents.

A ``Stream`` holds every table's current contents (a multiset of Python rows and an Arrow
schema, so Spark sees the exact types) and one or more views. ``refresh(changes)`` applies
one refresh's changes (``ins``, ``dele``, ``upd``) to the contents, hands them to
``maintain`` (or, with ``live``, to a ``LiveViews`` job started by the first refresh) in
one of the table source forms (``form``), registers the new contents as temp
views and checks, for every view:

- its ``contents`` equal Spark's answer as multisets (``oracle.same_rows`` of the DuckDB
  suite: numbers by value, floats with a relative tolerance of 1e-9), and ``rows()`` equal
  them in order where the view is listed in ``ordered`` (ORDER BY determines the order);
- its ``changes`` (consolidated) are the difference between its contents now and before
  the refresh, at the refresh's time only when the call was given only the new changes;
- ``rows()`` hold the same rows as ``contents``.

Forms: ``rows`` (a DataFrame of data columns, ``time``, ``diff``), ``cdf`` (Delta's change
data feed shape: ``_change_type``, ``_commit_version``), ``snapshot`` (``Snapshot(df)`` of
the whole contents). With ``checkpoint`` each call gets only the new changes; without one
every call gets all the changes so far (one time per refresh), so both must give the same
contents. A Delta table path is driven by ``test_sql_spark_inputs`` itself, through
``check_views``.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "sql"))

from oracle import _key, same_rows  # noqa: E402 - after tests/sql is on the path

from ddflow.sql.spark import LiveViews, Maintained, Snapshot, maintain  # noqa: E402

Row = tuple[Any, ...]

#: A hashable key of a row, equal for equal SQL values (numbers by value, floats exactly).
row_key = _key

__all__ = [
    "Mismatch",
    "Row",
    "Stream",
    "arrow_rows",
    "check_views",
    "dele",
    "ins",
    "register",
    "row_key",
    "same_rows",
    "spark_answer",
    "upd",
]


class Mismatch(AssertionError):
    """A view differs from Spark SQL's answer (the message says where and how)."""


@dataclass(frozen=True)
class Change:
    """One change to a table: ``old`` deleted (None: nothing) and ``new`` inserted (None:
    nothing); both set is an update (``update_preimage``/``update_postimage`` in a CDF)."""

    old: Row | None
    new: Row | None


def ins(*rows: Row) -> list[Change]:
    """Insert each of ``rows``."""
    return [Change(None, tuple(r)) for r in rows]


def dele(*rows: Row) -> list[Change]:
    """Delete one copy of each of ``rows``."""
    return [Change(tuple(r), None) for r in rows]


def upd(old: Row, new: Row) -> list[Change]:
    """Replace one copy of ``old`` by ``new``."""
    return [Change(tuple(old), tuple(new))]


def arrow_rows(
    schema: pa.Schema, rows: Sequence[Row], extra: Mapping[str, Any] | None = None
) -> pa.Table:
    """``rows`` as an Arrow table of ``schema`` plus ``extra`` columns (name: Arrow array)."""
    arrays = [pa.array([r[i] for r in rows], type=f.type) for i, f in enumerate(schema)]
    names = list(schema.names)
    for k, v in (extra or {}).items():
        arrays.append(v)
        names.append(k)
    return pa.Table.from_arrays(arrays, names=names)


def register(spark: Any, tables: Mapping[str, pa.Table]) -> None:
    """Registers ``tables`` as Spark temp views under their names."""
    for name, t in tables.items():
        spark.createDataFrame(t).createOrReplaceTempView(name)


def spark_answer(
    spark: Any, sql: str, tables: Mapping[str, pa.Table] | None
) -> tuple[list[Row], Any]:
    """Spark SQL's rows (in its order) and schema for ``sql`` over ``tables`` (registered as
    temp views under their names; None: as registered already)."""
    if tables is not None:
        register(spark, tables)
    df = spark.sql(sql)
    return [tuple(r) for r in df.collect()], df.schema


def _show(rows: Sequence[Any], limit: int = 6) -> str:
    out = [repr(r) for r in list(rows)[:limit]]
    if len(rows) > limit:
        out.append(f"... ({len(rows)} in all)")
    return "; ".join(out) or "-"


def _signed(rows: Iterable[Row], diffs: Iterable[int]) -> Counter[Any]:
    c: Counter[Any] = Counter()
    for r, d in zip(rows, diffs, strict=True):
        c[_key(r)] += d
    return Counter({k: v for k, v in c.items() if v})


def _diff(now: Sequence[Row], before: Sequence[Row]) -> Counter[Any]:
    c: Counter[Any] = Counter(_key(r) for r in now)
    c.subtract(Counter(_key(r) for r in before))
    return Counter({k: v for k, v in c.items() if v})


def check_views(
    spark: Any,
    res: Maintained,
    views: Mapping[str, str],
    tables: Mapping[str, pa.Table],
    *,
    ordered: Iterable[str] = (),
    before: Mapping[str, list[Row]] | None = None,
    times: set[int] | None = None,
    label: str = "",
    problems: dict[str, list[str]] | None = None,
) -> dict[str, list[Row]]:
    """Checks every view of ``res`` against Spark SQL over ``tables`` (see the module doc);
    ``before``: each view's contents before this refresh (None: empty, the call was given
    every change); ``times``: the only times its changes may carry. Returns each view's
    contents (as collected from ``contents``). What differs is added to ``problems`` (per
    view) when given, else raised as ``Mismatch``."""
    ordered = set(ordered)
    got: dict[str, list[Row]] = {}
    found: dict[str, list[str]] = {}
    register(spark, tables)
    for name, sql in views.items():
        p = found.setdefault(name, [])
        p.extend(
            _check_view(
                spark,
                res,
                name,
                sql,
                name in ordered,
                (before or {}).get(name, []),
                times,
                label,
                got,
            )
        )
    if problems is not None:
        for name, ps in found.items():
            problems.setdefault(name, []).extend(ps)
    elif any(found.values()):
        raise Mismatch("\n".join(p for ps in found.values() for p in ps))
    return got


def _check_view(
    spark: Any,
    res: Maintained,
    name: str,
    sql: str,
    ordered: bool,
    before: list[Row],
    times: set[int] | None,
    label: str,
    got: dict[str, list[Row]],
) -> list[str]:
    problems: list[str] = []
    want, _ = spark_answer(spark, sql, None)
    r = res[name]
    ours = [tuple(x) for x in r.contents.collect()]
    got[name] = ours
    extra, missing = same_rows(ours, want)
    if extra or missing:
        problems.append(
            f"{label}view {name!r}: contents differ from Spark SQL: "
            f"{len(ours)} rows, want {len(want)}; extra {_show(extra)}; "
            f"missing {_show(missing)}"
        )
        return problems
    rows = [tuple(x) for x in r.rows()]
    if ordered:
        extra, missing = same_rows(rows, want, ordered=True)
        if extra or missing:
            problems.append(
                f"{label}view {name!r}: rows() out of Spark's order: got "
                f"{_show(extra)}, want {_show(missing)}"
            )
    else:
        extra, missing = same_rows(rows, ours)
        if extra or missing:
            problems.append(
                f"{label}view {name!r}: rows() differ from contents: extra "
                f"{_show(extra)}; missing {_show(missing)}"
            )
    ch = [tuple(x) for x in r.changes.collect()]
    width = len(r.changes.columns) - 2
    if r.changes.columns[width:] != ["time", "diff"]:
        problems.append(
            f"{label}view {name!r}: changes columns {r.changes.columns} do not end with time, diff"
        )
        return problems
    net = _signed([c[:width] for c in ch], [c[width + 1] for c in ch])
    expect = _diff(ours, before)
    if net != expect:
        wrong = sorted(set(net) | set(expect), key=repr)
        wrong = [
            (k, net.get(k, 0), expect.get(k, 0)) for k in wrong if net.get(k, 0) != expect.get(k, 0)
        ]
        problems.append(
            f"{label}view {name!r}: changes are not the difference of its "
            f"contents ((row, net diff, want)): {_show(wrong)}"
        )
    if times is not None:
        bad = sorted({c[width] for c in ch} - times)
        if bad:
            problems.append(
                f"{label}view {name!r}: changes at times {bad}, want only {sorted(times)}"
            )
    return problems


@dataclass
class Stream:
    """Tables (``schemas``) and ``views`` refreshed through ``maintain`` and checked against
    Spark SQL after every refresh (see the module doc)."""

    spark: Any
    schemas: Mapping[str, pa.Schema]
    views: Mapping[str, str]
    workers: int = 2
    checkpoint: str | None = None
    form: str = "rows"
    ordered: Sequence[str] = ()
    on_round: Any = None  # a job hook (a fault to inject)
    live: bool = False  # keep the views in a LiveViews job instead of a maintain per refresh
    job: Any = None  # the LiveViews (live streams, after the first refresh)
    contents: dict[str, Counter[Row]] = field(default_factory=dict)
    log: list[dict[str, list[Change]]] = field(default_factory=list)
    last: dict[str, list[Row]] = field(default_factory=dict)
    results: list[Maintained] = field(default_factory=list)

    def __post_init__(self) -> None:
        for t in self.schemas:
            self.contents.setdefault(t, Counter())

    def tables(self) -> dict[str, pa.Table]:
        """Every table's current contents as an Arrow table."""
        return {
            t: arrow_rows(s, sorted(self.contents[t].elements(), key=repr))
            for t, s in self.schemas.items()
        }

    def _apply(self, changes: Mapping[str, list[Change]]) -> None:
        for t, cs in changes.items():
            c = self.contents[t]
            for ch in cs:
                if ch.old is not None:
                    if c[ch.old] <= 0:
                        raise ValueError(f"test bug: deleting {ch.old!r}, not in {t}")
                    c[ch.old] -= 1
                    if not c[ch.old]:
                        del c[ch.old]
                if ch.new is not None:
                    c[ch.new] += 1

    def _source(self, t: str, calls: Sequence[tuple[int, list[Change]]]) -> Any:
        s = self.schemas[t]
        if self.form == "snapshot":
            return Snapshot(self.spark.createDataFrame(self.tables()[t]))
        rows: list[Row] = []
        times: list[int] = []
        tags: list[Any] = []
        for time, cs in calls:
            for ch in cs:
                if self.form == "cdf":
                    pairs = (
                        [(ch.old, "update_preimage"), (ch.new, "update_postimage")]
                        if ch.old is not None and ch.new is not None
                        else [(ch.old, "delete")]
                        if ch.new is None
                        else [(ch.new, "insert")]
                    )
                else:
                    pairs = [(r, d) for r, d in ((ch.old, -1), (ch.new, 1)) if r is not None]
                for r, tag in pairs:
                    assert r is not None
                    rows.append(r)
                    times.append(time)
                    tags.append(tag)
        if self.form == "cdf":
            extra = {
                "_change_type": pa.array(tags, pa.string()),
                "_commit_version": pa.array(times, pa.int64()),
            }
        else:
            extra = {"time": pa.array(times, pa.int64()), "diff": pa.array(tags, pa.int64())}
        return self.spark.createDataFrame(arrow_rows(s, rows, extra))

    def sources(self, changes: Mapping[str, list[Change]] | None, time: int) -> dict[str, Any]:
        """Every table's source (in ``form``) for ``changes`` at ``time`` (None: every change
        logged so far, each refresh at its own time)."""
        if changes is not None:
            calls = {t: [(time, list(changes.get(t, [])))] for t in self.schemas}
        else:
            calls = {t: [(i, c.get(t, [])) for i, c in enumerate(self.log)] for t in self.schemas}
        return {t: self._source(t, calls[t]) for t in self.schemas}

    def refresh(
        self,
        changes: Mapping[str, list[Change]] | None = None,
        *,
        check: bool = True,
        problems: dict[str, list[str]] | None = None,
        **kw: Any,
    ) -> Maintained:
        """Applies ``changes`` (``{table: [Change]}``), refreshes the views and checks them
        against Spark SQL (unless ``check`` is false; see ``check_views`` for
        ``problems``). ``kw`` goes to ``maintain``."""
        changes = dict(changes or {})
        self._apply(changes)
        self.log.append(changes)
        time = len(self.log) - 1
        incremental = self.checkpoint is not None or self.live
        sources = self.sources(changes if incremental else None, time)
        settings = dict(workers=self.workers, checkpoint=self.checkpoint, on_round=self.on_round)
        if self.live and self.job is not None:
            res = self.job.refresh(sources)
        elif self.live:
            self.job = LiveViews(self.spark, self.views, sources, **settings, **kw)
            res = self.job.result
        else:
            res = maintain(self.spark, self.views, sources, **settings, **kw)
        self.results.append(res)
        if check:
            self.last = check_views(
                self.spark,
                res,
                self.views,
                self.tables(),
                ordered=self.ordered,
                before=self.last if incremental else None,
                times={time} if incremental and self.form != "snapshot" else None,
                label=f"refresh {time}, {self.workers} worker(s), form {self.form}: ",
                problems=problems,
            )
        return res

    def close(self) -> None:
        """Ends the live job (if any)."""
        if self.job is not None:
            self.job.close()
