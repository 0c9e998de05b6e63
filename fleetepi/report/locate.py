"""Which attributes are *places*: found from how the inventory nests, never from their names.

Attribute keys are free-form (the contract says so), so the report cannot
look for ``datacenter`` or ``rack``. What it can see is nesting: ``A`` nests
in ``B`` when every value of ``A`` sits under exactly one value of ``B``
(every host of rack r17 is in dc1) and ``A`` has more values. Places nest
in chains (rack in cluster in datacenter); a hardware type nests at most
one deep (rack in gpu_model when each rack holds one model). So:

* the **coarsest location** is the attribute with the most attributes
  nested in it (ties: fewer values, then the name);
* the **finest location** under it is the nested attribute with the most
  values that still holds at least two hosts per value (a rack, not a
  per-host serial number).

``--by`` overrides the first and ``--heat ROWS:COLS`` both, for inventories
where nesting says nothing (Titan's cages are a position in every cabinet,
nested in none).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass


@dataclass(frozen=True)
class Places:
    coarse: str | None
    fine: str | None
    nested: dict[str, list[str]]  # attribute -> attributes nested in it


def nests_in(hosts: list[dict[str, str]], a: str, b: str) -> bool:
    """Every value of ``a`` under exactly one value of ``b``, over the hosts that have both."""
    parent: dict[str, str] = {}
    for attrs in hosts:
        va, vb = attrs.get(a), attrs.get(b)
        if va is None or vb is None:
            continue
        seen = parent.setdefault(va, vb)
        if seen != vb:
            return False
    return bool(parent)


def find_places(hosts: list[dict[str, str]]) -> Places:
    """The coarsest and finest location attributes of a fleet (latest attributes, one dict per host)."""
    values: dict[str, set[str]] = defaultdict(set)
    for attrs in hosts:
        for k, v in attrs.items():
            values[k].add(v)
    n = len(hosts)
    keys = sorted(k for k, vs in values.items() if 2 <= len(vs) < max(n, 3))
    nested: dict[str, list[str]] = {k: [] for k in keys}
    for a in keys:
        for b in keys:
            if a != b and len(values[a]) > len(values[b]) and nests_in(hosts, a, b):
                nested[b].append(a)
    ranked = sorted(keys, key=lambda k: (-len(nested[k]), len(values[k]), k))
    if not ranked or not nested[ranked[0]]:
        return Places(None, None, nested)
    coarse = ranked[0]
    fine = finest_under(hosts, coarse, nested, values)
    return Places(coarse, fine, nested)


def finest_under(hosts: list[dict[str, str]], coarse: str, nested: dict[str, list[str]],
                 values: dict[str, set[str]] | None = None) -> str | None:
    if values is None:
        values = defaultdict(set)
        for attrs in hosts:
            for k, v in attrs.items():
                values[k].add(v)
    n = len(hosts)
    fine = [a for a in nested.get(coarse, []) if len(values[a]) * 2 <= n]
    return max(fine, key=lambda a: (len(values[a]), a)) if fine else None


__all__ = ["Places", "find_places", "finest_under", "nests_in"]
