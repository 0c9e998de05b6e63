"""What every counting engine shares: stream start, warm-up, cooldown, key expiry, window sizes.

One small base class so that ``RateSpike``, ``PeerSpike`` and
``CohortCorrelation`` agree on when the stream starts (the first host
announcement, see ``Inventory.first_ms``), when they may fire, and how often
they sweep idle keys.
"""

from __future__ import annotations

from fleetepi.detectors.windows import HOUR_MS


def window_sizes(bucket_s: float, windows_s: tuple[float, ...]) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """Windows as whole buckets, shortest first, and their exact widths in seconds."""
    sizes = tuple(sorted({max(1, round(w / bucket_s)) for w in windows_s}))
    return sizes, tuple(n * bucket_s for n in sizes)


class Lifecycle:
    """Start, warm-up, cooldown and TTL of one detector instance's keys.

    :param warmup_s: nothing fires this long after the stream's start.
    :param cooldown_s: a resolved entity may not fire again this long.
    :param key_ttl_s: a key with no event this long is forgotten.
    :param max_keys: the most keys kept (the quietest go first beyond it).
    """

    def __init__(self, *, warmup_s: float, cooldown_s: float, key_ttl_s: float, max_keys: int) -> None:
        self.warmup_ms, self.cooldown_ms = int(warmup_s * 1000), int(cooldown_s * 1000)
        self.ttl_ms, self.max_keys = int(key_ttl_s * 1000), max_keys
        #: Forgetting idle keys scans them all: a few times per TTL only.
        self.sweep_ms = max(HOUR_MS, self.ttl_ms // 8)
        self.start_ms: int | None = None
        self.next_sweep_ms = 0

    def set_windows(self, bucket_s: float, windows_s: tuple[float, ...]) -> None:
        """Side-by-side sliding windows: ``sizes`` in buckets (shortest first), ``n`` the longest."""
        self.bucket_ms = int(bucket_s * 1000)
        self.sizes, self.windows_s = window_sizes(bucket_s, windows_s)
        self.n = self.sizes[-1]
        self.window_s = self.windows_s[0]

    def start(self, ts_ms: int) -> None:
        """Where the stream starts for this instance (warm-up and silent-history credit count from it)."""
        self.start_ms = ts_ms
        self.next_sweep_ms = ts_ms + self.sweep_ms

    def warm(self, ts_ms: int) -> bool:
        """May anything fire at ``ts_ms``?"""
        return self.start_ms is not None and ts_ms >= self.start_ms + self.warmup_ms

    def sweep_due(self, watermark_ms: int) -> bool:
        """Is it time to forget idle keys? (Then the next sweep is scheduled.)"""
        if watermark_ms < self.next_sweep_ms:
            return False
        self.next_sweep_ms = watermark_ms + self.sweep_ms
        return True

    def dump_lifecycle(self) -> dict[str, int | None]:
        return {"start_ms": self.start_ms, "next_sweep_ms": self.next_sweep_ms}

    def load_lifecycle(self, d: dict[str, int | None]) -> None:
        self.start_ms = None if d["start_ms"] is None else int(d["start_ms"])
        self.next_sweep_ms = int(d["next_sweep_ms"] or 0)


__all__ = ["Lifecycle", "window_sizes"]
