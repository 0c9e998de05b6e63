"""A simulated GPU fleet with labelled outbreaks: the test bed of the detectors.

::

    from fleetepi.simulate import SimConfig, simulate, write_jsonl, write_truth

    sim = simulate(SimConfig(hosts=2000, days=14, seed=1))
    for event in sim.events():      # Host / Crash / Telemetry, in event-time order
        ...
    sim.truth                       # list[Outbreak]: kind, entity, start_ms, end_ms
    sim.benign                      # list[Benign]: crash loops, chronic hosts, ... and their expected tickets
    write_jsonl(sim, "events.jsonl.gz"); write_truth(sim, "truth.json")

    sim = simulate(preset("noisy", seed=101))   # a named fleet (presets.py): quiet, noisy, large, ...

See docs/simulator.md for what the fleet looks like and why.
"""

from fleetepi.simulate.background import JobBurst
from fleetepi.simulate.config import (
    CLASSIC_TEMPLATES,
    DEFAULT_OUTBREAKS,
    EXTENDED_TEMPLATES,
    TEMPLATES,
    OutbreakSpec,
    SimConfig,
    outbreak_specs,
)
from fleetepi.simulate.exceptions import BaselineError, SimulationConfigError
from fleetepi.simulate.output import read_benign, read_truth, truth_document, write_jsonl, write_truth
from fleetepi.simulate.presets import PRESETS, Preset, preset, preset_names
from fleetepi.simulate.simulation import Simulation, simulate
from fleetepi.simulate.truth import Benign, EntityKey, Outbreak, entity

__all__ = [
    "BaselineError",
    "Benign",
    "CLASSIC_TEMPLATES",
    "DEFAULT_OUTBREAKS",
    "EXTENDED_TEMPLATES",
    "EntityKey",
    "JobBurst",
    "Outbreak",
    "OutbreakSpec",
    "PRESETS",
    "Preset",
    "SimConfig",
    "Simulation",
    "SimulationConfigError",
    "TEMPLATES",
    "entity",
    "outbreak_specs",
    "preset",
    "preset_names",
    "read_benign",
    "read_truth",
    "simulate",
    "truth_document",
    "write_jsonl",
    "write_truth",
]
