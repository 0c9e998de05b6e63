"""Errors of the quarantine hook, under the one root.

::

    FleetepiError
     ├── ConfigError (fleetepi.exceptions)   bad hook config: exits at start-up
     └── HookError
          ├── InvalidPayload                 a webhook body that is not Alertmanager v4 (HTTP 400)
          └── InvalidHost                    a host label that fails the host-name pattern
"""

from __future__ import annotations

from fleetepi.exceptions import FleetepiError


class HookError(FleetepiError):
    """Root of the errors the hook raises while serving."""


class InvalidPayload(HookError):
    """The body is not an Alertmanager webhook v4 payload; the message is the HTTP 400 reason."""


class InvalidHost(HookError):
    """A host name that could act as an option or a second command: never passed to a tool."""


__all__ = ["HookError", "InvalidHost", "InvalidPayload"]
