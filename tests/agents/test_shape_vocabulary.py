"""The crash-shape flags the agents write come from one vocabulary, the one host_spike reads."""

from __future__ import annotations

import re
from pathlib import Path

from fleetepi.contract import shapes

AGENTS = Path(__file__).resolve().parents[2] / "agents"


def test_the_agents_write_shape_flags_only_by_their_shared_names() -> None:
    """A flag written as a literal is a name the detector may not know (as ``ip_zero`` once was)."""
    literal = re.compile(r"""flags(?:\.append\(|\s*=\s*\[|,\s*)\s*["']""")
    offenders = [f"{p.relative_to(AGENTS)}:{i}" for p in AGENTS.rglob("*.py")
                 for i, line in enumerate(p.read_text().splitlines(), 1) if literal.search(line)]
    assert offenders == []


def test_the_simulator_s_names_read_as_the_agents() -> None:
    assert shapes.hardware_flags(["misaligned_sp", "return_to_null", "bit_flip_address"]) == [shapes.SP_MISALIGNED]
    assert shapes.hardware_flags([shapes.IP_ZERO, shapes.SP_UNMAPPED, shapes.FAULT_BITFLIP]) == []
    assert shapes.hardware_flags([shapes.GP_FAULT]) == [shapes.GP_FAULT]
    assert shapes.hardware_flags([shapes.MEMORY_POISONED]) == [shapes.MEMORY_POISONED]
