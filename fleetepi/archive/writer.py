"""``ArchiveWriter``: accepted events and alerts in, Parquet partitions out, off the hot path.

The replay loop must lose at most a fifth of its speed to the archive
(bench/archive.py), and a replay spends ~5 µs per event. So the caller's
thread does one thing per event: append it (better: the JSON line it came
from) to a list. Every :attr:`batch_events` events the lists are handed to
one background thread, which does the work in C libraries that release the
GIL: Arrow's JSON reader parses the lines straight into columns (a line the
engine accepted is already contract JSON; events without a line are
re-encoded by msgspec), attribute sets are joined by a vectorised as-of
lookup (``history.py``), rows are split by event day and staged, and a
day's staged rows become one Parquet file (zstd, sorted, row groups with
statistics) once the day is over or enough rows are staged. The queue
between the threads holds two batches, so a writer that falls behind slows
the caller down instead of growing without bound.

A batch the JSON reader refuses (a form of a field Arrow does not parse the
way msgspec does) is converted again the slow, sure way, from the decoded
structs; nothing is dropped.
"""

from __future__ import annotations

import io
import logging
import os
import queue
import tempfile
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from fleetepi.archive.exceptions import ArchiveError
from fleetepi.archive.history import AttributeHistory
from fleetepi.archive.layout import ensure_meta, new_part_name, partition_dir, publish, tmp_path_for
from fleetepi.archive.reader import duck_type
from fleetepi.archive.schema import BASE_COLUMNS, FORMAT_VERSION, JSON_FIELDS, TS, json_schema
from fleetepi.contract import Alert, Crash, Event, Host, Telemetry, decode_event
from fleetepi.exceptions import InvalidMessage

log = logging.getLogger(__name__)

DAY_MS = 86_400_000
_KIND = {Crash: "crash", Telemetry: "telemetry"}
_ENC = msgspec.json.Encoder()


@dataclass
class WriterStats:
    """What a writer wrote (read after :meth:`ArchiveWriter.close`)."""

    rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    files: int = 0
    bytes: int = 0
    slow_batches: int = 0  # batches the JSON reader refused, converted from structs instead


@dataclass
class _Batch:
    raw: dict[str, list[bytes]]
    structs: dict[str, list[Event]]
    hosts: list[Host]
    alerts: list[Alert]
    src: dict[str, tuple[list[bytes], list[int], list[int]]]  # kind -> lines, partitions, offsets
    flush: threading.Event | None = None


