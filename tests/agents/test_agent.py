"""Config validation, the source registry, the agent loop and the `fleetepi agent` command."""

from __future__ import annotations

import json
import logging

import pytest
import yaml
from click.testing import CliRunner

from fleetepi.agents.agent import Agent
from fleetepi.agents.config import load_config, parse_config
from fleetepi.agents.exceptions import AgentConfigError, SourceUnavailable
from fleetepi.agents.publish import JsonlPublisher
from fleetepi.agents.sources import registry as reg
from fleetepi.contract import decode_event

XID_LINE = "[  170.053881] NVRM: Xid (PCI:0000:01:00): 31, Ch 00000013, engmask 00000101, intr 10000000"


def fixture_config(sysfs, tmp_path, **extra) -> dict:
    log = tmp_path / "kern.log"
    log.write_text("\n".join([XID_LINE] * 5 + ["[ 1.0] NVRM: GPU at PCI:0000:01:00: GPU-x"]) + "\n")
    cfg = {
        "host": "gpu-a-001",
        "labels": {"rack": "r17", "cluster": "train-a"},
        "sources": [
            {"kind": "inventory", "dmi_root": str(sysfs / "dmi" / "id"), "cpuinfo": str(sysfs / "cpuinfo"), "nvml": None},
            {"kind": "logfile", "path": str(log)},
            {"kind": "edac", "root": str(sysfs / "edac" / "mc")},
            {"kind": "hwmon", "root": str(sysfs / "hwmon")},
            {"kind": "edac", "name": "edac-missing", "root": str(tmp_path / "no-edac")},
        ],
    }
    cfg.update(extra)
    return cfg


class TestConfig:
    @pytest.mark.parametrize(("data", "message"), [
        ({"colour": "red"}, "agent config: colour: unknown key"),
        ({"publish": {"spool_max_bytes": 0}}, "spool_max_bytes"),
        ({"publish": {"spool_dirr": "/x"}}, "agent config: publish.spool_dirr: unknown key"),
        ({"sources": [{"kind": "telepathy"}]}, "sources[0]: unknown source kind 'telepathy'"),
        ({"sources": [{"name": "x"}]}, "sources[0]: 'kind' is required"),
        ({"sources": [{"kind": "kmsg", "interval_s": 0}]}, "interval_s must be a number > 0"),
        ({"sources": [{"kind": "edac"}, {"kind": "edac"}]}, "duplicate source name(s) edac"),
        ({"labels": {"rack": ["r1"]}}, "labels[...]: expected str, got array"),
        ({"metrics": {"port": 70000}}, "port"),
    ])
    def test_bad_config_fails_at_startup_with_the_key(self, data, message):
        with pytest.raises(AgentConfigError) as err:
            parse_config(data)
        assert message in str(err.value)

    def test_defaults_and_frozen(self):
        cfg = parse_config({"sources": [{"kind": "kmsg"}, {"kind": "edac"}]}, host="h1")
        assert cfg.host == "h1"
        assert [(s.kind, s.interval_s) for s in cfg.sources] == [("kmsg", 1.0), ("edac", 60.0)]
        with pytest.raises(AttributeError):
            cfg.host = "other"  # type: ignore[misc]

    def test_secrets_from_file_and_masked(self, tmp_path):
        (tmp_path / "pw").write_text("s3cret\n")
        cfg = parse_config({"publish": {"sasl_mechanism": "PLAIN", "sasl_plain_username": "agent",
                                        "sasl_plain_password_file": str(tmp_path / "pw")}})
        assert cfg.publish.kafka_options()["sasl_plain_password"] == "s3cret"
        masked = parse_config({"publish": {"sasl_plain_password": "s3cret"}}).redacted()
        assert masked["publish"]["sasl_plain_password"] == "***"

    def test_shipped_example_config_is_valid(self):
        from fleetepi.agents.cli import EXAMPLE_CONFIG

        cfg = load_config(EXAMPLE_CONFIG, host="h")
        assert {s.kind for s in cfg.sources} == {"inventory", "kmsg", "edac", "nvml", "hwmon", "applog"}
        assert cfg.labels["rack"] == "r17"

    @pytest.mark.parametrize(("entry", "message"), [
        # an unknown option names the entry, the option and what the kind takes
        ({"kind": "edac", "rooot": "/x"}, "sources[1]: unknown option `rooot` for source kind 'edac'; it takes: per_dimm, root"),
        # a wrong type names the field path
        ({"kind": "coredir", "max_per_poll": "two"}, "sources[1].max_per_poll: Expected `int`, got `str` (source kind 'coredir')"),
        # a value out of range
        ({"kind": "coredir", "max_per_poll": 0}, "sources[1].max_per_poll: Expected `int` >= 1"),
        # a required option left out
        ({"kind": "logfile"}, "sources[1]: Object missing required field `path` (source kind 'logfile')"),
        # a literal option
        ({"kind": "nvml", "ecc_counter": "forever"}, "sources[1].ecc_counter: Invalid enum value 'forever' (source kind 'nvml')"),
        ({"kind": "applog", "paths": "/var/log/*.log"}, "sources[1].paths: Expected `array`, got `str`"),
    ])
    def test_bad_source_options_fail_at_parse_time_with_the_field_path(self, entry, message):
        with pytest.raises(AgentConfigError) as err:
            parse_config({"sources": [{"kind": "kmsg"}, entry]}, host="h")
        assert message in str(err.value)

    def test_options_are_typed_structs(self):
        cfg = parse_config({"sources": [{"kind": "edac", "per_dimm": False}]}, host="h")
        (sc,) = cfg.sources
        assert type(sc.options).__name__ == "EdacOptions" and sc.options.per_dimm is False
        assert cfg.redacted()["sources"][0]["options"] == {"root": "/sys/devices/system/edac/mc", "per_dimm": False}


