"""Writing a simulation: events as JSON lines (optionally gzip), truth as one JSON document.

Events are encoded with msgspec's ``encode_lines`` a chunk at a time (the
contract structs encode in C, ~0.3 µs each), so writing is bound by building
the structs, not by JSON. gzip uses level 1: the files are scratch
recordings, and level 6 would triple the time for 15 % less disk.
"""

from __future__ import annotations

import gzip
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from itertools import islice
from pathlib import Path
from typing import IO, Any

import msgspec
import orjson

from fleetepi.simulate.background import JobBurst
from fleetepi.simulate.benign import from_burst
from fleetepi.simulate.simulation import Simulation, ts_datetime
from fleetepi.simulate.truth import Benign, Outbreak

#: Schema of the truth file; v2 adds ``benign`` (v1 readers still find ``outbreaks`` and ``job_bursts``).
TRUTH_SCHEMA = "fleetepi.simulate.truth/v2"

_BATCH = 8192


@contextmanager
def _open_out(path: str | Path | IO[bytes]) -> Iterator[IO[bytes]]:
    if not isinstance(path, (str, Path)):
        yield path
        return
    if str(path) == "-":
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    p = Path(path)
    if p.suffix == ".gz":
        with gzip.open(p, "wb", compresslevel=1) as f:
            yield f  # type: ignore[misc]
    else:
        with open(p, "wb", buffering=1 << 20) as f:
            yield f


def write_jsonl(sim: Simulation, path: str | Path | IO[bytes],
                progress: Callable[[int], Any] | None = None) -> int:
    """Write every event, one JSON object a line (``.gz``: gzip; ``-``: stdout). Returns lines written.

    :param progress: called with the number of events written since the last call.
    """
    enc = msgspec.json.Encoder()
    n = 0
    events = sim.events()
    with _open_out(path) as f:
        while True:
            batch = list(islice(events, _BATCH))
            if not batch:
                break
            f.write(enc.encode_lines(batch))
            n += len(batch)
            if progress is not None:
                progress(len(batch))
    return n


def truth_document(sim: Simulation) -> dict[str, Any]:
    """The ground truth as plain data (what ``write_truth`` writes)."""
    cfg = sim.config

    def iso(ms: int) -> str:
        return ts_datetime(ms).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"

    outbreaks = []
    for o in sim.truth:
        d = o.to_json()
        d["start"], d["end"] = iso(o.start_ms), iso(o.end_ms)
        outbreaks.append(d)
    benign = []
    for b in sim.benign:
        if b.type == "job_abort":  # listed under job_bursts (hosts are long lists)
            continue
        d = b.to_json()
        d["start"], d["end"] = iso(b.start_ms), iso(b.end_ms)
        benign.append(d)
    return {
        "schema": TRUTH_SCHEMA,
        "config": {"preset": cfg.preset, "hosts": cfg.hosts, "days": cfg.days, "seed": cfg.seed, "start": cfg.start,
                   "outbreaks": [o.template for o in cfg.outbreaks]},
        "start_ms": sim.start_ms,
        "end_ms": sim.end_ms,
        "hosts": len(sim.hosts),
        "outbreaks": outbreaks,
        "benign": benign,
        "job_bursts": [{"job": b.job, "signature": b.signature, "hosts": list(b.hosts), "start_ms": b.start_ms,
                        "end_ms": b.end_ms} for b in sim.bursts],
    }


def write_truth(sim: Simulation, path: str | Path | IO[bytes]) -> None:
    """Write the ground truth (outbreaks and background job bursts) as indented JSON."""
    data = orjson.dumps(truth_document(sim), option=orjson.OPT_INDENT_2) + b"\n"
    with _open_out(path) as f:
        f.write(data)


def read_truth(path: str | Path) -> list[Outbreak]:
    """The outbreaks of a truth file written by :func:`write_truth`."""
    doc = orjson.loads(Path(path).read_bytes())
    return [Outbreak.from_json(d) for d in doc["outbreaks"]]


def read_benign(path: str | Path) -> list[Benign]:
    """The benign phenomena of a truth file: job bursts first (as ``Simulation.benign``), then the rest.

    A v1 file has job bursts only.
    """
    doc = orjson.loads(Path(path).read_bytes())
    bursts = [from_burst(JobBurst(d["job"], d["signature"], tuple(d["hosts"]), d["start_ms"], d["end_ms"]))
              for d in doc.get("job_bursts", ())]
    bursts = [Benign(**{**b.__dict__, "id": f"b{k}"}) for k, b in enumerate(bursts)]
    return bursts + [Benign.from_json(d) for d in doc.get("benign", ())]


__all__ = ["TRUTH_SCHEMA", "read_benign", "read_truth", "truth_document", "write_jsonl", "write_truth"]
