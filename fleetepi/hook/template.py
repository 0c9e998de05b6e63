"""Argv templating without a shell and without ``str.format``.

``str.format`` would let a config reach attributes (``{host.__class__}``);
this substitutes only whole ``{name}`` fields from a fixed set, and each
template is one argv element, so a substituted value can never become a
second argument or a second command. The host is checked against the
host-name pattern before it gets here; the other values come from alert
labels and annotations, which anyone who can reach Alertmanager can set, so
they are reduced to a harmless alphabet, capped, and never start with ``-``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

#: Placeholders an argv element or a Slurm reason may use.
TEMPLATE_FIELDS = ("host", "alertname", "kind", "severity", "fingerprint", "status", "summary")

_FIELD = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_BRACED = re.compile(r"\{([^{}]*)\}")
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.:,=/+@%()\[\]-]+")
MAX_VALUE_CHARS = 200


def template_fields(template: str) -> set[str]:
    """Everything written in braces in one template (``{host.__class__}`` included, to be refused)."""
    return set(_BRACED.findall(template))


def sanitize(text: str, limit: int = MAX_VALUE_CHARS) -> str:
    """Alert text made safe to pass as (part of) one argument to any tool."""
    clean = _UNSAFE.sub("_", text.replace("\n", " ")).strip()
    return clean.lstrip("-")[:limit]


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``{field}`` by ``values[field]``; unknown fields were refused at config load."""
    return _FIELD.sub(lambda m: values.get(m.group(1), ""), template)


__all__ = ["MAX_VALUE_CHARS", "TEMPLATE_FIELDS", "render", "sanitize", "template_fields"]
