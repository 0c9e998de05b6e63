"""``Archive``: an archive folder as DuckDB views, tolerant of damaged files and older formats.

Every query of ``investigate`` and ``report`` goes through these views:
``crash``, ``telemetry``, ``host``, ``alert`` and ``hostday`` (plus
``host_all``: every announcement up to ``--until``, also those before
``--since``, from which the population at risk is computed), each with
the columns of :data:`fleetepi.archive.schema.BASE_COLUMNS` (a column an
older writer did not write reads as NULL), the ``attr.*`` columns any file
has, and ``day`` (a DATE, from the partition folder). ``--since/--until``
are applied twice: to the partition folders listed (whole days) and to the
rows' ``ts``.

Damaged files: the views are built from an explicit file list, each file
checked for Parquet's magic bytes at both ends (a truncated file fails
that; two small reads per file, so a year of partitions is checked in
milliseconds). A file damaged inside (valid ends, bad pages) is found when
a query fails: every file is then opened and read in full, the bad ones
are dropped with a warning, and the query runs again. Skipped files are
listed in :attr:`Archive.skipped`; nothing else is lost.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from fleetepi.archive.exceptions import ArchiveError
from fleetepi.archive.layout import PartFile, list_files, read_meta
from fleetepi.archive.schema import BASE_COLUMNS, SCHEMAS, attr_key

log = logging.getLogger(__name__)

_MAGIC = b"PAR1"
#: Table names in a query: their views are created on first use.
_TABLE_RE = re.compile(r"\b(crash|telemetry|host_all|host|alert|hostday)\b")


@dataclass(frozen=True)
class SkippedFile:
    path: str
    reason: str


def duck_type(t: pa.DataType) -> str:
    """DuckDB's name for an archive column type (for the NULL stand-ins of missing columns)."""
    if pa.types.is_timestamp(t):
        return "TIMESTAMPTZ"
    if pa.types.is_string(t):
        return "VARCHAR"
    if pa.types.is_integer(t):
        return "BIGINT"
    if pa.types.is_floating(t):
        return "DOUBLE"
    if pa.types.is_boolean(t):
        return "BOOLEAN"
    if pa.types.is_list(t):
        return duck_type(t.value_type) + "[]"
    if pa.types.is_struct(t):
        return "STRUCT(" + ", ".join(f'"{f.name}" {duck_type(f.type)}' for f in t) + ")"
    raise ArchiveError(f"no DuckDB type for {t}")  # pragma: no cover - schema.py uses only the above


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _ends_ok(path: Path, size: int) -> str | None:
    """None if the file has Parquet's magic at both ends, else why not."""
    if size < 12:
        return f"{size} bytes: too short for Parquet (a writer killed mid-file?)"
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
            fh.seek(-4, os.SEEK_END)
            tail = fh.read(4)
    except OSError as exc:
        return f"unreadable: {exc.strerror or exc}"
    if head != _MAGIC or tail != _MAGIC:
        return "not a complete Parquet file (magic bytes missing: truncated or overwritten)"
    return None


def _reads_ok(path: Path) -> str | None:
    """None if every row group of the file decodes, else the error."""
    import pyarrow.parquet as pq

    try:
        f = pq.ParquetFile(path)
        for i in range(f.num_row_groups):
            f.read_row_group(i)
    except Exception as exc:  # noqa: BLE001 - any decoding error means: skip this file
        return f"damaged: {type(exc).__name__}: {exc}"
    return None


def to_day(ts: datetime | None) -> str | None:
    return None if ts is None else ts.astimezone(UTC).strftime("%Y-%m-%d")


