"""What an alert concludes, how loud it is, and which incident it belongs to (contract v1.1).

``severity``: ``page`` for acute trouble someone acts on now (a sick host, a
signature spiking, a crash living on a rack), ``ticket`` for a standing
condition to fix in working hours (a chronic host, a static association, a
crash loop). ``finding``: the detector's conclusion within its kind.
``incident``: a stable id shared by alerts about one underlying problem, so
Alertmanager groups them into one notification: everything about one host
(its crashes, its Xids, its ECC), everything about one signature (its spike
and the cohort that explains it).
"""

from __future__ import annotations

import hashlib
from typing import Final

PAGE: Final = "page"
TICKET: Final = "ticket"

#: finding -> (severity, what it means). The runbooks (docs/runbooks/) follow these names.
FINDINGS: dict[str, tuple[str, str]] = {
    "signature_spike": (PAGE, "a known crash signature rose above its own baseline"),
    "new_signature": (PAGE, "a signature never seen before is arriving at a rate that is news"),
    "sick_host": (PAGE, "one host crashes or reports errors far above its peers and its own past"),
    "suspected_bad_silicon": (PAGE, "one host's crashes have the shapes of silent CPU/memory corruption"),
    "hardware_errors": (PAGE, "one host crashes together with hardware errors (failing GPU or memory)"),
    "error_storm": (PAGE, "one host reports one hardware error code far above its peers"),
    "crash_loop": (TICKET, "one pod restarting on one host: one signature repeating"),
    "chronic": (TICKET, "a host with a steady error or crash rate far above its peers for days"),
    "cohort_outbreak": (PAGE, "a crash or error concentrated on hosts with one attribute value, newly"),
    "association_rising": (PAGE, "a known association with one attribute value got stronger"),
    "static_association": (TICKET, "a signature or error that has always been more frequent on one cohort"),
    "fleet_rise": (PAGE, "a hardware error code rising across the fleet"),
    "rack_escalation": (PAGE, "half or more of a rack's hosts share a finding"),
}


def severity_of(finding: str) -> str:
    return FINDINGS.get(finding, (PAGE, ""))[0]


def short_hash(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


def incident_host(host: str) -> str:
    return f"host:{host}"


def incident_signature(signature: str) -> str:
    return f"signature:{short_hash(signature)}"


def incident_channel(channel: str) -> str:
    return f"telemetry:{channel}"


def short(text: str, n: int = 90) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def span(seconds: float) -> str:
    """A scale in words: ``1 h``, ``6 h``, ``1 d``, ``30 d``."""
    return f"{seconds / 86400:g} d" if seconds >= 86400 else f"{seconds / 3600:g} h"


__all__ = ["FINDINGS", "PAGE", "TICKET", "incident_channel", "incident_host", "incident_signature", "severity_of",
           "short", "short_hash", "span"]
