"""Planned work, from outside the inventory: a maintenance file and Alertmanager's silences.

A host announced with a non-empty ``maintenance`` attribute is out of the
fleet until re-announced without it (``detectors.inventory``). Two more
sources say the same thing where the announcement cannot be changed: a
file written by whoever plans the work, and the silences operators already
set in Alertmanager before they reboot a rack. Both become
:class:`~fleetepi.detectors.maintenance.Window` s for
``Engine.set_maintenance`` (events in a window count neither as cases nor in
baselines) and for the quarantine hook (never acts on a host in one).

The file, YAML (validated by :func:`fleetepi.config.load`, so a typo is one
line naming the file and the field)::

    windows:
      - hosts: [gpu-017, gpu-018]
        start: 2026-11-03T02:00:00Z
        end: 2026-11-03T06:00:00Z
        reason: BIOS 2.5 roll-out
      - cohort: rack=r07              # every host with rack == r07
        start: 2026-11-04T08:00:00Z
        end: 2026-11-04T10:00:00Z
        reason: PDU swap

or CSV with a header ``target,start,end,reason`` (a target with ``=`` is a
cohort, otherwise one host; one row per host).

Silences (``GET /api/v2/silences``): an active or pending silence whose
matchers are all equalities naming *a place, not an alert* is a window from
its ``startsAt`` to its ``endsAt``: ``host`` (or a regex that is a plain
alternation ``a|b|c`` of host names), ``escalation="rack=r07"``,
``attribute`` + ``value``, or one label that is no alert label at all
(``rack="r07"``: an inventory attribute). A silence that also names an alert
label (``alertname``, ``kind``, ``signature``, ...) mutes one alert, which is
not planned work: it is skipped, with the reason logged.

Determinism: a replay reads a file, whose windows are fixed, so it decides
the same every time. Silences live in Alertmanager and change while a worker
runs: a live worker's decisions then depend on *when* it read them (every
``refresh_s``), and a worker rebuilding its state from the log folds the
old events under the windows it knows now.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import msgspec
from msgspec import Meta, Struct

from fleetepi.config import ConfigFileError, convert, load, read_bounded_text
from fleetepi.contract import Alert
from fleetepi.detectors.inventory import pair_key
from fleetepi.detectors.maintenance import Maintenance, Window
from fleetepi.exceptions import ConfigError, FleetepiError

log = logging.getLogger(__name__)

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MS = timedelta(milliseconds=1)
Timestamp = Annotated[datetime, Meta(tz=True)]
HostName = Annotated[str, Meta(min_length=1, max_length=253)]

#: Labels an alert carries (rules.yml, metrics): a silence naming one of them mutes alerts, not a place.
ALERT_ONLY_LABELS = frozenset({
    "alertname", "kind", "signature", "telemetry_kind", "code", "severity", "finding", "incident", "team",
    "entity", "job", "instance", "__name__",
})
#: A regex matcher on ``host`` read as a list of hosts: names joined by ``|``, nothing else.
_ALTERNATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*(\|[A-Za-z0-9][A-Za-z0-9_.-]*)*$")


class MaintenanceSourceError(FleetepiError):
    """Alertmanager's silences could not be read (the previous windows stay in force)."""


