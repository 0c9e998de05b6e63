"""An upgrade of faust or aiokafka that changes what fleetepi overrides fails here, naming the override."""

from __future__ import annotations

import hashlib
import importlib
import inspect
from pathlib import Path

import pytest

from fleetepi.stream import faust_adapter
from fleetepi.stream.faust_adapter import OVERRIDES, Override

STREAM = Path(faust_adapter.__file__).resolve().parent


def upstream(target: str) -> object:
    module, _, qualname = target.partition(":")
    obj: object = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


@pytest.mark.parametrize("ov", OVERRIDES, ids=lambda o: o.ours)
def test_upstream_code_is_what_the_override_was_written_against(ov: Override) -> None:
    try:
        source = inspect.getsource(upstream(ov.upstream))  # type: ignore[arg-type]
    except AttributeError:
        pytest.fail(f"{ov.upstream} is gone: {ov.ours} ({ov.why}) must be re-done for this faust/aiokafka")
    digest = hashlib.sha256(source.encode()).hexdigest()
    assert digest == ov.sha256, (
        f"{ov.upstream} changed upstream: re-read it against {ov.ours} in stream/faust_adapter.py ({ov.why}); "
        f"then update its sha256 to {digest}")


def test_no_other_module_reaches_into_faust_or_aiokafka_internals() -> None:
    """The overridden names appear in the adapter only (one place to read on an upgrade)."""
    names = ("_drain_messages", "_compile_decode", "_ensure_producer", "_new_transport")
    for path in sorted(STREAM.glob("*.py")):
        if path.name == "faust_adapter.py":
            continue
        text = path.read_text()
        assert not [n for n in names if n in text], path.name