class TestRegistry:
    def test_every_builtin_kind_resolves_to_a_class_and_an_options_struct(self):
        import msgspec

        for kind in reg.BUILTIN:
            spec = reg.lookup(kind)
            assert spec.name == kind and spec.cls.kind == kind
            assert issubclass(spec.options, msgspec.Struct) and callable(spec.cls.from_options)

    def test_agent_builds_a_coredir_source_from_config(self, tmp_path, registry):
        cfg = parse_config({"sources": [{"kind": "coredir", "directory": str(tmp_path), "interval_s": 5}]}, host="h")
        agent = Agent(cfg, JsonlPublisher(tmp_path / "o.jsonl"), registry=registry)
        (slot,) = agent.slots
        assert slot.source is not None and slot.source.kind == "coredir" and slot.interval_ms == 5000
        assert registry.get_sample_value("fleetepi_agent_source_up", {"source": "coredir"}) == 1
        agent.close()

    def test_third_party_registration(self):
        import msgspec

        class DummyOptions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
            flavour: str = "plain"

        @reg.register("test-dummy", DummyOptions)
        class Dummy:
            kind = "test-dummy"

            def __init__(self, host: str, flavour: str) -> None:
                self.host, self.flavour = host, flavour

            @classmethod
            def from_options(cls, options, ctx):
                return cls(ctx.host, options.flavour)

            def poll(self, now_ms):
                return []

            def close(self):
                pass

        src = reg.create("test-dummy", {"flavour": "spicy"}, reg.SourceContext(host="h"))
        assert (src.host, src.flavour) == ("h", "spicy")
        with pytest.raises(AgentConfigError, match=r"test-dummy.*unknown option `colour`"):
            reg.create("test-dummy", {"colour": "red"}, reg.SourceContext(host="h"))
        with pytest.raises(ValueError, match="already registered"):
            reg.register("test-dummy", DummyOptions)(type("Other", (), {"from_options": classmethod(lambda c, o, x: None)}))
        with pytest.raises(TypeError, match="from_options"):
            reg.register("test-other", DummyOptions)(type("NoFactory", (), {}))
        with pytest.raises(TypeError, match="msgspec.Struct"):
            reg.register("test-other", dict)  # type: ignore[arg-type]


