"""Resource limits of core analysis, and the cooperative deadline that enforces time.

A node agent must never be taken down by one odd core: the size limit bounds
what a pipe or a decompressor writes to disk, and the deadline bounds the CPU
spent walking stacks and loading symbol tables. Work past the deadline is
skipped, and the event says so (``partial`` and a note), rather than an
alarm signal interrupting library code at a random point.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

GiB = 1 << 30


@dataclass(frozen=True, slots=True)
class CoreLimits:
    """Bounds for one core.

    :param max_core_bytes: largest core accepted from a pipe or a decompressor;
        more is cut off there (the notes and stacks sit early in the file, so a
        cut core still gives a signature) and the event is marked partial.
    :param parse_timeout_s: wall-clock budget for one core, py-spy included.
    :param pyspy_timeout_s: budget of the ``py-spy dump --core`` subprocess.
    :param stack_scan_bytes: how far above the stack pointer the scanner looks.
    :param max_frames: frames kept per event (the contract allows 256).
    """

    max_core_bytes: int = 32 * GiB
    parse_timeout_s: float = 10.0
    pyspy_timeout_s: float = 5.0
    stack_scan_bytes: int = 256 * 1024
    max_frames: int = 64

    def __post_init__(self) -> None:
        if self.max_core_bytes <= 0 or self.parse_timeout_s <= 0 or self.pyspy_timeout_s <= 0:
            raise ValueError("core limits must be positive")
        if not 1 <= self.max_frames <= 256:
            raise ValueError("max_frames must be within 1..256 (the contract's bound)")


class Deadline:
    """A point in monotonic time; ``expired`` is polled by the loops that can run long."""

    __slots__ = ("_end",)

    def __init__(self, seconds: float) -> None:
        self._end = time.monotonic() + seconds

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._end

    @property
    def remaining_s(self) -> float:
        return max(0.0, self._end - time.monotonic())


__all__ = ["CoreLimits", "Deadline", "GiB"]
