"""A minimal client of the Prometheus HTTP API (``/api/v1/query``, ``query_range``).

Only what the PNG renderer and the dashboard tests need: run one panel query
at an instant or over a range and get back labelled series as numpy arrays.
httpx errors and Prometheus ``status: error`` replies are translated here,
once, into :class:`fleetepi.dashboard.exceptions.PrometheusQueryError`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import httpx
import numpy as np

from fleetepi.dashboard.exceptions import PrometheusQueryError


@dataclass(frozen=True)
class Series:
    """One result series: its labels, sample times (unix seconds) and values."""

    labels: dict[str, str]
    times: np.ndarray
    values: np.ndarray

    def legend(self, template: str) -> str:
        """Grafana-style ``{{label}}`` substitution (missing labels become "")."""
        out = template
        for key, value in self.labels.items():
            out = out.replace("{{" + key + "}}", value)
        while "{{" in out and "}}" in out:
            start = out.index("{{")
            end = out.index("}}", start) + 2
            out = out[:start] + out[end:]
        return " ".join(out.split()) or ",".join(f"{k}={v}" for k, v in sorted(self.labels.items())) or "value"


class PrometheusAPI:
    """Query a Prometheus server.

    :param url: base URL, e.g. ``http://127.0.0.1:9090``.
    :param client: an ``httpx.Client`` to use (tests inject one; default: a new one).
    :param timeout_s: per-request timeout in seconds.
    """

    def __init__(self, url: str, client: httpx.Client | None = None, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._client = client or httpx.Client(timeout=timeout_s)

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PrometheusAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _get(self, path: str, params: dict[str, Any]) -> dict[str, Any]:
        try:
            resp = self._client.get(self.url + path, params=params)
        except httpx.HTTPError as exc:
            raise PrometheusQueryError(f"cannot reach Prometheus at {self.url}: {exc}", query=params.get("query", "")) from None
        try:
            body: dict[str, Any] = resp.json()
        except ValueError:
            raise PrometheusQueryError(
                f"Prometheus at {self.url} answered HTTP {resp.status_code} without JSON", query=params.get("query", "")
            ) from None
        if body.get("status") != "success":
            raise PrometheusQueryError(
                f"{body.get('errorType', 'error')}: {body.get('error', resp.text[:200])}", query=params.get("query", "")
            )
        data: dict[str, Any] = body["data"]
        return data

    def instant(self, query: str, at_s: float | None = None) -> list[Series]:
        """Evaluate ``query`` at ``at_s`` (unix seconds; now if None)."""
        params: dict[str, Any] = {"query": query}
        if at_s is not None:
            params["time"] = f"{at_s:.3f}"
        return _series(self._get("/api/v1/query", params))

    def range(self, query: str, start_s: float, end_s: float, step_s: float) -> list[Series]:
        """Evaluate ``query`` from ``start_s`` to ``end_s`` every ``step_s`` seconds."""
        params = {"query": query, "start": f"{start_s:.3f}", "end": f"{end_s:.3f}", "step": f"{step_s:g}"}
        return _series(self._get("/api/v1/query_range", params))


def _series(data: dict[str, Any]) -> list[Series]:
    rtype = data.get("resultType")
    out: list[Series] = []
    if rtype == "matrix":
        for r in data["result"]:
            pts = r["values"]
            t = np.array([float(p[0]) for p in pts])
            v = np.array([_num(p[1]) for p in pts])
            out.append(Series(dict(r["metric"]), t, v))
    elif rtype == "vector":
        for r in data["result"]:
            out.append(Series(dict(r["metric"]), np.array([float(r["value"][0])]), np.array([_num(r["value"][1])])))
    elif rtype == "scalar":
        ts, val = data["result"]
        out.append(Series({}, np.array([float(ts)]), np.array([_num(val)])))
    return out


def _num(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return math.nan


__all__ = ["PrometheusAPI", "Series"]
