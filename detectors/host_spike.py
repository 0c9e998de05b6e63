"""host_spike: one host crashes far above its peers and its own past — and what kind of trouble it is.

Keyed by host, on ``detectors.peers``. A host's crash units: a crash counts
once per (host, signature) an hour, so a crash-looping pod is one unit an
hour, and a crash with an *odd shape* (a bit-flip score, a non-canonical
fault address, a misaligned stack pointer) counts ``host_odd_weight`` units:
silent CPU or memory corruption, the founding case, shows exactly that —
many signatures, odd shapes, one host. The host's hardware errors
(hardware Xids, uncorrectable ECC, NVLink, PCIe; not the application Xids
that job bursts leave) count ``host_hw_weight`` each: failing memory shows as
SIGBUS crashes *and* Xid 48/94 on the same host, neither alone enough
among a crashy fleet's crashes; its hardware errors are therefore also a
channel of their own, against the fleet's rate of hardware errors.

When the count test fires, the evidence of the last day says what it is:

* ``crash_loop`` (ticket): one signature (at most two) makes most of the
  host's crashes, no odd shapes outside it, no hardware errors — a pod
  restarting with back-off (on a garbage pointer, maybe), which its owners
  fix, not the host's;
* ``suspected_bad_silicon`` (page): odd-shaped crashes in two signatures or more;
* ``hardware_errors`` (page): crashes together with hardware errors;
* ``sick_host`` (page): otherwise, many signatures far above its peers.

Beside the count test, a host whose crashes with a known CPU (kernel fault
lines, ``Crash.cpu``) concentrate on one core — ``silicon_min_share`` of at
least ``silicon_min_crashes`` crashes over at least ``silicon_min_signatures``
signatures, over days to weeks — is ``suspected_bad_silicon`` with that
evidence, however low its rate. A chronic host (its rate far above its
peers' for days) is a ``chronic`` ticket once.
"""

from __future__ import annotations

from operator import itemgetter
from typing import Any, ClassVar

import msgspec
from msgspec import Struct, field

from fleetepi.contract import Alert, Crash, Telemetry, ts_from_ms
from fleetepi.contract.shapes import MEMORY_POISONED, silicon_evidence
from fleetepi.detectors.base import Context
from fleetepi.detectors.cases import Case
from fleetepi.detectors.config import DetectorConfig
from fleetepi.detectors.decay import DecayClock
from fleetepi.detectors.findings import FINDINGS, incident_host, incident_signature, span
from fleetepi.detectors.peers import DAY_MS, HostPeers, PeerVerdict, host_peers_from_config
from fleetepi.detectors.stats import score_of

#: The peers channel of odd-shaped crashes alone (beside "crash", every crash unit).
ODD_CHANNEL = "odd_shape"
#: The peers channel of hardware errors alone (Xid codes that are not the application's, uncorrectable
#: ECC, NVLink, PCIe), beside "crash", where they also count ``host_hw_weight`` each.
HW_CHANNEL = "hardware"
#: A ticketed loop's signature is the loop's while it crashes again within this long.
LOOP_GAP_MS = DAY_MS
#: A loop is ticketed while it loops: its signature's last crash unit within this long, or two unit spans
#: (``unit_span_s``: a loop's crashes make a unit a span), whichever is longer.
LOOP_ONGOING_MS = 2 * 3_600_000
#: An odd-shaped signature counts once this long on a host's odd-shape channel.
ODD_SIGNATURE_GAP_MS = DAY_MS
#: A host's signatures by count, ties by name (deterministic): (signature, count) -> (count, signature).
_COUNT_THEN_NAME = itemgetter(1, 0)


def odd_shape(crash: Crash, bitflip_min: float) -> bool:
    """Does this crash look like bad silicon rather than bad code?

    The founding case: stack pointers not 8-byte aligned and fault addresses
    one bit from a valid pointer, all from one host whose CPU miscomputed.
    The agent flags the first (``sp_misaligned``), scores bit flips, and
    classes non-canonical addresses. A return to NULL (``ip_zero``) is the
    libunwind race: software on many hosts, not silicon; so are a stack
    overflow and a jump into data (``fleetepi.contract.shapes``).
    """
    return bool(silicon_evidence(crash.shape_flags, crash.bitflip_score, crash.fault_class, bitflip_min))


