"""Errors of the node agent (core dumps have their own in ``fleetepi.agents.core.exceptions``).

::

    FleetepiError
     ├── ConfigError
     │    ├── AgentConfigError      the agent's YAML config is invalid (path + reason)
     │    └── RuleFileError         a rule or catalog file has a bad line (file:line)
     ├── SourceUnavailable          a source is off on this host; said once, then skipped
     │    └── NvmlUnavailable       no NVIDIA driver / no nvidia-ml-py / no GPU
     └── PublishError
          ├── SpoolCorrupt          a spool segment cannot be read back (the bad tail is cut off)
          └── SpoolFull             the spool cap is hit; the event is dropped and counted

kafka-python's errors are translated into ``PublishError`` in
``fleetepi.agents.publish.kafka`` and nowhere else.
"""

from __future__ import annotations

from fleetepi.exceptions import ConfigError, PublishError, SourceUnavailable


class AgentConfigError(ConfigError):
    """The agent config file is invalid; the agent exits at start-up."""


class RuleFileError(ConfigError):
    """A line of a rule or catalog file is invalid.

    :param path: the file.
    :param line: 1-based line number (0 when the whole file is at fault).
    """

    def __init__(self, path: str, line: int, reason: str) -> None:
        super().__init__(f"{path}:{line}: {reason}")
        self.path = path
        self.line = line
        self.reason = reason


class NvmlUnavailable(SourceUnavailable):
    """NVML cannot be used on this host (library, driver or GPU missing)."""


class SpoolCorrupt(PublishError):
    """A spool record failed its checksum: the tail from there on is cut off, loudly."""


class SpoolFull(PublishError):
    """The spool cap is hit: the event is dropped, logged and counted."""


__all__ = ["AgentConfigError", "NvmlUnavailable", "RuleFileError", "SpoolCorrupt", "SpoolFull"]
