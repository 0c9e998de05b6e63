"""The archive's tables: one Arrow schema per contract message, plus the host-day rollup.

Columns mirror the contract's fields (``fleetepi.contract.models``) so that a
reader who knows the contract knows the archive. Host attributes are not a
map but one column per key, named ``attr.<key>`` (``attr.rack``,
``attr.gpu_model``): attribute keys are free-form and never named in code,
yet a cohort question becomes a plain filter (``"attr.rack" = 'r07'``) that
Parquet statistics and dictionary pages answer fast, in DuckDB, Trino or
Spark alike. Files written with different key sets are read together by
name (``union_by_name``), a missing key reading as NULL.

``hostday`` is written beside the events: one row per host, day and
attribute set, with the events and crashes that host had that day. It is
the denominator table (hosts in a cohort, host-days observed) that makes a
cohort's relative risk a small query instead of a scan of a year's
telemetry.

Bump :data:`FORMAT_VERSION` when a change would make older readers wrong
(not when a column is added: readers tolerate missing and extra columns).
"""

from __future__ import annotations

import pyarrow as pa

#: Written to ``_fleetepi_archive.json``; readers accept this version and every older one.
FORMAT_VERSION = 1
#: Prefix of the per-attribute columns.
ATTR_PREFIX = "attr."

TS = pa.timestamp("ms", tz="UTC")
_STR = pa.string()
_INT = pa.int64()
_F64 = pa.float64()

FRAME = pa.struct([("module", _STR), ("function", _STR), ("offset", _STR), ("language", _STR),
                   ("file", _STR), ("line", _INT)])
MODULE = pa.struct([("name", _STR), ("build_id", _STR), ("base", _STR), ("size", _INT)])

#: Fields as the contract's JSON has them (what the JSON reader is told), per schema; ``ts`` is read
#: as a string and converted (Arrow's JSON reader does not parse every RFC 3339 form msgspec accepts).
JSON_FIELDS: dict[str, list[tuple[str, pa.DataType]]] = {
    "crash": [
        ("ts", _STR), ("host", _STR), ("signature", _STR), ("signal", _STR), ("executable", _STR),
        ("fault_address", _STR), ("job", _STR), ("core_sha256", _STR), ("origin", _STR), ("cpu", _INT),
        ("si_code", _INT), ("fault_class", _STR), ("shape_flags", pa.list_(_STR)), ("bitflip_score", _F64),
        ("frames", pa.list_(FRAME)), ("modules", pa.list_(MODULE)), ("notes", pa.list_(_STR)),
        ("partial", pa.bool_()),
    ],
    "telemetry": [
        ("ts", _STR), ("host", _STR), ("kind", _STR), ("device", _STR), ("code", _INT), ("count", _INT),
        ("value", _F64), ("message", _STR), ("severity", _STR), ("action", _STR),
    ],
    "alert": [
        ("ts", _STR), ("kind", _STR), ("score", _F64), ("state", _STR), ("signature", _STR), ("host", _STR),
        ("attribute", _STR), ("value", _STR), ("telemetry_kind", _STR), ("code", _INT), ("p_value", _F64),
        ("observed", _F64), ("expected", _F64), ("relative_risk", _F64), ("window_s", _F64), ("summary", _STR),
        ("severity", _STR), ("finding", _STR), ("incident", _STR), ("lower_ci", _F64), ("upper_ci", _F64),
        ("notes", pa.list_(_STR)),
    ],
}

#: Columns of each stored table apart from ``attr.*`` (``ts`` as a timestamp now).
BASE_COLUMNS: dict[str, list[tuple[str, pa.DataType]]] = {
    name: [("ts", TS) if f == "ts" else (f, t) for f, t in fields] for name, fields in JSON_FIELDS.items()
}
BASE_COLUMNS["host"] = [("ts", TS), ("host", _STR)]
BASE_COLUMNS["alert"] = [*BASE_COLUMNS["alert"], ("key", _STR)]
#: Kafka coordinates of the record a row came from (stream archiver only; NULL from a replay):
#: compaction drops rows redelivered after a restart by them.
SRC_COLUMNS = [("src_partition", _INT), ("src_offset", _INT)]
for _name in ("crash", "telemetry", "host", "alert"):
    BASE_COLUMNS[_name] = [*BASE_COLUMNS[_name], *SRC_COLUMNS]
BASE_COLUMNS["hostday"] = [("host", _STR), ("events", _INT), ("crashes", _INT)]

#: The archive's tables, i.e. the ``schema=`` partitions.
SCHEMAS: tuple[str, ...] = ("host", "crash", "telemetry", "alert", "hostday")
#: Tables whose rows carry the host's attributes as of the row's time.
WITH_ATTRIBUTES = frozenset({"host", "crash", "telemetry", "hostday"})
#: Sort order inside a file: rows of one kind together makes row-group statistics skip thermal
#: readings when a query wants Xids, and compresses better than arrival order.
SORT_KEYS: dict[str, list[tuple[str, str]]] = {
    "telemetry": [("kind", "ascending"), ("ts", "ascending")],
    "crash": [("ts", "ascending")],
    "host": [("ts", "ascending")],
    "alert": [("ts", "ascending")],
    "hostday": [("host", "ascending")],
}


def json_schema(name: str) -> pa.Schema:
    return pa.schema(JSON_FIELDS[name])


def attr_column(key: str) -> str:
    return ATTR_PREFIX + key


def attr_key(column: str) -> str | None:
    """The attribute key of an ``attr.*`` column name, None for other columns."""
    return column[len(ATTR_PREFIX):] if column.startswith(ATTR_PREFIX) else None


def base_types(name: str) -> dict[str, pa.DataType]:
    return dict(BASE_COLUMNS[name])


__all__ = [
    "ATTR_PREFIX",
    "BASE_COLUMNS",
    "FORMAT_VERSION",
    "JSON_FIELDS",
    "SCHEMAS",
    "SORT_KEYS",
    "SRC_COLUMNS",
    "TS",
    "WITH_ATTRIBUTES",
    "attr_column",
    "attr_key",
    "base_types",
    "json_schema",
]