# ---------------------------------------------------------------------------- the file
class WindowSpec(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    """One window of the file: ``hosts`` or ``cohort`` (``attribute=value``), from ``start`` to ``end``."""

    start: Timestamp
    end: Timestamp
    hosts: tuple[HostName, ...] = ()
    cohort: str | None = None
    reason: str = ""


class MaintenanceFile(Struct, kw_only=True, forbid_unknown_fields=True, frozen=True):
    windows: tuple[WindowSpec, ...] = ()


def _check(spec: MaintenanceFile) -> MaintenanceFile:
    for i, w in enumerate(spec.windows):
        _check_window(w, f"windows[{i}]")
    return spec


def _check_window(w: WindowSpec, where: str) -> None:
    if bool(w.hosts) == (w.cohort is not None):
        raise ConfigError(f"{where}: give hosts or cohort (attribute=value), exactly one of them")
    if w.cohort is not None:
        attr, sep, value = w.cohort.partition("=")
        if not sep or not attr.strip() or not value.strip():
            raise ConfigError(f"{where}.cohort: {w.cohort!r} is not attribute=value")
    if w.end <= w.start:
        raise ConfigError(f"{where}.end: {w.end.isoformat()} is not after start {w.start.isoformat()}")


def _ms(dt: datetime) -> int:
    return (dt - _EPOCH) // _MS


def to_window(w: WindowSpec) -> Window:
    if w.cohort is not None:
        attr, _, value = w.cohort.partition("=")
        return Window(_ms(w.start), _ms(w.end), attribute=attr.strip(), value=value.strip(), reason=w.reason)
    return Window(_ms(w.start), _ms(w.end), hosts=tuple(w.hosts), reason=w.reason)


def load_windows(path: str | Path) -> list[Window]:
    """The windows of a maintenance file (YAML/JSON, or CSV by its ``.csv`` suffix).

    :raises ConfigFileError: one line naming the file and the field (or CSV line).
    """
    if str(path).lower().endswith(".csv"):
        return [to_window(w) for w in _read_csv(path)]
    spec = load(path, MaintenanceFile, check=_check)
    return [to_window(w) for w in spec.windows]


_CSV_COLUMNS = ("target", "start", "end", "reason")


def _read_csv(path: str | Path) -> list[WindowSpec]:
    text = read_bounded_text(path, "a maintenance file")  # the config reader's limits: size and encoding
    reader = csv.DictReader(io.StringIO(text))
    header = tuple(reader.fieldnames or ())
    if header[:3] != _CSV_COLUMNS[:3] or not set(header) <= set(_CSV_COLUMNS):
        raise ConfigFileError(path, "line 1", f"header must be {','.join(_CSV_COLUMNS)} (reason optional), "
                                              f"got {','.join(header) or 'nothing'}")
    out: list[WindowSpec] = []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise ConfigFileError(path, f"line {line}", "more fields than the header names")
        target = (row.get("target") or "").strip()
        if not target:
            raise ConfigFileError(path, f"line {line}", "target: empty (a host name or attribute=value)")
        data: dict[str, Any] = {"start": (row.get("start") or "").strip(), "end": (row.get("end") or "").strip(),
                                "reason": (row.get("reason") or "").strip()}
        data["cohort" if "=" in target else "hosts"] = target if "=" in target else [target]
        try:
            w = convert(data, WindowSpec, path)
            _check_window(w, "window")
        except ConfigFileError as exc:
            raise ConfigFileError(path, f"line {line}", f"{exc.field}: {exc.problem}" if exc.field else exc.problem) from None
        except ConfigError as exc:
            raise ConfigFileError(path, f"line {line}", str(exc).removeprefix("window").lstrip(".: ")) from None
        out.append(w)
    return out


# ---------------------------------------------------------------------------- Alertmanager silences
class Matcher(Struct, kw_only=True, rename="camel"):
    name: str
    value: str
    is_regex: bool = False
    is_equal: bool = True


class SilenceStatus(Struct, kw_only=True):
    state: str


class Silence(Struct, kw_only=True, rename="camel"):
    id: str
    matchers: list[Matcher]
    starts_at: Timestamp
    ends_at: Timestamp
    status: SilenceStatus
    created_by: str = ""
    comment: str = ""


_silences = msgspec.json.Decoder(list[Silence])


def silence_window(s: Silence) -> tuple[Window | None, str]:
    """The window a silence stands for, or None and why it is not one."""
    if s.status.state not in ("active", "pending"):
        return None, f"{s.status.state}"
    hosts: tuple[str, ...] = ()
    cohorts: list[tuple[str, str]] = []
    labels: dict[str, str] = {}
    for m in s.matchers:
        if not m.is_equal:
            return None, f"negative matcher on {m.name}"
        if m.name in ALERT_ONLY_LABELS:
            return None, f"names the alert label {m.name}: it mutes alerts, it is no planned work"
        if m.name == "host":
            if m.is_regex and not _ALTERNATION.match(m.value):
                return None, f"host regex {m.value!r} is not a plain alternation of host names"
            hosts = tuple(m.value.split("|")) if m.is_regex else (m.value,)
            continue
        if m.is_regex:
            return None, f"regex matcher on {m.name}"
        labels[m.name] = m.value
    if "attribute" in labels or "value" in labels:
        if not labels.get("attribute") or not labels.get("value"):
            return None, "attribute without value (or value without attribute)"
        cohorts.append((labels.pop("attribute"), labels.pop("value")))
    if "escalation" in labels:
        attr, sep, value = labels.pop("escalation").partition("=")
        if not sep or not attr or not value:
            return None, "escalation is not attribute=value"
        cohorts.append((attr, value))
    cohorts.extend(labels.items())  # any other label: an inventory attribute (rack="r07")
    if hosts and cohorts:
        return None, "names hosts and a cohort: a window is one or the other"
    if len(cohorts) > 1:
        return None, f"names {len(cohorts)} cohorts ({', '.join(f'{a}={v}' for a, v in cohorts)}): one at most"
    reason = f"silence {s.id}" + (f" by {s.created_by}" if s.created_by else "") + (f": {s.comment}" if s.comment else "")
    start, end = _ms(s.starts_at), _ms(s.ends_at)
    if end <= start:
        return None, "ends before it starts"
    if hosts:
        return Window(start, end, hosts=hosts, reason=reason), ""
    if cohorts:
        attr, value = cohorts[0]
        return Window(start, end, attribute=attr, value=value, reason=reason), ""
    return None, "names neither a host nor a place"


def silences_to_windows(body: bytes) -> tuple[list[Window], dict[str, str]]:
    """Windows of a ``GET /api/v2/silences`` answer, and the skipped silences (id -> why).

    :raises MaintenanceSourceError: the body is not a list of silences.
    """
    try:
        silences = _silences.decode(body)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        raise MaintenanceSourceError(f"not an Alertmanager v2 silence list: {exc}") from None
    windows: list[Window] = []
    skipped: dict[str, str] = {}
    for s in silences:
        w, why = silence_window(s)
        if w is None:
            if s.status.state != "expired":
                skipped[s.id] = why
        else:
            windows.append(w)
    return windows, skipped


def fetch_silences(url: str, timeout_s: float = 5.0, get: Callable[[str, float], bytes] | None = None) -> list[Window]:
    """The maintenance windows among the silences of the Alertmanager at ``url`` (its base URL).

    :raises MaintenanceSourceError: unreachable, an HTTP error, or not a silence list.
    """
    import httpx

    endpoint = url.rstrip("/") + "/api/v2/silences"
    try:
        body = get(endpoint, timeout_s) if get is not None else _http_get(endpoint, timeout_s)
    except (httpx.HTTPError, httpx.InvalidURL, OSError) as exc:
        raise MaintenanceSourceError(f"cannot read silences from {endpoint}: {exc}") from None
    windows, skipped = silences_to_windows(body)
    for sid, why in sorted(skipped.items()):
        log.info("silence %s is not a maintenance window: %s", sid, why)
    return windows


def _http_get(url: str, timeout_s: float) -> bytes:
    import httpx

    resp = httpx.get(url, timeout=timeout_s)
    resp.raise_for_status()
    return resp.content


# ---------------------------------------------------------------------------- both, kept current
class MaintenanceSources:
    """The windows of a file and of Alertmanager's silences, re-read on :meth:`refresh`.

    A file that breaks while running (a bad edit) and an Alertmanager that
    is away keep their last good windows, logged: a worker never stops for
    them. At start-up (:meth:`load`) a bad file is an error.

    :param path: maintenance file (YAML or CSV), or None.
    :param alertmanager_url: base URL of an Alertmanager, or None.
    """

    def __init__(self, path: str | Path | None = None, alertmanager_url: str | None = None,
                 fetch: Callable[[str], list[Window]] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.alertmanager_url = alertmanager_url
        if alertmanager_url is not None and fetch is None:
            try:
                import httpx  # noqa: F401 - only checks that it is there, at start-up
            except ImportError:
                raise ConfigError("reading Alertmanager's silences needs httpx: pip install 'fleetepi[ops]'") from None
        self._fetch = fetch or fetch_silences
        self.file_windows: list[Window] = []
        self.silence_windows: list[Window] = []
        self._mtime: float | None = None
        #: reads of the silences that failed (the previous ones stayed in force)
        self.silence_errors = 0

    @property
    def enabled(self) -> bool:
        return self.path is not None or self.alertmanager_url is not None

    def load(self) -> list[Window]:
        """First read: a bad file raises ``ConfigFileError`` (start-up); silences that fail are logged."""
        if self.path is not None:
            self.file_windows = load_windows(self.path)
            self._mtime = self._stat()
        self._read_silences()
        return self.windows()

    def refresh(self) -> list[Window]:
        """Re-read a changed file and the silences; what cannot be read keeps its last windows."""
        if self.path is not None:
            mtime = self._stat()
            if mtime != self._mtime:
                try:
                    self.file_windows = load_windows(self.path)
                    self._mtime = mtime
                except ConfigError as exc:
                    log.error("maintenance file: %s (keeping the previous %d windows)", exc, len(self.file_windows))
        self._read_silences()
        return self.windows()

    def _stat(self) -> float | None:
        try:
            return self.path.stat().st_mtime if self.path is not None else None
        except OSError:
            return None

    def _read_silences(self) -> None:
        if self.alertmanager_url is None:
            return
        try:
            self.silence_windows = self._fetch(self.alertmanager_url)
        except MaintenanceSourceError as exc:
            self.silence_errors += 1
            log.warning("%s (keeping the previous %d windows)", exc, len(self.silence_windows))

    def windows(self) -> list[Window]:
        return [*self.file_windows, *self.silence_windows]


def window_for_labels(maintenance: Maintenance, labels: dict[str, str], ts_ms: int,
                      host_label: str = "host") -> Window | None:
    """The window that holds the host or place an alert with ``labels`` is about at ``ts_ms``, if any.

    What an alert tells about its host's place: its ``escalation`` label
    (``rack=r07``), its ``attribute``/``value`` and any label named like an
    inventory attribute. A cohort window on an attribute the alert does not
    carry (``gpu_model``) cannot be matched from the labels alone.
    """
    if not maintenance.windows:
        return None
    keys: set[str] = set()
    attr, sep, value = labels.get("escalation", "").partition("=")
    if sep and attr and value:
        keys.add(pair_key(attr, value))
    if labels.get("attribute") and labels.get("value"):
        keys.add(pair_key(labels["attribute"], labels["value"]))
    keys.update(pair_key(k, v) for k, v in labels.items() if k not in ALERT_ONLY_LABELS and v)
    host = labels.get(host_label, "")
    for w in maintenance.by_host.get(host, ()):
        if w.start_ms <= ts_ms < w.end_ms:
            return w
    for k in sorted(keys):
        for w in maintenance.by_pair.get(k, ()):
            if w.start_ms <= ts_ms < w.end_ms:
                return w
    return None


# ---------------------------------------------------------------------------- alerts held back
class AlertGate:
    """Holds back the alerts about a host or place in maintenance, and counts them.

    Events in maintenance never reach a detector, yet an alert can still be
    decided about a host in maintenance: on evidence folded before its
    window opened (a host taken out *because* it misbehaved pages at the
    next step boundary, when it already is in maintenance). Such an alert
    would page for planned work, so it is suppressed: not sent, counted
    (``fleetepi_alerts_suppressed_total``, the summary's line). Its later
    resolution is dropped with it. A host alert is judged by its host's
    announcement and the windows at the fold horizon of the step that
    decided it (``ts - settle_s``: what every runner has folded by then); a
    place alert (``rack=r07`` as ``attribute``/``value``) by a cohort window
    on that very place.
    """

    def __init__(self) -> None:
        self.suppressed: set[str] = set()

    def admit(self, alert: Alert, engine: Any) -> bool:
        """True to send ``alert`` on; False if it is about planned work (or resolves such an alert)."""
        key = alert.key
        if alert.state == "resolved":
            if key in self.suppressed:
                self.suppressed.discard(key)
                return False
            return True
        if not self._in_maintenance(alert, engine):
            self.suppressed.discard(key)  # fires again outside maintenance: a new episode
            return True
        self.suppressed.add(key)
        return False

    @staticmethod
    def _in_maintenance(alert: Alert, engine: Any) -> bool:
        ts_ms = alert.ts_ms - int(engine.config.settle_s * 1000) - 1
        maintenance: Maintenance = engine.maintenance
        if alert.host is not None:
            keys = engine.inventory.keys_at(alert.host, ts_ms)
            return keys is None or (bool(maintenance.windows) and maintenance.covers(alert.host, keys, ts_ms))
        if alert.attribute is not None and alert.value is not None and maintenance.by_pair:
            return maintenance.covers("", (pair_key(alert.attribute, alert.value),), ts_ms)
        return False


def windows_summary(windows: Iterable[Window]) -> str:
    """``3 windows (2 of hosts, 1 of a cohort)`` for a start-up line."""
    ws = list(windows)
    cohorts = sum(1 for w in ws if w.attribute is not None)
    return f"{len(ws)} maintenance window(s) ({len(ws) - cohorts} of hosts, {cohorts} of a cohort)"


__all__ = [
    "ALERT_ONLY_LABELS",
    "AlertGate",
    "MaintenanceFile",
    "MaintenanceSourceError",
    "MaintenanceSources",
    "Silence",
    "WindowSpec",
    "fetch_silences",
    "load_windows",
    "silence_window",
    "silences_to_windows",
    "to_window",
    "window_for_labels",
    "windows_summary",
]
