"""Hook config: the shipped example loads; every mistake stops start-up with a clear message."""

from __future__ import annotations

from typing import Any

import pytest

from fleetepi.exceptions import ConfigError
from fleetepi.hook.config import KubernetesAction, load_config, parse_config
from servers import HOOK_EXAMPLE


def _base(**changes: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "token_env": "T",
        "breaker": {"fleet_size": 100},
        "rules": [{"name": "r", "match": {"alertname": "FleetepiHostSick"}, "actions": [{"type": "kubernetes"}]}],
    }
    cfg.update(changes)
    return cfg


def test_shipped_example_loads() -> None:
    cfg = load_config(HOOK_EXAMPLE)
    assert cfg.dry_run is True  # the example starts safe
    assert isinstance(cfg.rules[0].actions[0], KubernetesAction)
    assert cfg.breaker.max_hosts == 5 and cfg.breaker.fleet_size == 2000


@pytest.mark.parametrize(("change", "message"), [
    # A typo in a key is not silently ignored.
    ({"dryrun": True}, "dryrun: unknown key"),
    # Without a fleet size the percentage limit is meaningless.
    ({"breaker": {"max_hosts": 3}}, "fleet_size or fleet_size_url"),
    # Two token sources is ambiguous.
    ({"token_file": "/x"}, "not both"),
    # An empty match would act on every alert.
    ({"rules": [{"name": "all", "match": {}, "actions": [{"type": "slurm"}]}]}, "empty match"),
    # A taint needs an effect Kubernetes knows.
    ({"rules": [{"name": "t", "match": {"a": "b"}, "actions": [{"type": "kubernetes", "taint": "x=y:Sometimes"}]}]},
     "taint"),
    # A placeholder that does not exist is refused at load, not at 3 a.m.
    ({"rules": [{"name": "c", "match": {"a": "b"}, "actions": [{"type": "command", "quarantine": ["x", "{hostname}"]}]}]},
     "unknown placeholder"),
    # format-style attribute access is refused, not evaluated.
    ({"rules": [{"name": "c", "match": {"a": "b"}, "actions": [{"type": "command", "quarantine": ["{host.__class__}"]}]}]},
     "unknown placeholder"),
    # An unknown action type.
    ({"rules": [{"name": "c", "match": {"a": "b"}, "actions": [{"type": "shell", "cmd": "rm"}]}]}, "rules[0].actions[0].type: invalid value 'shell'"),
    ({"host_pattern": "(["}, "host_pattern"),
])
def test_bad_config_is_refused(change: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace("[", r"\[")):
        parse_config(_base(**change))


def test_token_never_empty(tmp_path) -> None:
    cfg = parse_config(_base())
    with pytest.raises(ConfigError, match="empty"):
        cfg.read_token({"T": "  "})
    assert cfg.read_token({"T": "s3cret\n"}) == "s3cret"
    f = tmp_path / "tok"
    f.write_text("abc\n")
    cfg2 = parse_config(_base(token_env=None, token_file=str(f)))
    assert cfg2.read_token({}) == "abc"
    with pytest.raises(ConfigError, match="token_file"):
        parse_config(_base(token_env=None, token_file=str(tmp_path / "missing"))).read_token({})


def test_missing_file_names_it(tmp_path) -> None:
    with pytest.raises(ConfigError, match="nope.yaml"):
        load_config(tmp_path / "nope.yaml")


def test_cli_refuses_bad_config_before_listening(tmp_path) -> None:
    from click.testing import CliRunner

    from fleetepi.cli import main

    bad = tmp_path / "hook.yaml"
    bad.write_text("rules: []\ntoken_env: X\nbreaker: {fleet_size: 10}\n")
    res = CliRunner().invoke(main, ["hook", "--config", str(bad)])
    assert res.exit_code == 2  # a config error: one line, like every command's (fleetepi.config)
    assert f"{bad}: no rules: the hook would never act" in res.output


def test_cli_has_no_token_option() -> None:
    # The token is read from a file or the environment, never from argv (ps, shell history).
    from fleetepi.hook.cli import hook_command

    opts = [o for p in hook_command.params for o in p.opts]
    assert opts == ["--config", "--listen", "--dry-run"]
