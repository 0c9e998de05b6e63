"""Fixtures of the node-agent tests: data paths, fixture sysfs trees, schemas."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from prometheus_client import CollectorRegistry

from fleetepi.contract import SCHEMA_DIR, encode

DATA = Path(__file__).parent / "data"
SCHEMAS = {json.loads(p.read_text())["$id"]: json.loads(p.read_text()) for p in SCHEMA_DIR.glob("*.schema.json")}


def assert_valid(event: object) -> dict:
    """The event as JSON, validated against the normative JSON Schema of its kind."""
    doc = json.loads(encode(event))  # type: ignore[arg-type]
    jsonschema.validate(doc, SCHEMAS[doc["schema"]], format_checker=jsonschema.FormatChecker())
    return doc


@pytest.fixture
def validate():
    """``validate(event) -> dict``: schema-checked JSON of a contract event."""
    return assert_valid


@pytest.fixture
def data_dir() -> Path:
    return DATA


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def sysfs(tmp_path: Path) -> Path:
    """A writable copy of the fixture sysfs trees (edac/, hwmon/, dmi/, cpuinfo)."""
    dst = tmp_path / "sysfs"
    shutil.copytree(DATA / "sysfs", dst)
    return dst
