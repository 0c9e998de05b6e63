"""Columnar event tables: how the simulator holds millions of events cheaply.

Events are generated as numpy columns (one array per field) and only turned
into contract structs when iterated or written, so a 2 M-event fleet costs
a few tens of MB and is drawn in seconds. ``origin`` tags every row with
where it came from (background, a job burst, or outbreak *i*); tests and the
benchmark use it, consumers never see it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

#: ``origin`` of background rows; job-burst rows carry ``BURST``; outbreak *i* carries *i*;
#: benign phenomena carry their own negative codes.
BACKGROUND = -1
BURST = -2
CRASH_LOOP = -3
CHRONIC = -4
#: Background crashes of a statically associated signature (placed on its cohort).
STATIC = -5
MAINTENANCE = -6
#: Rows a benign phenomenon added (or placed), by its origin code.
BENIGN_ORIGINS = (BURST, CRASH_LOOP, CHRONIC, STATIC, MAINTENANCE)


@dataclass
class CrashTable:
    ts_ms: np.ndarray  # int64
    host: np.ndarray  # int32, index into Fleet.names
    sig: np.ndarray  # int32, index into Simulation.signatures
    job: np.ndarray  # int64, job number (-1: none)
    shape: np.ndarray  # int8, index into catalog.SHAPES
    address: np.ndarray  # uint64 fault address (ignored where the shape has none)
    bitflip: np.ndarray  # float32, NaN: field left out
    origin: np.ndarray  # int32
    source: np.ndarray  # int8, index into CRASH_SOURCES (-1: a core dump, field left out)

    def __len__(self) -> int:
        return len(self.ts_ms)


#: Values of the contract's crash ``origin`` (v1.1) a simulated crash can carry.
CRASH_SOURCES = ("core_dump", "python_traceback", "kernel_log", "watchdog", "oom_kill", "runtime_error")
SOURCE_INDEX = {s: i for i, s in enumerate(CRASH_SOURCES)}


@dataclass
class TelemetryTable:
    ts_ms: np.ndarray  # int64
    host: np.ndarray  # int32
    kind: np.ndarray  # int8, index into catalog.TELEMETRY_KINDS
    code: np.ndarray  # int32 (-1: none)
    count: np.ndarray  # int64 (-1: none)
    value: np.ndarray  # float32 (NaN: none)
    device: np.ndarray  # int8 (-1: none)
    origin: np.ndarray  # int32

    def __len__(self) -> int:
        return len(self.ts_ms)


_CRASH_DTYPES = {"ts_ms": np.int64, "host": np.int32, "sig": np.int32, "job": np.int64, "shape": np.int8,
                 "address": np.uint64, "bitflip": np.float32, "origin": np.int32, "source": np.int8}
#: Columns a caller may leave out, and their value.
_DEFAULTS = {"source": -1}
_TEL_DTYPES = {"ts_ms": np.int64, "host": np.int32, "kind": np.int8, "code": np.int32, "count": np.int64,
               "value": np.float32, "device": np.int8, "origin": np.int32}


def crash_table(**cols: object) -> CrashTable:
    """Build a table from columns (scalars broadcast to the length of ``ts_ms``)."""
    return CrashTable(**_columns(cols, _CRASH_DTYPES))  # type: ignore[arg-type]


def telemetry_table(**cols: object) -> TelemetryTable:
    return TelemetryTable(**_columns(cols, _TEL_DTYPES))  # type: ignore[arg-type]


def _columns(cols: dict[str, object], dtypes: dict[str, type]) -> dict[str, np.ndarray]:
    n = len(np.asarray(cols["ts_ms"]))
    out = {}
    for name, dtype in dtypes.items():
        v = cols[name] if name in cols else _DEFAULTS[name]
        arr = np.asarray(v, dtype=dtype)
        out[name] = np.full(n, arr, dtype=dtype) if arr.ndim == 0 else arr
        if len(out[name]) != n:
            raise ValueError(f"column {name} has {len(out[name])} rows, expected {n}")
    return out


def concat(tables: list, cls: type) -> object:
    """Concatenate tables of one class column by column."""
    names = [f.name for f in fields(cls)]
    return cls(**{n: np.concatenate([getattr(t, n) for t in tables]) for n in names})


def take(table: object, index: np.ndarray) -> object:
    """Rows ``index`` of a table (a boolean mask or integer positions)."""
    cls = type(table)
    return cls(**{f.name: getattr(table, f.name)[index] for f in fields(cls)})


__all__ = ["BACKGROUND", "BENIGN_ORIGINS", "BURST", "CHRONIC", "CRASH_LOOP", "CRASH_SOURCES", "MAINTENANCE",
           "SOURCE_INDEX", "STATIC", "CrashTable", "TelemetryTable", "concat", "crash_table", "take", "telemetry_table"]
