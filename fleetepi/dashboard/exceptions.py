"""Errors of the dashboard package.

::

    FleetepiError
     └── DashboardError            anything the dashboard commands refuse to do
          └── PrometheusQueryError a query Prometheus rejected, or Prometheus unreachable
"""

from __future__ import annotations

from fleetepi.exceptions import FleetepiError


class DashboardError(FleetepiError):
    """The dashboard could not be built or rendered."""


class PrometheusQueryError(DashboardError):
    """Prometheus refused a query or could not be reached; ``query`` is the PromQL sent."""

    def __init__(self, message: str, query: str = "") -> None:
        super().__init__(f"{message} (query: {query})" if query else message)
        self.query = query


__all__ = ["DashboardError", "PrometheusQueryError"]
