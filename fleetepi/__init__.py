"""fleetepi: core dump epidemiology for GPU fleets."""

__version__ = "0.1.0"
