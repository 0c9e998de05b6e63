"""Pure pieces: the call-instruction test, fault classes, bit flips, note decoders, py-spy parsing."""

from __future__ import annotations

import struct

import pytest

from fleetepi.agents.core.mappings import parse_elf_head
from fleetepi.agents.core.notes import decode_prstatus, decode_siginfo
from fleetepi.agents.core.pyframes import is_cpython, parse_dump
from fleetepi.agents.core.shape import Shape, bitflip_candidates, classify_fault, crash_shape
from fleetepi.agents.core.stackwalk import call_before


@pytest.mark.parametrize(
    ("code", "is_call"),
    [
        (b"\x90\x90\xe8\x10\x20\x30\x40", True),  # call rel32
        (b"\x90\x90\x90\x90\x90\xff\xd0", True),  # call *%rax
        (b"\x90\x90\x90\x90\x41\xff\xd4", True),  # call *%r12 (REX.B)
        (b"\x90\x90\x90\x90\xff\x50\x18", True),  # call *0x18(%rax)
        (b"\x90\xff\x15\x00\x10\x00\x00", True),  # call *0x1000(%rip)
        (b"\x90\x90\x90\x90\x90\xff\x10", True),  # call *(%rax)
        (b"\x90\x90\x90\x90\x90\x90\x90", False),  # nops
        (b"\x90\x90\x90\x90\x90\xff\xe0", False),  # jmp *%rax is not a call
        (b"\x48\x89\xe5\x48\x83\xec\x10", False),  # mov/sub prologue
    ],
)
def test_call_before(code: bytes, is_call: bool) -> None:
    assert call_before(code) is is_call


MAPPED = [(0x555555554000, 0x555555558000), (0x555555559000, 0x55555557A000), (0x7FFFF7D80000, 0x7FFFF7F90000)]


def is_mapped(addr: int) -> bool:
    return any(s <= addr < e for s, e in MAPPED)


@pytest.mark.parametrize(
    ("addr", "cls"),
    [
        (0x0, "null_page"),  # NULL
        (0x18, "null_page"),  # NULL->field
        (0x8000555555559010, "non_canonical"),  # bit 63 flipped in a heap pointer
        (0xFFFFFFFFFF600000, "kernel"),  # vsyscall page / kernel half
        (0x555555559010, "mapped"),  # heap
        (0x123456789000, "unmapped"),  # nowhere
    ],
)
def test_classify_fault(addr: int, cls: str) -> None:
    assert classify_fault(addr, is_mapped) == cls


def test_bitflip_candidates() -> None:
    heap = 0x555555559010
    assert bitflip_candidates(heap ^ (1 << 40), is_mapped) == [40]
    assert bitflip_candidates(heap, is_mapped) == []  # mapped: no flip needed
    assert bitflip_candidates(0x55555557A010, is_mapped) == []  # just past a mapping: an end pointer, not a flip
    assert bitflip_candidates(0x10, is_mapped) == []  # NULL+16 is no flip


def _regs(**over: int) -> dict[str, int]:
    regs = dict.fromkeys(("rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rbp", "r8", "r9", "r10", "r11", "r12", "r13",
                          "r14", "r15"), 0)
    regs.update(rip=0x555555555100, rsp=0x7FFFF7E00000)
    regs.update(over)
    return regs


def test_shape_flags() -> None:
    shape = crash_shape(_regs(rip=0, rsp=0x7FFFF7E00003), None, is_mapped, is_mapped)
    assert isinstance(shape, Shape)
    assert shape.flags == ["ip_zero", "sp_misaligned"]
    flipped = crash_shape(_regs(rdi=0x555555559010 ^ (1 << 44)), None, is_mapped, is_mapped)
    assert "reg_bitflip" in flipped.flags and flipped.bitflip_score == 0.5


def test_prstatus_and_siginfo_decoders() -> None:
    head = struct.pack("<iiihxxQQiiii", 11, 1, 0, 11, 0, 0, 4242, 1, 1, 1) + bytes(64)
    regs = list(range(27))
    desc = head + struct.pack("<27Q", *regs) + bytes(8)
    st = decode_prstatus(desc)
    assert st.pid == 4242 and st.cursig == 11 and st.regs["rip"] == 16 and st.regs["rsp"] == 19
    with pytest.raises(ValueError):
        decode_prstatus(desc[:200])
    si = decode_siginfo(struct.pack("<iiixxxxQ", 11, 0, 1, 0xDEAD) + bytes(104))
    assert (si.signo, si.code, si.addr) == (11, 1, 0xDEAD)
    killed = decode_siginfo(struct.pack("<iiixxxxQ", 6, 0, -6, 0x1234) + bytes(104))
    assert killed.addr is None  # tgkill: those bytes are a pid, not an address


def test_parse_elf_head_of_garbage_is_empty() -> None:
    assert parse_elf_head(b"\x7fELF").build_id is None
    assert parse_elf_head(b"").link_vaddr == 0


DUMP = """Signal 11: core
Process 15896: python3 p.py
Python v3.11.7

Thread 15900 (idle)
    wait (threading.py:320)
Thread 15896 (gil)
    string_at (/usr/lib/python3.11/ctypes/__init__.py:519)
    inner (/tmp/p.py:3)
"""


def test_parse_dump_picks_the_crashing_thread() -> None:
    frames = parse_dump(DUMP, 15896)
    assert [(f.function, f.line) for f in frames] == [("string_at", 519), ("inner", 3)]
    assert parse_dump(DUMP, None)[0].function == "string_at"  # the GIL holder
    assert parse_dump(DUMP, 15900)[0].function == "wait"
    assert parse_dump("garbage", 1) == []


@pytest.mark.parametrize(
    ("names", "yes"),
    [
        (["python3.11", "libc.so.6"], True),
        (["python3", "libc.so.6"], True),
        (["train", "libpython3.12.so.1.0"], True),
        (["crashy", "libc.so.6"], False),
        (["pythonic-tool"], False),
    ],
)
def test_is_cpython(names: list[str], yes: bool) -> None:
    assert is_cpython(names) is yes


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6.0.30", "libstdc++.so.6"),  # point releases do not split signatures
        ("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc.so.6"),
        ("/opt/train/bin/trainer (deleted)", "trainer"),  # binary replaced while running
        ("/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "ld-linux-x86-64.so.2"),
        ("/home/u/venv/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so", "libtorch_cuda.so"),
    ],
)
def test_module_name(path: str, name: str) -> None:
    from fleetepi.agents.core.mappings import module_name

    assert module_name(path) == name


def test_demangle() -> None:
    from fleetepi.agents.core.demangle import available, demangle

    if not available():
        pytest.skip("libstdc++ cannot be loaded here")
    assert demangle("_ZN3svc12parse_headerEi") == "svc::parse_header(int)"
    assert demangle("_ZSt9terminatev") == "std::terminate()"
    assert demangle("main") == "main"  # C names pass through
    assert demangle("_Znot-a-name") == "_Znot-a-name"  # failures keep the input


def test_skip_lines_match_mangled_and_demangled_names() -> None:
    from fleetepi.agents.core.rules import SigFrame, load_rules

    rules = load_rules()
    frame = SigFrame(module="libstdc++.so.6", function="std::terminate()", raw_function="_ZSt9terminatev")
    assert rules.skip.matches(frame)
