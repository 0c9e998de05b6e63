"""The ground truth: labelled outbreaks and benign phenomena, named with the alert contract's fields.

An alert's identity is its *entity*: ``(kind, signature, host, attribute,
value, telemetry_kind, code)``, the fields of ``fleetepi.contract.Alert``
that say what it is about. The truth names every outbreak and every benign
phenomenon with these, so the scorer (``scoring.py``) can match alerts to
them without knowing how they were injected.

* :class:`Outbreak`: something to page on. ``accept`` lists the entities whose
  alert finds it; ``related`` the true consequences that are neither a
  finding nor a false page.
* :class:`Benign`: something that must not page (a crash loop, a chronic
  host, a static association, a job-wide abort, a roll-out, planned
  maintenance). ``expected`` lists the entities of the one ticket that is
  the right answer, if any.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: (kind, signature, host, attribute, value, telemetry_kind, code): the fields of an alert's identity.
EntityKey = tuple[str, str | None, str | None, str | None, str | None, str | None, int | None]


def entity(kind: str, signature: str | None = None, host: str | None = None, attribute: str | None = None,
           value: str | None = None, telemetry_kind: str | None = None, code: int | None = None) -> EntityKey:
    return (kind, signature, host, attribute, value, telemetry_kind, code)


@dataclass(frozen=True)
class Outbreak:
    """One labelled outbreak (ground truth). Entity fields are the alert contract's."""

    id: str
    kind: str
    template: str
    start_ms: int
    end_ms: int
    description: str
    signature: str | None = None
    host: str | None = None
    attribute: str | None = None
    value: str | None = None
    telemetry_kind: str | None = None
    code: int | None = None
    #: Hosts with injected cases.
    hosts: tuple[str, ...] = ()
    #: Injected events (crashes + telemetry).
    n_events: int = 0
    #: The template's rate knob as drawn (see OutbreakSpec.strength).
    strength: float = 0.0
    #: ``origin`` of its injected rows in the simulation's tables (the spec's index).
    origin: int = -1
    accept: tuple[EntityKey, ...] = ()
    related: tuple[EntityKey, ...] = field(default=(), repr=False)

    @property
    def key(self) -> EntityKey:
        return entity(self.kind, self.signature, self.host, self.attribute, self.value, self.telemetry_kind,
                      self.code)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("id", "kind", "template", "start_ms", "end_ms", "description",
                                             "signature", "host", "attribute", "value", "telemetry_kind", "code",
                                             "n_events", "strength", "origin")}
        d = {k: v for k, v in d.items() if v is not None}
        d["hosts"] = list(self.hosts)
        d["accept"] = [key_to_json(k) for k in self.accept]
        d["related"] = [key_to_json(k) for k in self.related]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Outbreak:
        kw = {k: v for k, v in d.items() if k not in ("hosts", "accept", "related", "start", "end")}
        return cls(**kw, hosts=tuple(d.get("hosts", ())), accept=tuple(key_from_json(k) for k in d.get("accept", ())),
                   related=tuple(key_from_json(k) for k in d.get("related", ())))


_KEY_FIELDS = ("kind", "signature", "host", "attribute", "value", "telemetry_kind", "code")


def key_to_json(k: EntityKey) -> dict[str, Any]:
    return {f: v for f, v in zip(_KEY_FIELDS, k) if v is not None}


def key_from_json(d: dict[str, Any]) -> EntityKey:
    return entity(**{f: d.get(f) for f in _KEY_FIELDS})  # type: ignore[arg-type]



@dataclass(frozen=True)
class Benign:
    """One labelled benign phenomenon: what it is, what it explains, which tickets are expected.

    :ivar expected: alert entities of which ONE ``severity: ticket`` alert is the right
        answer (the first is counted as expected; further ones as repeats).
    :ivar finding: the ``finding`` the expected ticket should carry.
    :ivar cohorts: attribute values of the phenomenon's host (chronic) or rack (maintenance):
        a telemetry alert on one of these cohorts is explained by it.
    """

    id: str
    type: str
    start_ms: int
    end_ms: int
    description: str
    signature: str | None = None
    host: str | None = None
    attribute: str | None = None
    value: str | None = None
    telemetry_kind: str | None = None
    code: int | None = None
    job: str | None = None
    hosts: tuple[str, ...] = ()
    n_events: int = 0
    strength: float = 0.0
    finding: str | None = None
    expected: tuple[EntityKey, ...] = ()
    cohorts: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def to_json(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("id", "type", "start_ms", "end_ms", "description", "signature", "host",
                                             "attribute", "value", "telemetry_kind", "code", "job", "n_events",
                                             "strength", "finding")}
        d = {k: v for k, v in d.items() if v is not None}
        d["hosts"] = list(self.hosts)
        d["expected"] = [key_to_json(k) for k in self.expected]
        d["cohorts"] = [list(c) for c in self.cohorts]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Benign:
        kw = {k: v for k, v in d.items() if k not in ("hosts", "expected", "cohorts", "start", "end")}
        return cls(**kw, hosts=tuple(d.get("hosts", ())), expected=tuple(key_from_json(k) for k in d.get("expected", ())),
                   cohorts=tuple((a, v) for a, v in d.get("cohorts", ())))


__all__ = ["EntityKey", "Benign", "Outbreak", "entity", "key_from_json", "key_to_json"]
