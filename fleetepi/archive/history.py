"""Host attributes in event time, joined onto a batch of rows in one vectorised step.

The archive's own small inventory (the detectors' may change under it, and
the join it needs is different): each distinct attribute set is interned
once (``set id``), each host keeps its announcements as sorted
``(ts_ms, set id)``, and a batch of rows gets its set ids by one
``searchsorted`` over a composite ``(host, time)`` key, not by a Python
lookup per row. An event dated before its host's first announcement gets
the earliest known attributes (as the detectors' inventory does); an event
of a host never announced gets none (NULL attribute columns).
"""

from __future__ import annotations

from bisect import bisect_right

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from fleetepi.archive.schema import attr_column

#: Composite key = host index * 2**TIME_BITS + (ts - base); 2**42 ms is 139 years of span.
TIME_BITS = 42


class AttributeHistory:
    """Announcements per host, as set ids into :attr:`sets`.

    :param max_history: announcements kept per host; older ones fold into the
        oldest kept (bounded memory for a host that flaps).
    """

    def __init__(self, max_history: int = 64) -> None:
        self.max_history = max_history
        self.sets: list[dict[str, str]] = []
        self._set_ids: dict[tuple[tuple[str, str], ...], int] = {}
        self._hosts: dict[str, tuple[list[int], list[int]]] = {}
        self._columns: dict[str, pa.Array] = {}  # key -> value per set id (cache, grows with sets)

    def __len__(self) -> int:
        return len(self._hosts)

    def intern(self, attributes: dict[str, str]) -> int:
        key = tuple(sorted(attributes.items()))
        sid = self._set_ids.get(key)
        if sid is None:
            sid = self._set_ids[key] = len(self.sets)
            self.sets.append(dict(key))
            self._columns.clear()
        return sid

    def announce(self, host: str, ts_ms: int, attributes: dict[str, str]) -> int:
        """Record an announcement; returns its set id."""
        sid = self.intern(attributes)
        hist = self._hosts.get(host)
        if hist is None:
            self._hosts[host] = ([ts_ms], [sid])
            return sid
        times, ids = hist
        i = bisect_right(times, ts_ms)
        if i > 0 and ids[i - 1] == sid:
            return sid  # a re-announcement of what was already in force
        times.insert(i, ts_ms)
        ids.insert(i, sid)
        if len(times) > self.max_history:
            del times[0], ids[0]
        return sid

    def at(self, host: str, ts_ms: int) -> int:
        """Set id in force for one host at one time (-1 if never announced)."""
        hist = self._hosts.get(host)
        if hist is None:
            return -1
        times, ids = hist
        return ids[max(bisect_right(times, ts_ms) - 1, 0)]

    def lookup(self, hosts: pa.Array | pa.ChunkedArray, ts_ms: np.ndarray) -> np.ndarray:
        """Set id in force for every row (``-1`` for hosts never announced), vectorised."""
        n = len(ts_ms)
        out = np.full(n, -1, dtype=np.int64)
        if n == 0 or not self._hosts:
            return out
        enc = pc.dictionary_encode(hosts)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        names = enc.dictionary.to_pylist()
        row_host = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        h_idx: list[int] = []
        h_ts: list[int] = []
        h_sid: list[int] = []
        first = np.full(len(names), -1, dtype=np.int64)  # earliest set id per batch host
        for j, name in enumerate(names):
            hist = self._hosts.get(name)
            if hist is None:
                continue
            times, ids = hist
            first[j] = ids[0]
            h_idx.extend([j] * len(times))
            h_ts.extend(times)
            h_sid.extend(ids)
        if not h_idx:
            return out
        hts = np.asarray(h_ts, dtype=np.int64)
        base = min(int(hts.min()), int(ts_ms.min()))
        span = max(int(hts.max()), int(ts_ms.max())) - base
        if span >= 1 << TIME_BITS or len(names) >= 1 << (62 - TIME_BITS):
            return np.array([self.at(h, int(t)) for h, t in zip(hosts.to_pylist(), ts_ms.tolist())], dtype=np.int64)
        hkey = (np.asarray(h_idx, dtype=np.int64) << TIME_BITS) + (hts - base)
        rkey = (row_host << TIME_BITS) + (ts_ms.astype(np.int64) - base)
        pos = np.searchsorted(hkey, rkey, side="right") - 1
        sids = np.asarray(h_sid, dtype=np.int64)
        ok = pos >= 0
        same = np.zeros(n, dtype=bool)
        same[ok] = np.asarray(h_idx, dtype=np.int64)[pos[ok]] == row_host[ok]
        out[same] = sids[pos[same]]
        early = ~same  # before the host's first announcement, or never announced (first = -1)
        out[early] = first[row_host[early]]
        return out

    def keys(self, set_ids: np.ndarray) -> list[str]:
        """Attribute keys present in the given sets, sorted."""
        keys: set[str] = set()
        for sid in np.unique(set_ids).tolist():
            if sid >= 0:
                keys.update(self.sets[sid])
        return sorted(keys)

    def columns(self, set_ids: np.ndarray) -> dict[str, pa.Array]:
        """``attr.<key>`` columns for rows with these set ids (NULL where a set lacks the key)."""
        ids = pa.array(set_ids, mask=set_ids < 0, type=pa.int64())
        out: dict[str, pa.Array] = {}
        for key in self.keys(set_ids):
            values = self._columns.get(key)
            if values is None:
                values = self._columns[key] = pa.array([s.get(key) for s in self.sets], type=pa.string())
            out[attr_column(key)] = values.take(ids)
        return out


__all__ = ["AttributeHistory"]
