"""Errors of the simulator and its benchmark.

::

    FleetepiError
     └── ConfigError
          └── SimulationConfigError   a SimConfig/OutbreakSpec that cannot describe a fleet
     └── BaselineError                 the R baseline (Rscript, surveillance) failed or is missing
"""

from __future__ import annotations

from fleetepi.exceptions import ConfigError, FleetepiError


class SimulationConfigError(ConfigError):
    """Invalid simulator settings; raised when the config is built, never mid-run."""


class BaselineError(FleetepiError):
    """The surveillance baseline could not run (no Rscript, package missing, script error)."""


__all__ = ["BaselineError", "SimulationConfigError"]