class ArchiveWriter:
    """Append accepted events and alerts to the archive at ``root``.

    :param root: archive folder (created, with its metadata file, if absent).
    :param batch_events: events per hand-off to the background thread.
    :param rows_per_file: a day's staged rows are written once they reach this many.
    :param background: convert and write in a thread (False: in the caller's thread, for tests).
    :param fsync: fsync each file before it is renamed into place.

    Use as a context manager, or call :meth:`close`: rows still staged are
    written then. :meth:`flush` writes everything staged now (a stream
    archiver calls it before committing its offsets).
    """

    def __init__(self, root: str | Path, *, batch_events: int = 65_536, rows_per_file: int = 2_000_000,
                 background: bool = True, fsync: bool = True, compression: str = "zstd") -> None:
        self.root = Path(root)
        ensure_meta(self.root)
        self.batch_events = batch_events
        self.rows_per_file = rows_per_file
        self.fsync = fsync
        self.compression = compression
        self.stats = WriterStats()
        self.history = AttributeHistory()
        self._reset()
        # background state (touched by the writer thread only)
        self._staged: dict[tuple[str, int], list[pa.Table]] = defaultdict(list)
        self._staged_rows: dict[tuple[str, int], int] = defaultdict(int)
        self._hostday: dict[int, dict[tuple[str, int], list[int]]] = defaultdict(dict)
        self._max_day = -1
        self._error: BaseException | None = None
        self._duck: duckdb.DuckDBPyConnection | None = None
        self._closed = False
        self._queue: queue.Queue[_Batch | None] | None = None
        self._thread: threading.Thread | None = None
        if background:
            self._queue = queue.Queue(maxsize=2)
            self._thread = threading.Thread(target=self._loop, name="fleetepi-archive-writer", daemon=True)
            self._thread.start()

    # ------------------------------------------------------------------ caller's side
    def _reset(self) -> None:
        self._raw: dict[str, list[bytes]] = {"crash": [], "telemetry": []}
        self._structs: dict[str, list[Event]] = {"crash": [], "telemetry": []}
        self._hosts: list[Host] = []
        self._alerts: list[Alert] = []
        self._src: dict[str, tuple[list[bytes], list[int], list[int]]] = {
            k: ([], [], []) for k in ("crash", "telemetry")}
        self._lines_for: dict[type, list[bytes]] = {Crash: self._raw["crash"], Telemetry: self._raw["telemetry"]}
        self._n = 0

    def add(self, event: Event, raw: bytes | None = None) -> None:
        """Archive one accepted event; ``raw`` is the JSON it was decoded from, if at hand (cheaper)."""
        lines = self._lines_for.get(type(event)) if raw is not None else None
        if lines is not None:  # the replay's case, 99 % of calls: one lookup, one append
            lines.append(raw)  # type: ignore[arg-type]
        elif type(event) is Host:
            self._hosts.append(event)  # type: ignore[arg-type]
        else:
            self._structs[_KIND[type(event)]].append(event)
        self._n += 1
        if self._n >= self.batch_events:
            self._handoff(None)

    def add_alert(self, alert: Alert) -> None:
        self._alerts.append(alert)

    def add_record(self, event: Event | Alert, raw: bytes, partition: int, offset: int) -> None:
        """Archive one record read from Kafka, with its coordinates (compaction de-duplicates by them)."""
        t = type(event)
        if t is Host:
            self._hosts.append(event)  # type: ignore[arg-type]
        elif t is Alert:
            self._alerts.append(event)  # type: ignore[arg-type]
        else:
            lines, parts, offs = self._src[_KIND[t]]
            lines.append(raw)
            parts.append(partition)
            offs.append(offset)
        self._n += 1
        if self._n >= self.batch_events:
            self._handoff(None)

    def flush(self, timeout_s: float | None = None) -> None:
        """Write everything added so far to visible files; blocks until done."""
        done = threading.Event()
        self._handoff(done)
        if self._thread is not None and not done.wait(timeout_s):
            raise ArchiveError("archive writer did not flush in time")
        self._raise()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            if self._queue is not None and self._thread is not None and self._thread.is_alive():
                self._queue.put(None)
                self._thread.join()

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _handoff(self, flush: threading.Event | None) -> None:
        self._raise()
        if self._closed:
            raise ArchiveError("archive writer is closed")
        batch = _Batch(self._raw, self._structs, self._hosts, self._alerts, self._src, flush)
        self._reset()
        if self._queue is None:
            self._work(batch)
        else:
            self._queue.put(batch)

    def _raise(self) -> None:
        if self._error is not None:
            err, self._error = self._error, None
            if isinstance(err, ArchiveError):
                raise err
            raise ArchiveError(f"archive writer failed: {type(err).__name__}: {err}") from err

    # ------------------------------------------------------------------ writer thread
    def _loop(self) -> None:
        assert self._queue is not None
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            try:
                if self._error is None:
                    self._work(batch)
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, raised there
                log.error("archive writer failed: %s", exc)
                self._error = exc
            finally:
                if batch.flush is not None:
                    batch.flush.set()

    def _work(self, batch: _Batch) -> None:
        tables: list[tuple[str, pa.Table]] = []
        if batch.hosts:
            tables.append(("host", self._hosts_table(batch.hosts)))
        for name in ("crash", "telemetry"):
            raw, structs = batch.raw[name], batch.structs[name]
            if raw:
                tables.append((name, self._events_table(name, raw, None)))
            if structs:
                tables.append((name, self._events_table(name, None, structs)))
            lines, parts, offs = batch.src[name]
            if lines:
                t = self._events_table(name, lines, None)
                if t.num_rows == len(parts):  # (a slow-path batch that lost an undecodable line keeps no coordinates)
                    t = t.append_column("src_partition", pa.array(parts, type=pa.int64()))
                    t = t.append_column("src_offset", pa.array(offs, type=pa.int64()))
                tables.append((name, t))
        if batch.alerts:
            tables.append(("alert", self._alerts_table(batch.alerts)))
        for name, table in tables:
            self._stage(name, table)
        self._write_ready(final=batch.flush is not None)

    def _hosts_table(self, hosts: list[Host]) -> pa.Table:
        ts = np.array([h.ts_ms for h in hosts], dtype=np.int64)
        sids = np.array([self.history.announce(h.host, int(t), h.attributes) for h, t in zip(hosts, ts.tolist())],
                        dtype=np.int64)
        cols: dict[str, pa.Array] = {"ts": pa.array(ts, type=pa.int64()).cast(TS),
                                     "host": pa.array([h.host for h in hosts], type=pa.string())}
        cols.update(self.history.columns(sids))
        table = pa.table(cols)
        return table.append_column("_sid", pa.array(sids))

    def _events_table(self, name: str, raw: list[bytes] | None, structs: list[Event] | None) -> pa.Table:
        table = None
        if raw is not None:
            try:
                table = self._parse_lines(name, raw)
            except (pa.ArrowInvalid, pa.ArrowTypeError, duckdb.Error) as exc:
                log.warning("archive: Arrow refused a %s batch (%s); converting it from decoded events", name, exc)
                self.stats.slow_batches += 1
                structs = _decode_all(raw)
        if table is None:
            assert structs is not None
            buf = _ENC.encode_lines(structs)
            try:
                table = _read_json(name, buf, None)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                self.stats.slow_batches += 1
                table = pa.Table.from_pylist([msgspec.to_builtins(e) for e in structs], schema=json_schema(name))
                table = _fix_ts(table)
        ts_ms = table.column("ts").cast(pa.int64()).to_numpy()
        sids = self.history.lookup(table.column("host"), ts_ms)
        for col, arr in self.history.columns(sids).items():
            table = table.append_column(col, arr)
        return table.append_column("_sid", pa.array(sids))

    def _parse_lines(self, name: str, raw: list[bytes]) -> pa.Table:
        """The batch's JSON lines as columns: DuckDB's JSON reader, one thread (~1.2 µs a line of CPU, half of
        Arrow's), reading a spill file in the temp folder; Arrow's reader if DuckDB refuses the batch."""
        if self._duck is None:
            self._duck = duckdb.connect()
            self._duck.execute("SET threads = 1")
            self._duck.execute("SET TimeZone = 'UTC'")
        fd, spill = tempfile.mkstemp(prefix="fleetepi-archive-", suffix=".jsonl", dir=_SPILL_DIR)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(b"\n".join(raw))
            try:
                table = self._duck.sql(f"SELECT * FROM read_json('{spill}', format = 'newline_delimited', "
                                       f"columns = {_DUCK_COLUMNS[name]}, maximum_object_size = 67108864)"
                                       ).to_arrow_table()
                return _fix_ts(table)
            except duckdb.Error:
                return _read_json(name, b"\n".join(raw), max(map(len, raw)))
        finally:
            os.unlink(spill)

    def _alerts_table(self, alerts: list[Alert]) -> pa.Table:
        rows = [msgspec.to_builtins(a) for a in alerts]
        table = _fix_ts(pa.Table.from_pylist(rows, schema=json_schema("alert")))
        # msgspec omits fields at their default: the contract's default state is "firing"
        state = pc.fill_null(table.column("state"), "firing")
        table = table.set_column(table.column_names.index("state"), "state", state)
        return table.append_column("key", pa.array([a.key for a in alerts], type=pa.string()))

    def _stage(self, name: str, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        day = pc.divide(table.column("ts").cast(pa.int64()), DAY_MS).to_numpy()
        if name in ("crash", "telemetry"):
            self._rollup(name, table, day)
        if "_sid" in table.column_names:
            table = table.drop_columns(["_sid"])
        lo, hi = int(day.min()), int(day.max())
        self._max_day = max(self._max_day, hi)
        for d in range(lo, hi + 1):
            part = table if lo == hi else table.filter(pa.array(day == d))
            if part.num_rows:
                self._staged[(name, d)].append(part)
                self._staged_rows[(name, d)] += part.num_rows

    def _rollup(self, name: str, table: pa.Table, day: np.ndarray) -> None:
        """Count events (and crashes) per (day, host, attribute set): the denominators."""
        enc = pc.dictionary_encode(table.column("host")).combine_chunks()
        names = enc.dictionary.to_pylist()
        hidx = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        sid = table.column("_sid").to_numpy() + 1  # -1 (never announced) -> 0
        d0 = int(day.min())
        # one int64 key per row (day offset | host | attribute set): a 1-D unique, not a slow row-wise one
        key = ((day - d0).astype(np.int64) << 42) | (hidx << 21) | sid.astype(np.int64)
        uniq, counts = np.unique(key, return_counts=True)
        crash = 1 if name == "crash" else 0
        rows = zip(((uniq >> 42) + d0).tolist(), ((uniq >> 21) & 0x1FFFFF).tolist(), ((uniq & 0x1FFFFF) - 1).tolist())
        for (d, h, s), n in zip(rows, counts.tolist()):
            slot = self._hostday[d].get((names[h], s))
            if slot is None:
                self._hostday[d][(names[h], s)] = [n, n * crash]
            else:
                slot[0] += n
                slot[1] += n * crash

    def _write_ready(self, final: bool) -> None:
        """Write the staged days that are over (or all, at a flush), and any day grown big."""
        for key in sorted(self._staged):
            name, d = key
            if final or d < self._max_day - 1 or self._staged_rows[key] >= self.rows_per_file:
                tables = self._staged.pop(key)
                del self._staged_rows[key]
                self._write(name, d, pa.concat_tables(tables, promote_options="permissive"))
        for d in sorted(self._hostday):
            if final or d < self._max_day - 1:
                self._write("hostday", d, self._hostday_table(self._hostday.pop(d)))

    def _hostday_table(self, rows: dict[tuple[str, int], list[int]]) -> pa.Table:
        keys = list(rows)
        sids = np.array([s for _, s in keys], dtype=np.int64)
        cols: dict[str, pa.Array] = {
            "host": pa.array([h for h, _ in keys], type=pa.string()),
            "events": pa.array([v[0] for v in rows.values()], type=pa.int64()),
            "crashes": pa.array([v[1] for v in rows.values()], type=pa.int64()),
        }
        cols.update(self.history.columns(sids))
        return pa.table(cols)

    def _write(self, name: str, day_index: int, table: pa.Table) -> None:
        if table.num_rows == 0:
            return
        # rows stay in arrival order (a replay's is event time): sorting would copy every column of the
        # hot path; compaction sorts (SORT_KEYS) when it rewrites the day anyway
        table = _canonical(name, table)
        day = str(np.datetime64(day_index, "D"))
        folder = partition_dir(self.root, name, day)
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / new_part_name()
        tmp = tmp_path_for(final)
        meta = {b"fleetepi.format": str(FORMAT_VERSION).encode(), b"fleetepi.schema": name.encode()}
        table = table.replace_schema_metadata(meta)
        try:
            # dictionaries for strings only (hosts, kinds, attributes repeat; times and readings do not):
            # ~15 % less CPU and smaller files than dictionaries for every column
            strings = [f.name for f in table.schema if pa.types.is_string(f.type)]
            pq.write_table(table, tmp, compression=self.compression, row_group_size=256_000,
                           use_dictionary=strings, write_statistics=True)
            publish(tmp, final, fsync=self.fsync)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ArchiveError(f"{final}: cannot write: {exc.strerror or exc}") from None
        self.stats.files += 1
        self.stats.bytes += final.stat().st_size
        self.stats.rows[name] += table.num_rows


# ---------------------------------------------------------------------- conversions
#: DuckDB ``columns = {...}`` of each JSON table; ``ts`` is parsed by DuckDB (RFC 3339, any offset).
_DUCK_COLUMNS = {
    name: "{" + ", ".join(f"'{f}': '{duck_type(t) if f != 'ts' else 'TIMESTAMPTZ'}'" for f, t in JSON_FIELDS[name]) + "}"
    for name in ("crash", "telemetry")
}
#: Where batches are spilled for DuckDB's reader: memory (tmpfs) where there is one.
_SPILL_DIR = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None


def _read_json(name: str, buf: bytes, longest: int | None) -> pa.Table:
    block = max(8 << 20, 2 * (longest or 0) + 1024)
    table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(block_size=block),
                         parse_options=pj.ParseOptions(explicit_schema=json_schema(name),
                                                       unexpected_field_behavior="ignore"))
    return _fix_ts(table)


