"""A recorded stream replays to the checked-in golden alerts (kind + entity + state, in order).

When a detector change is meant to change alerts, regenerate with
``.venv/bin/python tests/pipeline/data/regenerate.py`` and review the diff.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from fleetepi.contract import Alert, decode_alert
from fleetepi.replay import replay_command

from .conftest import DATA

REGENERATE = "regenerate with: .venv/bin/python tests/pipeline/data/regenerate.py (and review the diff)"


def _identity(alert: Alert) -> tuple[object, ...]:
    return (alert.kind, alert.signature, alert.host, alert.attribute, alert.value, alert.telemetry_kind, alert.code,
            alert.state)


def _read(path) -> list[tuple[object, ...]]:
    return [_identity(decode_alert(line)) for line in path.read_bytes().splitlines() if line.strip()]


def test_replay_matches_golden_alerts(tmp_path) -> None:
    out = tmp_path / "alerts.jsonl"
    result = CliRunner().invoke(replay_command, ["-i", str(DATA / "recorded.jsonl.gz"), "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    got, want = _read(out), _read(DATA / "recorded.alerts.jsonl")
    assert want, "the golden file has no alerts: " + REGENERATE
    if got != want:
        missing = [w for w in want if w not in got]
        extra = [g for g in got if g not in want]
        pytest.fail(f"alerts differ from the golden file ({len(got)} vs {len(want)}); "
                    f"missing {missing[:5]}, unexpected {extra[:5]}; {REGENERATE}")
    # the three bad lines mixed into the recording are counted, not fatal
    for reason in ("malformed_json", "unknown_schema", "unknown_host"):
        assert f"invalid: {reason}" in result.stderr


def test_replay_is_deterministic(tmp_path) -> None:
    outs = []
    for i in range(2):
        out = tmp_path / f"alerts{i}.jsonl"
        result = CliRunner().invoke(replay_command, ["-i", str(DATA / "recorded.jsonl.gz"), "-o", str(out), "-q"])
        assert result.exit_code == 0, result.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1]
