"""Hostile kernel-log lines: a clear outcome each, nothing else lost, bounded work.

The lines a local user can write through syslog (``logger``), or a broken
driver can flood: numbers too large for the contract, lines of megabytes,
patterns built to make regexes backtrack. Each case sends the bad line among
real ones and checks the bad one is counted under its reason *and* the real
ones still become events.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from fleetepi.agents.telemetry.kmsg import FakeLogSource, FileReader, KernelLogSource
from fleetepi.agents.telemetry.literals import LiteralIndex, Requirement, required
from fleetepi.agents.telemetry.logparse import MAX_LINE_CHARS, KernelLogParser, Parsed, Rejected, strip_prefix
from fleetepi.contract import decode_event, encode

DATA = Path(__file__).parent / "data"
# Real line: tests/agents/data/xid.txt (NVIDIA/gpu-operator#1106 in its attribution column).
XID79 = "NVRM: Xid (PCI:0000:3b:00): 79, pid=0, GPU has fallen off the bus."


def real_lines() -> list[str]:
    out = []
    for f in sorted(DATA.glob("*.txt")):
        out += [row.partition("\t")[2] for row in f.read_text(encoding="utf-8").splitlines() if "\t" in row]
    return out


def source_of(lines: list[str]) -> KernelLogSource:
    return KernelLogSource("node-1", FakeLogSource(lines), dedup_interval_s=0.001)


def published(src: KernelLogSource) -> list:  # type: ignore[type-arg]
    events = list(src.poll(1_700_000_000_000)) + src.drain(1_700_000_100_000)
    for ev in events:
        decode_event(encode(ev))  # every event still follows the contract
    return events


def test_an_absurd_xid_code_is_counted_and_the_batch_is_kept():
    """Issue 10: one Xid line with thousands of digits used to raise in poll() and lose all 50 others."""
    lines = [XID79] * 25 + ["NVRM: Xid (PCI:0000:3b:00): " + "9" * 1000 + ", pid=1, boom"] + [XID79] * 25
    src = source_of(lines)
    events = published(src)
    assert src.outcomes["number_out_of_range"] == 1
    assert src.outcomes["event"] == 50
    assert sum(ev.n for ev in events if ev.code == 79) == 50  # deduplicated, but every line counted


@pytest.mark.parametrize("digits", [10, 30, 400])
def test_codes_and_counts_beyond_the_contract_are_rejected_not_wrapped(digits):
    parser = KernelLogParser()
    assert parser.parse(f"NVRM: Xid (PCI:0000:3b:00): {'7' * digits}, pid=1, x") == Rejected("xid", "number_out_of_range")
    edac = f"EDAC MC0: {'1' * digits} CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 slot:0)"
    assert parser.parse(edac) == Rejected("edac_ce", "number_out_of_range")


@pytest.mark.parametrize("unit", ["a[", "a", "0", " ", "NVRM: ", "[Hardware Error]: ", "x]: segfault at 0 ip "])
def test_overlong_lines_are_counted_as_too_long_and_neighbours_parsed(unit):
    hostile = unit * (64 * 1024 // len(unit))
    src = source_of([XID79, hostile, XID79])
    events = published(src)
    assert src.outcomes["too_long"] == 1
    assert src.outcomes["event"] == 2
    assert sum(ev.n for ev in events) == 2


def test_a_line_at_the_cap_is_still_parsed():
    line = XID79 + " " * (MAX_LINE_CHARS - len(XID79))
    assert len(line) == MAX_LINE_CHARS
    assert isinstance(KernelLogParser().parse(line), Parsed)


def test_a_parser_bug_on_one_line_loses_only_that_line(monkeypatch):
    """Defence in depth: whatever raises for one line is counted as parse_error; the rest go on."""
    parser_parse = KernelLogParser.parse

    def flaky(self, line):  # type: ignore[no-untyped-def]
        if "BOOM" in line:
            raise RuntimeError("a bug")
        return parser_parse(self, line)

    monkeypatch.setattr(KernelLogParser, "parse", flaky)
    src = source_of([XID79, "BOOM", XID79])
    published(src)
    assert src.outcomes["parse_error"] == 1 and src.outcomes["event"] == 2
    assert "parse_error" in src.known_outcomes()


def test_an_endless_line_costs_bounded_memory_and_the_next_lines_arrive(tmp_path):
    """A writer without newlines (a binary dumped into syslog): the reader keeps a bounded prefix."""
    log = tmp_path / "kern.log"
    with open(log, "wb") as fh:
        fh.write(b"a[" * (8 << 20) + b"\n" + (XID79 + "\n").encode() * 3)
    reader = FileReader(log)
    lines: list[str] = []
    while True:
        got = reader.read_lines(1000)
        if not got:
            break
        lines += got
    reader.close()
    assert len(lines) == 4
    assert MAX_LINE_CHARS < len(lines[0]) <= 4 * MAX_LINE_CHARS + 1  # kept only to be counted as too_long
    assert lines[1:] == [XID79] * 3


def _brute_force(parser: KernelLogParser, text: str) -> str | None:
    for rule in parser.rules:
        if rule.pattern.search(text):
            return rule.name
    return None


def _mutants(lines: list[str], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        line = list(rng.choice(lines))
        for _ in range(rng.randint(1, 4)):
            op = rng.random()
            i = rng.randrange(len(line) + 1)
            if op < 0.3 and line:
                del line[min(i, len(line) - 1)]
            elif op < 0.6:
                line.insert(i, rng.choice("aF0:[]() .,-_#\tXid"))
            else:
                piece = rng.choice(lines)
                line[i:i] = list(piece[: rng.randint(0, len(piece))])
        out.append("".join(line)[:MAX_LINE_CHARS])
    return out


def test_the_prefilter_never_hides_a_match():
    """The literal prefilter picks the same first rule as trying every rule, on real and mutated lines."""
    parser = KernelLogParser()
    lines = real_lines() + [s for r in parser.rules for s in r.samples]
    for text in [strip_prefix(x) for x in lines + _mutants(lines, 3000, seed=10)]:
        got = next((parser.rules[i].name for i in parser._index.candidates(text) if parser.rules[i].pattern.search(text)), None)
        assert got == _brute_force(parser, text), text


def test_requirements_are_read_from_the_pattern():
    import re

    assert required(re.compile(r"NVRM: Xid \((?P<d>\d+)")).literals == {"NVRM: Xid ("}  # type: ignore[union-attr]
    assert required(re.compile(r"abc|^Fx\d")) == Requirement(frozenset({"abc"}), frozenset({"Fx"}))  # type: ignore[union-attr]
    assert required(re.compile(r"(?i)nvrm")) is None  # case-insensitive: always tried
    assert required(re.compile(r"\d+ x")) is None  # nothing of 3 characters: always tried
    index = LiteralIndex([required(re.compile(r"abc")), None, required(re.compile(r"^zz|xyz"))])
    assert index.candidates("--abc--") == [0, 1]
    assert index.candidates("zz") == [1, 2]
    assert index.candidates("..xyz") == [1, 2]
