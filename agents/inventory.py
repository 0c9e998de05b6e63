"""Host inventory -> ``fleetepi.host/v1`` announcements.

Cohorts ("this crash lives only on hosts with BIOS 2.4 in rack r17") are
built from these attributes, so they are what a hardware correlation can
find: DMI (BIOS, board, product), CPU model and microcode (silent CPU
corruption is a per-stepping, per-microcode affair), kernel release, NVML
(GPU model and family, count, driver, VBIOS) and static labels from config (rack,
datacenter, cluster). Serial numbers are left out on purpose: they make
every host its own cohort.

Sent at the first poll and again whenever an attribute changes (a BIOS
upgrade, a driver update); the source re-reads every ``interval_s``.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Literal

import msgspec

from fleetepi.agents.exceptions import NvmlUnavailable
from fleetepi.agents.sources.registry import SourceContext, register
from fleetepi.agents.telemetry.hwmon import read_str
from fleetepi.contract import Host, ts_from_ms

log = logging.getLogger(__name__)

#: DMI file -> attribute name. Serials and UUIDs are deliberately absent.
DMI_FIELDS = {
    "bios_vendor": "bios_vendor",
    "bios_version": "bios",
    "bios_date": "bios_date",
    "sys_vendor": "vendor",
    "product_name": "product",
    "product_version": "product_version",
    "board_vendor": "board_vendor",
    "board_name": "board",
    "board_version": "board_version",
}
MAX_VALUE = 256
_JUNK = {"", "to be filled by o.e.m.", "default string", "not specified", "none", "0123456789", "system product name"}


def clean(value: str | None) -> str | None:
    """Trimmed value, None for the placeholders vendors leave in DMI."""
    if value is None:
        return None
    v = " ".join(value.split())[:MAX_VALUE]
    return None if v.lower() in _JUNK else v


def dmi_attributes(root: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for fname, attr in DMI_FIELDS.items():
        v = clean(read_str(root / fname))
        if v:
            out[attr] = v
    return out


def cpu_attributes(cpuinfo: Path) -> dict[str, str]:
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for key, attr in (("model name", "cpu_model"), ("microcode", "microcode")):
        m = re.search(rf"^{key}\s*:\s*(.+)$", text, re.MULTILINE)
        if m and clean(m.group(1)):
            out[attr] = clean(m.group(1))  # type: ignore[assignment]
    sockets = set(re.findall(r"^physical id\s*:\s*(\d+)", text, re.MULTILINE))
    if sockets:
        out["cpu_sockets"] = str(len(sockets))
    return out


#: Vendor word NVML puts before the model: current drivers name an A100
#: "NVIDIA A100-SXM4-80GB" where older ones said "A100-SXM4-80GB", so with the
#: prefix kept, a driver upgrade would change every host's gpu_model and make
#: gpu_model look confounded with driver.
_GPU_VENDOR = re.compile(r"^(?:NVIDIA\s+)+", re.IGNORECASE)
#: The chip in a model name: H100, A100, GH200, B200, L40S, V100, A6000.
_GPU_FAMILY = re.compile(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)(?![\w.])")


def gpu_model(name: str) -> str:
    """NVML's device name without the vendor prefix: "NVIDIA H100 80GB HBM3" -> "H100 80GB HBM3"."""
    return _GPU_VENDOR.sub("", " ".join(name.split())) or name


def gpu_family(model: str) -> str | None:
    """The chip of a model, the coarse cohort: "H100 80GB HBM3" -> "H100", "A100-SXM4-80GB" -> "A100"."""
    m = _GPU_FAMILY.search(model.replace("-", " "))
    return m.group(1) if m else None


