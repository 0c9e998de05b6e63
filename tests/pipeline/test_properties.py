"""Properties of the pipeline over arbitrary input: it never raises, and every line is accounted for."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fleetepi.contract.codec import REASONS
from fleetepi.pipeline import Pipeline

from .conftest import crash_line, host_line, telemetry_line

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4),
    max_leaves=12,
)
# Near-misses of real messages: a valid event with one field replaced by anything.
near_misses = st.builds(
    lambda base, key, value: orjson.dumps({**orjson.loads(base), key: value}),
    st.sampled_from([host_line("h1", 1), crash_line("h1", 2), telemetry_line("h1", 3)]),
    st.sampled_from(["schema", "ts", "host", "signature", "kind", "code", "count", "attributes", "frames"]),
    json_values,
)
lines = st.one_of(st.binary(max_size=200), json_values.map(orjson.dumps), near_misses,
                  st.sampled_from([host_line("h1", 0), crash_line("h1", 4), crash_line("ghost", 5),
                                   # an integer beyond 64 bits, which orjson cannot even write
                                   telemetry_line("h1", 6).replace(b'"code":79', b'"code":' + b"9" * 40)]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(lines, max_size=30))
def test_any_input_is_accounted_for_and_never_raises(batch: list[bytes]) -> None:
    batch = [line.replace(b"\n", b" ") for line in batch]  # one record per line
    pipe = Pipeline()
    pipe.run(batch)
    pipe.finish()
    s = pipe.summary
    non_blank = sum(1 for line in batch if line.strip())
    assert s.lines == non_blank
    dropped = sum(v.count for r, v in s.invalid.items() if r != "unknown_host")  # unknown_host is only a flag
    assert sum(s.events.values()) + dropped == non_blank
    assert set(s.invalid) <= set(REASONS)
    assert all(v.first_line is not None and 1 <= v.first_line <= len(batch) for v in s.invalid.values())
