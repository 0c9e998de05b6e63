"""Small simulated fleets shared by the simulator tests (drawn once per session: ~1 s)."""

from __future__ import annotations

import pytest

from fleetepi.simulate import SimConfig, Simulation, simulate


@pytest.fixture(scope="session")
def small_config() -> SimConfig:
    return SimConfig(hosts=160, days=2.0, seed=11)


@pytest.fixture(scope="session")
def small_sim(small_config: SimConfig) -> Simulation:
    return simulate(small_config)


@pytest.fixture(scope="session")
def small_events(small_sim: Simulation) -> list:
    return list(small_sim.events())