def _new_unit(e: Evidence, key: str, ts_ms: int, gap_ms: int) -> bool:
    """Is this case a new unit of ``key`` (none counted within ``gap_ms`` before it)? It is recorded if so."""
    last = e.last_unit.get(key)
    if last is not None and ts_ms - last < gap_ms:
        return False
    e.last_unit[key] = ts_ms
    return True


class Evidence(Struct):
    """What a host's last day looked like (inflated decayed counts at the day scale)."""

    sigs: dict[str, float] = field(default_factory=dict)
    crashes: float = 0.0
    odd: float = 0.0
    #: odd-shaped crashes per signature: one signature crashing oddly again and again is one bug
    odd_sigs: dict[str, float] = field(default_factory=dict)
    hw: float = 0.0
    #: "s\x1f"+signature -> ms of its last crash unit; "o\x1f"+signature -> ms of its last odd-shape unit;
    #: "h\x1f"+channel -> step of its last hardware error unit
    last_unit: dict[str, int] = field(default_factory=dict)
    #: cpu -> [inflated decayed crashes at the long-run scale, signatures seen on it]
    cpus: dict[str, tuple[float, list[str]]] = field(default_factory=dict)
    loop_ticket_until_ms: int = 0
    #: signatures ticketed as this host's crash loop -> ms of their last crash: explained, they no longer
    #: count against its peers while they keep looping
    loops: dict[str, int] = field(default_factory=dict)
    #: signature -> the job of its last crash that named one: a loop of one job on many hosts is one loop
    sig_jobs: dict[str, str] = field(default_factory=dict)
    silicon_until_ms: int = 0
    last_ms: int = 0


class DayEvidence(Struct, frozen=True):
    """What a host's last day looked like, as the findings read it."""

    crashes: float = 0.0
    #: signatures with half a crash or more
    n_sigs: int = 0
    #: the top signature's share of the crashes
    top: float = 0.0
    top_signature: str | None = None
    odd: float = 0.0
    #: signatures with half an odd-shaped crash or more (corruption crashes whatever runs)
    odd_sigs: int = 0
    #: odd-shaped crashes outside the top signature (a loop on a garbage pointer has none)
    odd_elsewhere: float = 0.0
    hw: float = 0.0


class HostSpikeState(Struct):
    peers: HostPeers
    hosts: dict[str, Evidence] = field(default_factory=dict)
    cpu_touched: set[str] = field(default_factory=set)
    #: hosts with a crash since the last decision (crash-loop check)
    crash_touched: set[str] = field(default_factory=set)
    #: hosts whose episode is open (alerted, firing on some channel): one alert per episode
    open: set[str] = field(default_factory=set)
    #: "job\x1fsignature" -> until when its crash loop is ticketed (``ticket_cooldown_s``): a job that hangs
    #: on 64 hosts and restarts, hanging again, loops on each of them, and is one ticket, not 64
    job_loops: dict[str, int] = field(default_factory=dict)


