"""Every command that reads a config file fails the same way on a bad one (issues 10 and 11).

One line on stderr naming the file and the field path, exit code 2, no
traceback: for a YAML syntax error, a wrong type, an unknown key, a file that
is not UTF-8 and one nested 5,000 levels deep, for each of ``agent``,
``replay -c``, ``demo -c``, ``worker --config`` and ``hook --config``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from fleetepi.cli import main
from fleetepi.config import ConfigFileError, convert, load, read_yaml
from fleetepi.detectors import DetectorConfig

HOOK_BASE = "token_env: HOOK_TOKEN\nbreaker: {fleet_size: 10}\nrules: [{name: r, match: {alertname: A}, actions: [{type: slurm}]}]\n"

# command -> (argv with {cfg} and {tmp}, a good base config, (key, wrong value, expected type))
COMMANDS = {
    "agent": (["agent", "--config", "{cfg}", "--output", "-", "--once"], "sources: []\n", ("flush_interval_s", "soon", "float")),
    "replay": (["replay", "-i", "{tmp}/none.jsonl", "-o", "{tmp}/a.jsonl", "-c", "{cfg}"], "", ("sig_alpha", "x", "float")),
    "demo": (["demo", "-c", "{cfg}", "--exit", "--no-metrics"], "", ("sig_min_units", "[1]", "int")),
    "worker": (["worker", "--config", "{cfg}", "--broker", "kafka://127.0.0.1:1"], "", ("max_keys", "lots", "int")),
    "hook": (["hook", "--config", "{cfg}"], HOOK_BASE, ("remember", "all", "int")),
}

CASES = {
    # a YAML syntax error: the line and column
    "yaml": (lambda base: base + "bad: [unclosed\n", "YAML syntax"),
    # a value of the wrong type: the field and both types
    "type": (None, ""),
    # a key the command does not know (a typo): the key
    "unknown": (lambda base: base + "bogus_key: 1\n", "bogus_key: unknown key"),
    # not UTF-8 (a file saved in Latin-1)
    "latin1": (lambda base: base + "# r\xe9seau\n", "not UTF-8"),
    # 5,000 levels deep: bounded, not a RecursionError
    "deep": (lambda base: base + "deep: " + "[" * 5000 + "]" * 5000 + "\n", "nested deeper than 64 levels"),
    # a 40,000-digit integer (found by bench/robustness.py): Python's int() refuses it, we say so
    "huge_int": (lambda base: base + "big: " + "1" * 40_000 + "\n", "a value cannot be read: Exceeds the limit"),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_bad_config_is_one_line_naming_file_and_field_and_exit_2(tmp_path: Path, command: str, case: str) -> None:
    argv, base, (key, wrong, expected_type) = COMMANDS[command]
    make, expected = CASES[case]
    content = f"{base}{key}: {wrong}\n" if make is None else make(base)
    if case == "type":
        expected = f"{key}: expected {expected_type}"
    cfg = tmp_path / f"{command}.yaml"
    cfg.write_bytes(content.encode("latin-1"))
    args = [a.format(cfg=cfg, tmp=tmp_path) for a in argv]
    res = CliRunner().invoke(main, args, env={"HOOK_TOKEN": "t"})
    err = res.stderr.strip()
    assert res.exit_code == 2, (res.exit_code, res.output, res.exception)
    assert err.startswith(f"Error: {cfg}: ") and expected in err, err
    assert len(err.splitlines()) == 1 and "Traceback" not in res.output


def test_field_paths_of_nested_keys(tmp_path: Path) -> None:
    from fleetepi.agents.config import load_config
    from fleetepi.agents.exceptions import AgentConfigError

    cfg = tmp_path / "agent.yaml"
    cfg.write_text("publish:\n  spool_dirr: /x\n")
    with pytest.raises(AgentConfigError, match=r"agent.yaml: publish.spool_dirr: unknown key"):
        load_config(cfg)
    cfg.write_text("sources:\n  - kind: kmsg\n  - kind: edac\n    interval_s: -1\n")
    with pytest.raises(AgentConfigError, match=r"agent.yaml: sources\[1\]: interval_s must be a number > 0"):
        load_config(cfg)


def test_unknown_keys_of_a_dataclass_are_refused_with_a_hint(tmp_path: Path) -> None:
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text("sig_alfa: 1e-6\n")
    with pytest.raises(ConfigFileError) as info:
        load(cfg, DetectorConfig)
    assert info.value.field == "sig_alfa" and "did you mean sig_alpha?" in str(info.value)


def test_a_good_config_converts_lists_and_ints(tmp_path: Path) -> None:
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text("sig_windows_s: [3600, 7200]\ncooldown_s: 3600\n")
    got = load(cfg, DetectorConfig)
    assert got.sig_windows_s == (3600.0, 7200.0) and got.cooldown_s == 3600.0 and isinstance(got.cooldown_s, float)


def test_cross_field_checks_name_the_file(tmp_path: Path) -> None:
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text("sig_windows_s: [1]\n")
    with pytest.raises(ConfigFileError, match=f"{cfg}: sig_windows_s needs windows of >= step_s"):
        load(cfg, DetectorConfig)


@pytest.mark.parametrize("text", ["host_nb_size: 40\n", "host_nb_size: 0\n", "host_nb_max_size: 2\n"])
def test_a_host_s_nb_sizes_are_checked(tmp_path: Path, text: str) -> None:
    """A host's past may only sharpen its test: the size with no past is at most the size with one."""
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text(text)
    with pytest.raises(ConfigFileError, match="host_nb_size must be positive and at most host_nb_max_size"):
        load(cfg, DetectorConfig)


@pytest.mark.parametrize("days", ["[7, 3]", "[1]", "[3, 14]"])
def test_multi_day_windows_are_checked(tmp_path: Path, days: str) -> None:
    """The baseline keeps six whole days: a 14-day window would silently be a week."""
    cfg = tmp_path / "detectors.yaml"
    cfg.write_text(f"sig_days: {days}\n")
    with pytest.raises(ConfigFileError, match="sig_days needs whole days from 2 to 7, shortest first"):
        load(cfg, DetectorConfig)
    cfg.write_text("sig_days: []\n")
    assert load(cfg, DetectorConfig).sig_days == ()


def test_aliases_are_counted_as_what_they_expand_to(tmp_path: Path) -> None:
    """A "billion laughs" file: 10 levels of 10 aliases would be 10^10 values once converted."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 10)]
    cfg = tmp_path / "laughs.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    with pytest.raises(ConfigFileError, match="aliases expanded"):
        read_yaml(cfg)


def test_an_empty_file_is_the_defaults_and_a_list_is_not_a_mapping(tmp_path: Path) -> None:
    cfg = tmp_path / "empty.yaml"
    cfg.write_text("# nothing\n")
    assert load(cfg, DetectorConfig) == DetectorConfig()
    with pytest.raises(ConfigFileError, match="expected a mapping, got array"):
        convert([1], DetectorConfig, "x.yaml")
