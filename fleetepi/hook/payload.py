"""Alertmanager webhook payload, version "4", as typed structs.

Decoding *is* validation: msgspec checks the version, the field types and
that every alert has a status and a fingerprint in one pass, and its error
("Expected `str`, got `int` - at `$.alerts[0].fingerprint`") becomes the
reason of the HTTP 400, so whoever misconfigured the sender sees where.

Field names follow Alertmanager's JSON (camelCase) on purpose: this module
is the one place that speaks the sender's dialect.
"""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec
from msgspec import Meta, Struct

from fleetepi.hook.exceptions import InvalidPayload

#: Largest body the hook reads; Alertmanager sends a few KiB per group.
MAX_BODY_BYTES = 1 << 20

Status = Literal["firing", "resolved"]


class WebhookAlert(Struct, kw_only=True, rename="camel"):
    """One alert of a notification; ``fingerprint`` is stable for a label set."""

    status: Status
    labels: dict[str, str]
    annotations: dict[str, str] = {}
    starts_at: str = ""
    ends_at: str = ""
    generator_url: Annotated[str, Meta(max_length=8192)] = msgspec.field(default="", name="generatorURL")
    fingerprint: Annotated[str, Meta(min_length=1, max_length=128)]

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")


class WebhookPayload(Struct, kw_only=True, rename="camel"):
    """One notification: a group of alerts sent to one receiver."""

    version: Literal["4"]
    status: Status
    alerts: list[WebhookAlert]
    receiver: str = ""
    group_key: str = ""
    truncated_alerts: int = 0
    group_labels: dict[str, str] = {}
    common_labels: dict[str, str] = {}
    common_annotations: dict[str, str] = {}
    external_url: str = msgspec.field(default="", name="externalURL")


_decoder = msgspec.json.Decoder(WebhookPayload)


def decode_payload(raw: bytes) -> WebhookPayload:
    """Parse and validate a webhook body.

    :raises InvalidPayload: with the reason to send back in the 400.
    """
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidPayload(f"body of {len(raw)} bytes exceeds {MAX_BODY_BYTES}")
    try:
        return _decoder.decode(raw)
    except msgspec.ValidationError as exc:
        raise InvalidPayload(f"not an Alertmanager v4 payload: {exc}") from None
    except msgspec.DecodeError as exc:
        raise InvalidPayload(f"malformed JSON: {exc}") from None
    except UnicodeDecodeError as exc:  # msgspec lets invalid UTF-8 inside strings through as this
        raise InvalidPayload(f"malformed JSON: not valid UTF-8 at byte {exc.start}") from None
    except RecursionError:  # thousands of nested arrays in an unknown field
        raise InvalidPayload("malformed JSON: nested deeper than the decoder's recursion limit") from None


__all__ = ["MAX_BODY_BYTES", "WebhookAlert", "WebhookPayload", "decode_payload"]
