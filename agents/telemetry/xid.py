"""The Xid catalog (versioned data) and PCI address normalisation.

NVIDIA's Xid list changes between driver releases, so it is a TSV file in
``agents/rules/kernel-log/`` (converted from leptonai/gpud, Apache-2.0), not
code. The loader checks every row and reports ``file:line`` so that a bad
edit fails the agent at start-up, never in the loop. Severity is derived
from the catalog's *immediate resolution* through ``severity.tsv``, a second
small table, because the catalog itself has no severity column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from fleetepi.agents.exceptions import RuleFileError

#: Where the shipped rule files live; loaders take a directory parameter.
RULES_DIR = Path(__file__).resolve().parent.parent / "rules" / "kernel-log"

CATALOG_COLUMNS = ("code", "mnemonic", "description", "immediate_resolution", "investigatory_resolution")
SEVERITIES = ("info", "warning", "critical")

_PCI = re.compile(r"^(?:pci:)?([0-9a-f]{1,8}):([0-9a-f]{1,2}):([0-9a-f]{1,2})(?:\.[0-9a-f])?$")


@lru_cache(maxsize=1024)
def normalize_pci(address: str) -> str:
    """``domain:bus:device`` in one spelling for every source.

    Xid lines say ``0000:cb:00``, RmInitAdapter lines ``0000:98:00.0``, NVML
    ``00000000:CB:00.0``; events of one GPU must carry one device string, so
    the domain becomes 4 hex digits, the function is dropped and case is
    lowered. Anything that is not a PCI address is returned unchanged.
    """
    m = _PCI.match(address.strip().lower())
    if not m:
        return address
    domain, bus, dev = (int(g, 16) for g in m.groups())
    return f"{domain:04x}:{bus:02x}:{dev:02x}"


@dataclass(frozen=True)
class XidInfo:
    code: int
    mnemonic: str
    description: str
    immediate: str
    investigatory: str
    severity: str

    @property
    def action(self) -> str:
        """Recommended action: the immediate resolution, then what to investigate."""
        if self.investigatory and self.investigatory != self.immediate:
            return f"{self.immediate}; investigate: {self.investigatory}"
        return self.immediate


@dataclass(frozen=True)
class XidCatalog:
    entries: dict[int, XidInfo]
    source: str

    def get(self, code: int) -> XidInfo | None:
        return self.entries.get(code)

    def __len__(self) -> int:
        return len(self.entries)


def _rows(path: Path) -> list[tuple[int, list[str]]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RuleFileError(str(path), 0, f"cannot read: {exc.strerror or exc}") from None
    rows = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        rows.append((lineno, line.split("\t")))
    return rows


def load_severity_map(path: Path) -> dict[str, str]:
    """``resolution -> severity`` from ``severity.tsv``."""
    rows = _rows(path)
    out: dict[str, str] = {}
    for lineno, cols in rows[1:] if rows and rows[0][1][0] == "resolution" else rows:
        if len(cols) != 2:
            raise RuleFileError(str(path), lineno, f"expected 2 tab-separated columns, got {len(cols)}")
        resolution, severity = (c.strip() for c in cols)
        if severity not in SEVERITIES:
            raise RuleFileError(str(path), lineno, f"severity {severity!r} is not one of {', '.join(SEVERITIES)}")
        out[resolution] = severity
    return out


def load_catalog(rules_dir: Path | str = RULES_DIR) -> XidCatalog:
    """Load and validate ``xid-catalog.tsv`` (+ ``severity.tsv``) from ``rules_dir``.

    :raises RuleFileError: on the first bad row, naming file and line.
    """
    rules_dir = Path(rules_dir)
    severity = load_severity_map(rules_dir / "severity.tsv")
    path = rules_dir / "xid-catalog.tsv"
    rows = _rows(path)
    if not rows or tuple(c.strip() for c in rows[0][1]) != CATALOG_COLUMNS:
        raise RuleFileError(str(path), rows[0][0] if rows else 0, f"header must be {' '.join(CATALOG_COLUMNS)}")
    entries: dict[int, XidInfo] = {}
    for lineno, cols in rows[1:]:
        if len(cols) != len(CATALOG_COLUMNS):
            raise RuleFileError(str(path), lineno, f"expected {len(CATALOG_COLUMNS)} tab-separated columns, got {len(cols)}")
        code_s, mnemonic, description, immediate, investigatory = (c.strip() for c in cols)
        if not code_s.isdigit():
            raise RuleFileError(str(path), lineno, f"code {code_s!r} is not a non-negative integer")
        code = int(code_s)
        if code in entries:
            raise RuleFileError(str(path), lineno, f"duplicate code {code}")
        if not mnemonic:
            raise RuleFileError(str(path), lineno, "empty mnemonic")
        if immediate and immediate not in severity:
            raise RuleFileError(str(path), lineno, f"immediate resolution {immediate!r} has no row in severity.tsv")
        entries[code] = XidInfo(code, mnemonic, description, immediate, investigatory,
                                severity.get(immediate, "warning") if immediate else "warning")
    return XidCatalog(entries=entries, source=str(path))


__all__ = ["RULES_DIR", "XidCatalog", "XidInfo", "load_catalog", "load_severity_map", "normalize_pci"]