class HostSpike:
    """Fires once per episode when a host stands out; says whether it is sick, broken, looping or chronic."""

    name: ClassVar[str] = "host_spike"
    state_version: ClassVar[str] = "host_spike/4"

    def __init__(self, config: DetectorConfig, clock: DecayClock) -> None:
        c = self.config = config
        self.state = HostSpikeState(host_peers_from_config(c, clock, alpha=c.host_alpha, min_units=c.host_min_units,
                                                           min_ratio=c.host_min_ratio))
        self._channels()
        scales = list(clock.scales_s)
        self._day = scales.index(86400.0) if 86400.0 in scales else len(scales) // 2
        self._long = scales.index(c.host_longrun_s)
        self._hw_kinds = frozenset(c.hw_error_kinds)
        self._app_xids = frozenset(c.app_xid_codes)
        self._unit_ms = int(c.unit_span_s * 1000)
        self._step_ms = c.step_ms

    # ------------------------------------------------------------------ folding
    def fold(self, case: Case, ctx: Context) -> None:
        ev = case.event
        if case.is_crash:
            self._fold_crash(case, ev, ctx)  # type: ignore[arg-type]
        elif case.errors > 0:
            tel: Telemetry = ev  # type: ignore[assignment]
            if tel.kind in self._hw_kinds and not (tel.kind == "xid" and tel.code in self._app_xids):
                self._fold_hw(case, ctx)

    def _evidence(self, host: str) -> Evidence:
        e = self.state.hosts.get(host)
        if e is None:
            e = self.state.hosts[host] = Evidence()
        return e

    def _fold_crash(self, case: Case, crash: Crash, ctx: Context) -> None:
        c = self.config
        g = ctx.clock.g(case.ts_ms)
        gd = g[self._day]
        e = self._evidence(case.host)
        e.last_ms = max(e.last_ms, case.ts_ms)
        sig = crash.signature
        n = gd * crash.n  # a source that counted repeats (a flood of one traceback) says how many
        e.sigs[sig] = e.sigs.get(sig, 0.0) + n
        e.crashes += n
        if crash.job is not None:
            e.sig_jobs[sig] = crash.job
        self.state.crash_touched.add(case.host)
        odd = odd_shape(crash, c.host_bitflip_min)
        looping = e.loops.get(sig)
        if looping is not None:
            if case.ts_ms - looping < LOOP_GAP_MS:
                e.loops[sig] = max(looping, case.ts_ms)
            else:
                del e.loops[sig]  # it stopped for a day: a new loop is news again
                looping = None
        if odd:
            e.odd += gd
            e.odd_sigs[sig] = e.odd_sigs.get(sig, 0.0) + gd
        if looping is not None:
            w = 0.0  # a ticketed loop's crashes are explained, odd-shaped or not
        else:
            # once per (host, signature) an hour, an odd-shaped one weighing more: a pod looping on a
            # garbage pointer is one unit an hour, as any loop, not host_odd_weight units per restart
            w = (c.host_odd_weight if odd else 1.0) if _new_unit(e, "s\x1f" + sig, case.ts_ms, self._unit_ms) else 0.0
        if crash.cpu is not None:
            cnt, sigs = e.cpus.get(str(crash.cpu), (0.0, []))
            if sig not in sigs and len(sigs) < 16:
                sigs = [*sigs, sig]
            e.cpus[str(crash.cpu)] = (cnt + g[self._long], sigs)
            self.state.cpu_touched.add(case.host)
        if w:
            self.state.peers.observe(case.host, "crash", w, case.ts_ms, case.keys, ctx.clock)
        # odd shapes also against the fleet's rate *of odd shapes*: in the crash channel a failing
        # host's few odd crashes are weighed against every crash its peers have, and on a fleet of
        # five crashes a host-day (some hosts run crashier jobs at 4x) they drown; against the rate
        # at which healthy hosts corrupt memory (near zero) three of them in hours are news. A
        # signature counts there once a day: corruption crashes whatever runs on the host, while one
        # signature crashing oddly again and again (a pod looping on a garbage pointer) is one bug
        poisoned = MEMORY_POISONED in (crash.shape_flags or ())
        if odd and _new_unit(e, "o\x1f" + sig, case.ts_ms, ODD_SIGNATURE_GAP_MS):
            self.state.peers.observe(case.host, ODD_CHANNEL, 1.0, case.ts_ms, case.keys, ctx.clock)
            if not poisoned:
                # and among the host's signs of failing hardware: memory that fails shows both, a Xid 48
                # and then wild pointers and bit flips in whatever runs, neither three of a kind for hours
                self.state.peers.observe(case.host, HW_CHANNEL, 1.0, case.ts_ms, case.keys, ctx.clock)
        if poisoned and self._hw_unit(e, "h\x1f" + MEMORY_POISONED, case.ts_ms):
            e.hw += gd
            # the kernel's own word that a machine check poisoned the memory this process read: an
            # uncorrectable memory error, whatever signature the victim had. The kernel retires each
            # poisoned page, so the same process dying again is another page failing, not one bug
            # repeating: a hardware error of the host each time (one a step), never a crash loop
            self.state.peers.observe(case.host, HW_CHANNEL, 1.0, case.ts_ms, case.keys, ctx.clock)

    def _hw_unit(self, e: Evidence, key: str, ts_ms: int) -> bool:
        """Is this hardware error a new unit of the host (one per channel and step: a flood is one report)?"""
        step = ts_ms // self._step_ms
        if e.last_unit.get(key) == step:
            return False
        e.last_unit[key] = step
        return True

    def _fold_hw(self, case: Case, ctx: Context) -> None:
        e = self._evidence(case.host)
        e.last_ms = max(e.last_ms, case.ts_ms)
        if not self._hw_unit(e, "h\x1f" + case.channel, case.ts_ms):
            return
        e.hw += ctx.clock.g(case.ts_ms)[self._day]
        self.state.peers.observe(case.host, "crash", self.config.host_hw_weight, case.ts_ms, case.keys, ctx.clock)
        # and against the fleet's rate *of hardware errors*, as odd shapes are: among a crashy fleet's
        # crashes a failing host's few uncorrectable ECC errors and Xid 48s drown, while healthy hosts
        # report them almost never. With the host's own past (a GPU that re-reports one Xid for weeks
        # is its own baseline, and telemetry_host tickets it)
        self.state.peers.observe(case.host, HW_CHANNEL, 1.0, case.ts_ms, case.keys, ctx.clock)

    # ------------------------------------------------------------------ decisions
    def decide(self, now_ms: int, horizon_ms: int, ctx: Context) -> list[Alert]:
        peers = self.state.peers
        if peers.start_ms is None or (ctx.start_ms is not None and ctx.start_ms < peers.start_ms):
            peers.start_ms = ctx.start_ms
        out = []
        for v in peers.decide(now_ms, ctx.inventory, ctx.clock):
            # one alert per episode, whichever channel (every crash, odd shapes) fires first; it resolves
            # when no channel fires any more
            if v.state == "firing" and v.host in self.state.open:
                continue
            if v.state == "resolved" and (v.host not in self.state.open
                                          or any(v.host in ch.firing for ch in peers.channels.values())):
                continue
            a = self._verdict(v, now_ms, ctx)
            if a is not None:
                out.append(a)
                if a.state == "firing" and v.state == "firing":
                    self.state.open.add(v.host)
                elif a.state == "resolved":
                    self.state.open.discard(v.host)
                    peers.close_episode(v.host)
        if self.state.cpu_touched:
            touched, self.state.cpu_touched = self.state.cpu_touched, set()
            for host in sorted(touched):
                a = self._silicon(host, now_ms, ctx)
                if a is not None:
                    out.append(a)
        if self.state.crash_touched:
            touched, self.state.crash_touched = self.state.crash_touched, set()
            if peers.start_ms is not None and now_ms >= peers.start_ms + peers.warmup_ms:
                for host in sorted(touched):
                    a = self._loop(host, now_ms, ctx)
                    if a is not None:
                        out.append(a)
        return out

    def _loop(self, host: str, now_ms: int, ctx: Context) -> Alert | None:
        """One (host, signature) crashing over and over: a pod in a crash loop, reported once as a ticket."""
        c = self.config
        e = self.state.hosts.get(host)
        if e is None or now_ms < e.loop_ticket_until_ms:
            return None
        g = ctx.clock.g(now_ms)
        if e.crashes / g[self._day] < c.loop_min_crashes:
            return None  # fewer crashes in the day than a loop makes of one signature (most hosts, every step)
        d = self._day_evidence(host, g)
        if d.crashes * d.top < c.loop_min_crashes or d.top < c.loop_min_share or d.odd_elsewhere >= 1 or d.hw >= 1:
            return None
        sig = d.top_signature
        if sig is None:  # top > 0 above: the host has crashed with a signature
            return None
        if now_ms - e.last_unit.get("s\x1f" + sig, 0) > max(LOOP_ONGOING_MS, 2 * self._unit_ms):
            # the day's evidence still holds a loop that stopped hours ago (one during the warm-up, read when
            # any crash of the host touches it after): a pod no longer restarting is nothing to fix now
            return None
        e.loops[sig] = now_ms
        if self._job_ticketed(e, sig, now_ms):
            return None
        e.loop_ticket_until_ms = now_ms + int(c.ticket_cooldown_s * 1000)
        v = PeerVerdict(host, "crash", "firing", now_ms, d.crashes * d.top, 0.0, 86400.0, "a crash loop")
        summary = (f"host {host} has a crash loop: {d.crashes * d.top:.3g} crashes of one signature over ~a day "
                   f"({d.top:.0%} of its crashes; a pod restarting, for its owners to fix): {sig[:90]}")
        notes = [f"crash loop: >= {c.loop_min_crashes:g} crashes of one (host, signature) within about a day, "
                 f">= {c.loop_min_share:.0%} of the host's crashes, no odd shapes in other signatures, no "
                 f"hardware errors; the host's "
                 f"count against its peers counted the loop once an hour, and leaves it out while it loops"]
        notes.extend(self._job_note(e, sig))
        return self._alert(v, "crash_loop", None, summary, notes, incident=incident_signature(sig))

    def _job_note(self, e: Evidence, sig: str) -> list[str]:
        """What the ticket stands for when the loop's crashes name a job: the job's loop, on any of its hosts."""
        job = e.sig_jobs.get(sig)
        if job is None:
            return []
        days = self.config.ticket_cooldown_s / 86400.0
        return [f"job {job}: one ticket for the job's loop; the same signature looping on its other hosts is "
                f"not ticketed again for {days:g} days (a job hung on many hosts, restarting, loops on each)"]

    def _job_ticketed(self, e: Evidence, sig: str, now_ms: int) -> bool:
        """Is this loop its job's, already ticketed on another host? If not, it is now (the caller tickets it).

        Why: a job deadlocked on 64 hosts restarts and hangs again, its
        watchdog reporting on every rank each time: on each host one
        signature repeating, a crash loop by every count. Ticketed per host
        that was 64 tickets for one job (126 of the 127 loop tickets on the
        quiet tuning seeds), all for what its signature's page already says.
        The loop still leaves each host's count against its peers. A crash
        without a job, or a pod's own job, is a loop of its host alone.
        """
        job = e.sig_jobs.get(sig)
        if job is None:
            return False
        key = f"{job}\x1f{sig}"
        if now_ms < self.state.job_loops.get(key, 0):
            return True
        self.state.job_loops[key] = now_ms + int(self.config.ticket_cooldown_s * 1000)
        return False

    def _day_evidence(self, host: str, g: tuple[float, ...]) -> DayEvidence:
        e = self.state.hosts.get(host)
        if e is None:
            return DayEvidence()
        gd = g[self._day]
        crashes = e.crashes / gd
        top_sig = self._top_signature(host)
        odd = e.odd / gd
        odd_top = e.odd_sigs.get(top_sig, 0.0) / gd if top_sig is not None else 0.0
        half = 0.5 * gd
        return DayEvidence(crashes, sum(1 for x in e.sigs.values() if x >= half),
                           e.sigs[top_sig] / gd / crashes if top_sig is not None and crashes > 0 else 0.0, top_sig,
                           odd, sum(1 for x in e.odd_sigs.values() if x >= half), max(odd - odd_top, 0.0),
                           e.hw / gd)

    def _hardware_share(self, host: str) -> float:
        """The share of the host's crash units at the chronic scale that are its hardware errors."""
        peers = self.state.peers
        crash, hw = peers.channels.get("crash"), peers.channels.get(HW_CHANNEL)
        st = crash.hosts.get(host) if crash is not None else None
        hw_st = hw.hosts.get(host) if hw is not None else None
        i = peers.chronic
        if st is None or hw_st is None or st.c[i] <= 0:
            return 0.0
        return self.config.host_hw_weight * hw_st.c[i] / st.c[i]

    def _verdict(self, v: PeerVerdict, now_ms: int, ctx: Context) -> Alert | None:
        c = self.config
        g = ctx.clock.g(now_ms)
        host = v.host
        d = self._day_evidence(host, g)
        crashes, n_sigs, top, odd, hw = d.crashes, d.n_sigs, d.top, d.odd, d.hw
        evidence = (f"evidence over ~a day: {crashes:.3g} crashes of {n_sigs} signatures (top one {top:.0%}), "
                    f"{odd:.3g} with odd shapes (bit flips, non-canonical address, misaligned stack), "
                    f"{hw:.3g} hardware errors ({', '.join(sorted(self._hw_kinds))})")
        if v.state == "resolved":
            return self._alert(v, "resolved", None, f"host {host} back in line with its peers", [*v.notes])
        if v.state == "chronic":
            if v.channel == HW_CHANNEL or (self._hardware_share(host) >= 0.5 and ctx.chronic_host(host)):
                # telemetry_host tickets each of its codes; here it only leaves the peer sums. So does a
                # crash count that is mostly those errors (a node failing for months, crashing never),
                # once telemetry_host holds the host chronic: errors split over codes, none enough alone,
                # still get this ticket
                return None
            summary = (f"host {host} has crashed far above its peers for days ({v.observed:.3g} units over "
                       f"~{span(v.window_s)} vs {v.expected:.2g} expected from {v.basis}): a standing condition")
            return self._alert(v, "chronic", v.p_value, summary, [*v.notes, evidence])
        sig: str | None = None  # the loop's signature, for a crash_loop
        # odd shapes in two signatures or more, as many as the odd-shape channel pages on (decayed: two
        # crashes three hours apart read 1.88 over the day)
        if odd >= min(2.0, c.host_odd_min_units) and d.odd_sigs >= 2:
            finding, what = "suspected_bad_silicon", "likely silent CPU/memory corruption: drain and test it"
        elif hw >= 2 or v.channel == HW_CHANNEL:
            finding = "hardware_errors"
            what = ("crashing with hardware errors" if crashes >= 1 else "reporting hardware errors") + \
                " (failing memory/GPU?): drain and test it"
        elif top >= c.loop_min_share and n_sigs <= c.loop_max_signatures and d.odd_elsewhere < 1 and hw < 1:
            e = self._evidence(host)
            if now_ms < e.loop_ticket_until_ms:
                return None
            sig = d.top_signature
            if sig is not None:
                e.loops[sig] = now_ms
                if self._job_ticketed(e, sig, now_ms):
                    return None
            e.loop_ticket_until_ms = now_ms + int(c.ticket_cooldown_s * 1000)
            finding, what = "crash_loop", "in a crash loop (one signature repeating): a pod to fix, not the host"
        else:
            finding, what = "sick_host", "crashing far above its peers"
        units = {ODD_CHANNEL: "odd-shaped crashes",
                 HW_CHANNEL: "hardware errors" + (" and odd-shaped crashes" if odd >= 0.5 else "")
                 }.get(v.channel, "crash/error units")
        summary = (f"host {host} {what}: {v.observed:.3g} {units} over ~{span(v.window_s)} vs "
                   f"{v.expected:.2g} expected from {v.basis}; last day: {n_sigs} signatures, {odd:.3g} odd-shaped "
                   f"crashes, {hw:.3g} hardware errors")
        notes = [*v.notes, evidence]
        if sig is not None:
            summary += f": {sig[:90]}"
            notes.extend(self._job_note(self._evidence(host), sig))
        return self._alert(v, finding, v.p_value, summary, notes,
                           incident=incident_signature(sig) if sig is not None else None)

    def _top_signature(self, host: str) -> str | None:
        """The signature a host crashed with most over ~a day (ties: the greatest name, for determinism)."""
        e = self.state.hosts.get(host)
        if e is None or not e.sigs:
            return None
        return max(e.sigs.items(), key=_COUNT_THEN_NAME)[0]

    def _silicon(self, host: str, now_ms: int, ctx: Context) -> Alert | None:
        """Crashes that concentrate on one CPU core across signatures: a core that miscomputes."""
        c = self.config
        e = self.state.hosts.get(host)
        if e is None or not e.cpus or now_ms < e.silicon_until_ms:
            return None
        gl = ctx.clock.g(now_ms)[self._long]
        counts = {cpu: cnt / gl for cpu, (cnt, _) in e.cpus.items()}
        total = sum(counts.values())
        cpu, top = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
        sigs = e.cpus[cpu][1]
        if total < c.silicon_min_crashes or top / total < c.silicon_min_share or len(sigs) < c.silicon_min_signatures:
            return None
        e.silicon_until_ms = now_ms + int(c.ticket_cooldown_s * 1000)
        span_s = ctx.clock.scales_s[self._long]
        v = PeerVerdict(host, "crash", "firing", now_ms, top, total / max(len(counts), 1), span_s, "its other cores")
        summary = (f"host {host} likely has a bad CPU core: {top:.3g} of {total:.3g} crashes with a known CPU ran on "
                   f"CPU {cpu}, across {len(sigs)} signatures: drain it and run a CPU test")
        notes = [f"bad silicon by CPU core: >= {c.silicon_min_share:.0%} of >= {c.silicon_min_crashes} crashes on one "
                 f"core across >= {c.silicon_min_signatures} signatures (decayed over ~{span(span_s)})",
                 f"signatures on CPU {cpu}: " + "; ".join(sigs[:5])]
        return self._alert(v, "suspected_bad_silicon", None, summary, notes)

    def _alert(self, v: PeerVerdict, finding: str, p: float | None, summary: str, notes: list[str],
               incident: str | None = None) -> Alert:
        """The host alert; a crash loop's incident is its signature's (a workload's loop on 64 hosts is one
        incident, and joins the signature's spike if it has one), every other finding's the host's."""
        severity = FINDINGS[finding][0] if finding in FINDINGS else "page"
        return Alert(ts=ts_from_ms(v.ts_ms), kind="host_spike", state="resolved" if finding == "resolved" else "firing",
                     host=v.host, score=score_of(p) if p is not None else 0.0, p_value=p,
                     observed=round(v.observed, 6), expected=round(v.expected, 6),
                     relative_risk=(v.observed / v.expected if v.expected > 0 else None), window_s=v.window_s,
                     summary=summary, notes=notes, severity=severity,  # type: ignore[arg-type]
                     finding=None if finding == "resolved" else finding,
                     incident=incident or incident_host(v.host))

    # ------------------------------------------------------------------ time and state
    def rebase(self, factors: tuple[float, ...]) -> None:
        self.state.peers.rebase(factors)
        fd, fl = factors[self._day], factors[self._long]
        for e in self.state.hosts.values():
            e.sigs = {s: x * fd for s, x in e.sigs.items()}
            e.crashes *= fd
            e.odd *= fd
            e.odd_sigs = {s: x * fd for s, x in e.odd_sigs.items()}
            e.hw *= fd
            e.cpus = {cpu: (cnt * fl, sigs) for cpu, (cnt, sigs) in e.cpus.items()}

    def sweep(self, now_ms: int, ctx: Context) -> None:
        self.state.peers.sweep(now_ms)
        g = ctx.clock.g(now_ms)
        gd = g[self._day]
        cutoff = now_ms - int(self.config.key_ttl_s * 1000)
        unit_cut = now_ms - max(self._unit_ms, self._step_ms)
        odd_cut = now_ms - ODD_SIGNATURE_GAP_MS
        hosts = self.state.hosts
        for h in [h for h, e in hosts.items() if e.last_ms < cutoff]:
            del hosts[h]
        if self.state.job_loops:
            self.state.job_loops = {k: t for k, t in self.state.job_loops.items() if t > now_ms}
        for e in hosts.values():
            if len(e.sigs) > 8:
                e.sigs = {s: x for s, x in e.sigs.items() if x / gd >= 0.01}
            if e.sig_jobs:
                e.sig_jobs = {s: j for s, j in e.sig_jobs.items() if s in e.sigs}
            if e.odd_sigs:
                e.odd_sigs = {s: x for s, x in e.odd_sigs.items() if x / gd >= 0.01}
            if e.last_unit:
                e.last_unit = {k: t for k, t in e.last_unit.items()
                               if (t > odd_cut if k[0] == "o" else
                                   (t if k[0] == "s" else t * self._step_ms) > unit_cut)}

    def snapshot(self) -> dict[str, Any]:
        return msgspec.to_builtins(self.state)  # type: ignore[no-any-return]

    def restore(self, state: dict[str, Any]) -> None:
        self.state = msgspec.convert(state, HostSpikeState)
        self._channels()  # a snapshot from before the odd-shape or hardware channel

    def _channels(self) -> None:
        peers = self.state.peers
        peers.peers_only = (ODD_CHANNEL,)
        peers.channel_min_units = {ODD_CHANNEL: self.config.host_odd_min_units, HW_CHANNEL: self.config.host_hw_min_units}
        peers.channel_alpha = {HW_CHANNEL: self.config.host_hw_alpha}

    def counts(self) -> dict[str, float]:
        return self.state.peers.counts()


__all__ = ["HostSpike", "odd_shape"]