class TestAgent:
    def test_sources_off_say_so_once_and_agent_goes_on(self, sysfs, tmp_path, registry, caplog, validate):
        caplog.set_level(logging.WARNING, logger="fleetepi.agents.agent")
        cfg = parse_config(fixture_config(sysfs, tmp_path, dedup_interval_s=60))
        out = tmp_path / "events.jsonl"
        agent = Agent(cfg, JsonlPublisher(out), registry=registry)
        for t in range(5):
            agent.tick(1_700_000_000_000 + t * 61_000)
        agent.drain(1_700_000_400_000)
        agent.close()
        offs = [r for r in caplog.records if "is off" in r.getMessage()]
        assert len(offs) == 1 and "edac-missing" in offs[0].getMessage() and "no EDAC driver" in offs[0].getMessage()
        assert registry.get_sample_value("fleetepi_agent_source_up", {"source": "edac-missing"}) == 0
        assert registry.get_sample_value("fleetepi_agent_source_up", {"source": "logfile"}) == 1
        assert registry.get_sample_value("fleetepi_agent_log_lines_total", {"outcome": "event"}) == 5
        assert registry.get_sample_value("fleetepi_agent_log_lines_total", {"outcome": "nvrm_info"}) == 1
        assert registry.get_sample_value("fleetepi_agent_log_lines_total", {"outcome": "sxid_detail"}) == 0  # exists at 0
        evs = [decode_event(line) for line in out.read_bytes().splitlines()]
        for e in evs:
            validate(e)
        hosts = [e for e in evs if type(e).__name__ == "Host"]
        assert len(hosts) == 1 and hosts[0].attributes["rack"] == "r17" and hosts[0].attributes["bios"] == "2.4"
        xids = [e for e in evs if getattr(e, "kind", None) == "xid"]
        assert sum(e.n for e in xids) == 5 and len(xids) == 2  # first at once + 4 counted
        assert all(e.host == "gpu-a-001" for e in evs)

    def test_source_that_raises_is_counted_not_fatal(self, tmp_path, registry):
        class Broken:
            kind = "broken"
            calls = 0

            def poll(self, now_ms):
                self.calls += 1
                raise RuntimeError("odd sysfs")

            def close(self):
                pass

        class Gone:
            kind = "gone"

            def poll(self, now_ms):
                raise SourceUnavailable("device went away")

            def close(self):
                pass

        broken = Broken()
        agent = Agent(parse_config({}, host="h"), JsonlPublisher(tmp_path / "o.jsonl"), registry=registry,
                      sources={"broken": broken, "gone": Gone()})
        for t in range(3):
            agent.tick(t * 2000)
        assert broken.calls == 3
        assert registry.get_sample_value("fleetepi_agent_source_errors_total", {"source": "broken"}) == 3
        assert registry.get_sample_value("fleetepi_agent_source_up", {"source": "gone"}) == 0


class TestCli:
    def test_once_to_a_file(self, sysfs, tmp_path, validate):
        from fleetepi.agents.cli import agent_command

        cfg = tmp_path / "agent.yaml"
        cfg.write_text(yaml.safe_dump(fixture_config(sysfs, tmp_path)))
        out = tmp_path / "out.jsonl"
        res = CliRunner().invoke(agent_command, ["--config", str(cfg), "--output", str(out), "--once", "--host", "cli-host"])
        assert res.exit_code == 0, res.output
        assert "off: edac-missing (no EDAC driver loaded" in res.output
        evs = [validate(decode_event(line)) for line in out.read_bytes().splitlines()]
        assert {e["host"] for e in evs} == {"cli-host"}
        assert {e["schema"] for e in evs} == {"fleetepi.host/v1", "fleetepi.telemetry/v1"}
        assert sum(e.get("count", 1) for e in evs if e.get("kind") == "xid") == 5

    def test_bad_config_is_a_clean_error(self, tmp_path):
        from fleetepi.agents.cli import agent_command

        cfg = tmp_path / "agent.yaml"
        cfg.write_text("sources:\n  - kind: telepathy\n")
        res = CliRunner().invoke(agent_command, ["--config", str(cfg), "--output", "-", "--once"])
        assert res.exit_code == 2  # a config error: one line naming file and field (fleetepi.config)
        assert f"{cfg}: sources[0]: unknown source kind 'telepathy'" in res.output

    def test_help_teaches(self):
        from fleetepi.cli import main

        res = CliRunner().invoke(main, ["agent", "--help"])
        assert res.exit_code == 0
        for word in ("kafka://", "--once", "inventory", "nvml", "Example config", "spool"):
            assert word in res.output

    def test_print_config_masks_secrets(self, tmp_path):
        from fleetepi.agents.cli import agent_command

        cfg = tmp_path / "agent.yaml"
        cfg.write_text("publish:\n  sasl_plain_password: hunter2\n")
        res = CliRunner().invoke(agent_command, ["--config", str(cfg), "--print-config", "--host", "h"])
        assert res.exit_code == 0 and "hunter2" not in res.output and "***" in res.output
        assert json.dumps(yaml.safe_load(res.output)["host"]) == '"h"'
