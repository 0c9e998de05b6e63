"""What machine a benchmark ran on, for the line every docs/bench page starts with."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def describe() -> str:
    """``CPU model, N cores, Python X.Y.Z``: figures from a shared 2-core VM and a quiet server differ."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}"
