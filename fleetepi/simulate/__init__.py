"""A simulated GPU fleet with labelled outbreaks: the test bed of the detectors.

::

    from fleetepi.simulate import SimConfig, simulate, write_jsonl, write_truth

    sim = simulate(SimConfig(hosts=2000, days=14, seed=1))
    for event in sim.events():      # Host / Crash / Telemetry, in event-time order
        ...
    sim.truth                       # list[Outbreak]: kind, entity, start_ms, end_ms
    write_jsonl(sim, "events.jsonl.gz"); write_truth(sim, "truth.json")

See docs/simulator.md for what the fleet looks like and why.
"""

from fleetepi.simulate.background import JobBurst
from fleetepi.simulate.config import DEFAULT_OUTBREAKS, TEMPLATES, OutbreakSpec, SimConfig, outbreak_specs
from fleetepi.simulate.exceptions import BaselineError, SimulationConfigError
from fleetepi.simulate.outbreaks import EntityKey, Outbreak, entity
from fleetepi.simulate.output import read_truth, truth_document, write_jsonl, write_truth
from fleetepi.simulate.simulation import Simulation, simulate

__all__ = [
    "BaselineError",
    "DEFAULT_OUTBREAKS",
    "EntityKey",
    "JobBurst",
    "Outbreak",
    "OutbreakSpec",
    "SimConfig",
    "Simulation",
    "SimulationConfigError",
    "TEMPLATES",
    "entity",
    "outbreak_specs",
    "read_truth",
    "simulate",
    "truth_document",
    "write_jsonl",
    "write_truth",
]