def _fix_ts(table: pa.Table) -> pa.Table:
    """``ts`` as UTC milliseconds: from RFC 3339 text (via ns: any fraction msgspec accepts) or DuckDB's µs."""
    col = table.column("ts")
    if col.type == pa.string():
        ts = pc.cast(col, pa.timestamp("ns", tz="UTC")).cast(TS, safe=False)
        table = table.set_column(table.column_names.index("ts"), "ts", ts)
    elif col.type != TS:
        table = table.set_column(table.column_names.index("ts"), "ts", col.cast(TS, safe=False))
    return table


def _decode_all(raw: list[bytes]) -> list[Event]:
    out: list[Event] = []
    for line in raw:
        try:
            out.append(decode_event(line))
        except InvalidMessage:  # the caller said it was accepted; keep the rest of the batch
            log.warning("archive: dropped a line that does not decode: %.80r", line)
    return out


def _canonical(name: str, table: pa.Table) -> pa.Table:
    """Base columns in contract order with their archive types, then ``attr.*`` sorted."""
    cols, fields = [], []
    for col, typ in BASE_COLUMNS[name]:
        if col in table.column_names:
            arr = table.column(col)
            if arr.type != typ:
                arr = arr.cast(typ)
        else:
            arr = pa.nulls(table.num_rows, typ)
        cols.append(arr)
        fields.append(pa.field(col, typ))
    for col in sorted(c for c in table.column_names if c.startswith("attr.")):
        cols.append(table.column(col))
        fields.append(pa.field(col, pa.string()))
    return pa.Table.from_arrays(cols, schema=pa.schema(fields))


def now_ms() -> int:
    return time.time_ns() // 1_000_000


__all__ = ["ArchiveWriter", "WriterStats"]