def gpu_attributes(nvml: Any) -> dict[str, str]:
    """GPU model/family/count/driver/VBIOS; mixed models or VBIOSes are joined with ``,``."""
    from fleetepi.agents.telemetry.nvml import text

    out: dict[str, str] = {}
    try:
        n = nvml.nvmlDeviceGetCount()
        out["gpu_count"] = str(n)
        out["driver"] = text(nvml.nvmlSystemGetDriverVersion())
        models, vbios = set(), set()
        for i in range(n):
            h = nvml.nvmlDeviceGetHandleByIndex(i)
            try:
                models.add(gpu_model(text(nvml.nvmlDeviceGetName(h))))
                vbios.add(text(nvml.nvmlDeviceGetVbiosVersion(h)))
            except nvml.NVMLError as exc:  # one lost GPU must not hide the others
                log.debug("inventory: GPU %d: %s", i, exc)
        if models:
            out["gpu_model"] = ",".join(sorted(models))[:MAX_VALUE]
            families = {f for f in map(gpu_family, models) if f}
            if families:
                out["gpu_family"] = ",".join(sorted(families))[:MAX_VALUE]
        if vbios:
            out["vbios"] = ",".join(sorted(vbios))[:MAX_VALUE]
    except nvml.NVMLError as exc:
        log.debug("inventory: NVML: %s", exc)
    return out


class InventoryOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    #: static attributes of this source; default: the agent's ``labels``
    labels: dict[str, str] | None = None
    dmi_root: str = "/sys/class/dmi/id"
    cpuinfo: str = "/proc/cpuinfo"
    #: "auto": GPU attributes through NVML when a GPU is there; null: none
    nvml: Literal["auto"] | None = "auto"
    kernel: str | None = None


@register("inventory", InventoryOptions)
class InventorySource:
    """Host announcements at start and on change.

    :param labels: static attributes from config (rack, datacenter, cluster).
    :param dmi_root: ``/sys/class/dmi/id`` (a fixture tree in tests).
    :param cpuinfo: ``/proc/cpuinfo``.
    :param nvml: NVML module, ``"auto"`` (use pynvml if a GPU is there), or None (no GPU attributes).
    :param kernel: kernel release override (default ``os.uname().release``).
    """

    kind: ClassVar[str] = "inventory"

    def __init__(self, host: str, labels: Mapping[str, str] | None = None, dmi_root: str = "/sys/class/dmi/id",
                 cpuinfo: str = "/proc/cpuinfo", nvml: Any = "auto", kernel: str | None = None) -> None:
        self.host = host
        self.labels = {str(k): str(v)[:MAX_VALUE] for k, v in (labels or {}).items()}
        self.dmi_root = Path(dmi_root)
        self.cpuinfo = Path(cpuinfo)
        self.kernel = kernel or os.uname().release
        self.nvml = self._nvml(nvml)
        self.last: dict[str, str] | None = None

    @classmethod
    def from_options(cls, options: InventoryOptions, ctx: SourceContext) -> InventorySource:
        labels = options.labels if options.labels is not None else ctx.labels
        nvml = ctx.nvml if options.nvml == "auto" and ctx.nvml is not None else options.nvml
        return cls(ctx.host, labels, options.dmi_root, options.cpuinfo, nvml, options.kernel)

    @staticmethod
    def _nvml(nvml: Any) -> Any:
        if nvml != "auto":
            return nvml
        from fleetepi.agents.telemetry.nvml import start

        try:
            return start(None)
        except NvmlUnavailable as exc:
            log.info("inventory: no GPU attributes (%s)", exc)
            return None

    def attributes(self) -> dict[str, str]:
        attrs = {"kernel": self.kernel, **dmi_attributes(self.dmi_root), **cpu_attributes(self.cpuinfo)}
        if self.nvml is not None:
            attrs.update(gpu_attributes(self.nvml))
        attrs.update(self.labels)  # config wins: an operator's label overrides what DMI says
        return dict(sorted(attrs.items())[:64])

    def poll(self, now_ms: int) -> Iterable[Host]:
        attrs = self.attributes()
        if attrs == self.last:
            return []
        if self.last is not None:
            changed = sorted(k for k in set(attrs) | set(self.last) if attrs.get(k) != self.last.get(k))
            log.info("inventory changed: %s", ", ".join(changed))
        self.last = attrs
        return [Host(ts=ts_from_ms(now_ms), host=self.host, attributes=attrs)]

    def close(self) -> None:
        pass


__all__ = ["DMI_FIELDS", "InventorySource", "clean", "cpu_attributes", "dmi_attributes", "gpu_attributes", "gpu_family", "gpu_model"]
