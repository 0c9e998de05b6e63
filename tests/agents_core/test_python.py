"""CPython cores: the Python stack leads the signature (py-spy dump --core)."""

from __future__ import annotations

import pytest

from fleetepi.agents.core.pyframes import find_pyspy


@pytest.fixture(scope="module")
def pyspy() -> str:
    exe = find_pyspy()
    if exe is None:
        pytest.skip("py-spy is not installed, so Python frames cannot be read from cores here")
    return exe


def test_ctypes_crash_has_python_frames(analyzer, python_core_factory, pyspy):  # type: ignore[no-untyped-def]
    crash = analyzer.analyze(python_core_factory("ctypes"), host="h").crash
    py = [f for f in crash.frames or [] if f.language == "python"]
    if not py:
        pytest.skip(f"py-spy could not read this interpreter's core here: {crash.notes}")
    assert [f.function for f in py][:3] == ["string_at", "inner", "outer"]
    assert py[1].line == 3 and py[1].module == "crash_ctypes.py"
    assert crash.signature.startswith("python:ctypes/__init__.py!string_at | python:crash_ctypes.py!inner | ")
    assert crash.signal == "SIGSEGV" and crash.fault_class == "null_page"
    # interpreter internals never reach the signature
    assert "_PyEval" not in crash.signature


def test_os_abort_has_python_frames(analyzer, python_core_factory, pyspy):  # type: ignore[no-untyped-def]
    crash = analyzer.analyze(python_core_factory("abort"), host="h").crash
    py = [f.function for f in crash.frames or [] if f.language == "python"]
    if not py:
        pytest.skip(f"py-spy could not read this interpreter's core here: {crash.notes}")
    assert py[:2] == ["give_up", "step"]
    assert crash.signal == "SIGABRT"
    assert crash.signature.startswith("python:crash_abort.py!give_up | python:crash_abort.py!step")


def test_python_core_without_pyspy_keeps_native_frames(python_core_factory):  # type: ignore[no-untyped-def]
    from fleetepi.agents.core.signature import CoreAnalyzer

    native_only = CoreAnalyzer(use_pyspy=False)
    try:
        crash = native_only.analyze(python_core_factory("ctypes"), host="h").crash
    finally:
        native_only.close()
    assert not any(f.language == "python" for f in crash.frames or [])
    assert crash.signature and not crash.signature.startswith("unknown")


def test_signature_is_stable_across_two_python_crashes(analyzer, python_core_factory, pyspy):  # type: ignore[no-untyped-def]
    first = analyzer.analyze(python_core_factory("abort", 0), host="h").crash.signature
    again = analyzer.analyze(python_core_factory("abort", 1), host="other-host").crash.signature
    assert first == again