class Archive:
    """Read an archive folder.

    :param root: the folder ``--archive`` names.
    :param since: first event time to include (inclusive), timezone-aware.
    :param until: last event time (exclusive).
    :param memory_limit: DuckDB's memory limit (the report's RSS budget is 2 GB).
    """

    def __init__(self, root: str | Path, *, since: datetime | None = None, until: datetime | None = None,
                 memory_limit: str = "1GB", threads: int | None = None) -> None:
        self.root = Path(root)
        if not self.root.is_dir():
            raise ArchiveError(f"{self.root}: no such archive folder (write one with `fleetepi replay --archive` "
                               "or `fleetepi archive --broker`)")
        self.meta = read_meta(self.root)
        self.since, self.until = since, until
        self.skipped: list[SkippedFile] = []
        self._bad: set[str] = set()
        self.con = duckdb.connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(f"SET memory_limit = '{memory_limit}'")
        self.con.execute(f"SET threads = {int(threads or os.cpu_count() or 2)}")
        self.con.execute("SET parquet_metadata_cache = true")  # footers read once per session, not per query
        self.files: dict[str, list[PartFile]] = {}
        self.columns: dict[str, list[str]] = {}
        self._build()

    # ------------------------------------------------------------------ views
    def _skip(self, path: Path | str, reason: str) -> None:
        p = str(path)
        if p in self._bad:
            return
        self._bad.add(p)
        self.skipped.append(SkippedFile(p, reason))
        log.warning("archive: skipping %s: %s", p, reason)

    def _build(self) -> None:
        since_day, until_day = to_day(self.since), to_day(self.until)
        for schema in SCHEMAS:
            files = []
            # the inventory is needed from before --since: the announcements in force when the period starts
            first_day = None if schema == "host" else since_day
            for f in list_files(self.root, schema, first_day, until_day):
                if str(f.path) in self._bad:
                    continue
                why = _ends_ok(f.path, f.size)
                if why is not None:
                    self._skip(f.path, why)
                    continue
                files.append(f)
            self.files[schema] = files
        self._built: set[str] = set()
        self.columns = {schema: [c for c, _ in BASE_COLUMNS[schema]] + ["day"] for schema in SCHEMAS}

    def ensure(self, *schemas: str) -> None:
        """Create the views of these tables now (they are made on first use: each costs a read of its files' footers)."""
        for schema in schemas:
            if schema == "host_all":
                schema = "host"
            if schema not in self._built and schema in self.files:
                self._view(schema, self.files[schema])
                self._built.add(schema)

    def _ensure_for(self, sql: str) -> None:
        self.ensure(*{m.group(1) for m in _TABLE_RE.finditer(sql)})

    def day_range(self, schema: str) -> tuple[str, str] | None:
        """First and last day partition of a table (from the file list: no read)."""
        days = sorted({f.day for f in self.files.get(schema, [])})
        return (days[0], days[-1]) if days else None

    def files_of_day(self, schema: str, day: str) -> list[str]:
        return [str(f.path) for f in self.files.get(schema, []) if f.day == day]

    def _view(self, schema: str, files: list[PartFile]) -> None:
        base = BASE_COLUMNS[schema]
        raw = f"raw_{schema}"
        if files:
            paths = ", ".join("'" + str(f.path).replace("'", "''") + "'" for f in files)
            self.con.execute(f"CREATE OR REPLACE VIEW {raw} AS SELECT * FROM read_parquet([{paths}], "
                             "hive_partitioning = true, union_by_name = true)")
            have = [r[0] for r in self.con.execute(f"DESCRIBE {raw}").fetchall()]
        else:
            have = []
        exprs = []
        for col, typ in base:
            exprs.append(f"{quote(col)}" if col in have else f"CAST(NULL AS {duck_type(typ)}) AS {quote(col)}")
        attrs = sorted(c for c in have if attr_key(c) is not None)
        exprs += [quote(c) for c in attrs]
        exprs.append("CAST(day AS DATE) AS day" if "day" in have else "CAST(NULL AS DATE) AS day")
        where = []
        if "ts" in dict(base):
            if self.since is not None:
                where.append(f"ts >= TIMESTAMPTZ '{self.since.astimezone(UTC).isoformat()}'")
            if self.until is not None:
                where.append(f"ts < TIMESTAMPTZ '{self.until.astimezone(UTC).isoformat()}'")
        src = raw if files else "(SELECT 1 AS _none WHERE false)"
        if schema == "host":  # host_all: every announcement up to --until; host: those within the period
            until = [w for w in where if w.startswith("ts <")]
            self.con.execute(f"CREATE OR REPLACE VIEW host_all AS SELECT {', '.join(exprs)} FROM {src}"
                             + (" WHERE " + " AND ".join(until) if until else ""))
            src = "host_all"
            exprs = ["*"]
        sql = f"CREATE OR REPLACE VIEW {schema} AS SELECT {', '.join(exprs)} FROM {src}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        self.con.execute(sql)
        self.columns[schema] = [c for c, _ in base] + attrs + ["day"]

    # ------------------------------------------------------------------ queries
    def attribute_keys(self, schema: str = "hostday") -> list[str]:
        """Attribute keys present in the table (``attr.rack`` -> ``rack``)."""
        self.ensure(schema)
        return [k for c in self.columns.get(schema, []) if (k := attr_key(c)) is not None]

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        """Run SQL over the views; on a damaged file, skip it (with a warning) and run again."""
        self._ensure_for(sql)
        return self._run(lambda: self.con.execute(sql, params or []).fetchall())

    def pin(self, schema: str, exclude: tuple[str, ...] = ()) -> None:
        """Keep a table in memory for the rest of the session (its view then reads the copy).

        For the report, which asks a year of crashes dozens of questions:
        one read of the files instead of one per question.
        """
        self.ensure(schema)
        cols = [c for c in self.columns[schema] if c not in exclude]
        sel = ", ".join(quote(c) for c in cols)
        self._run(lambda: self.con.execute(f"CREATE OR REPLACE TEMP TABLE {schema}_pinned AS SELECT {sel} FROM {schema}"))
        self.con.execute(f"CREATE OR REPLACE VIEW {schema} AS SELECT * FROM {schema}_pinned")
        self.columns[schema] = cols

    def materialize(self, name: str, sql: str, params: list[Any] | None = None) -> None:
        """Keep a query's rows as a temporary table ``name`` (many questions about one signature's few rows)."""
        self._ensure_for(sql)
        self._run(lambda: self.con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {sql}", params or []))
        self.columns[name] = [r[0] for r in self.con.execute(f"DESCRIBE {name}").fetchall()]
        self._built.add(name)

    def _run(self, fn: Any) -> Any:
        try:
            return fn()
        except duckdb.Error as first:
            if not self._find_damaged():
                raise ArchiveError(f"query failed: {first}") from None
            built = set(self._built)
            self._build()
            self.ensure(*(b for b in built if b in self.files))
            try:
                return fn()
            except duckdb.Error as exc:
                raise ArchiveError(f"query failed: {exc}") from None

    def _find_damaged(self) -> bool:
        """Open every listed file in full; skip the bad ones. True if any was found."""
        found = False
        for files in self.files.values():
            for f in files:
                if not f.path.exists():  # compacted away since the listing: rebuilding relists
                    found = True
                    continue
                why = _reads_ok(f.path)
                if why is not None:
                    self._skip(f.path, why)
                    found = True
        return found

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Archive", "SkippedFile", "duck_type", "quote", "to_day"]
