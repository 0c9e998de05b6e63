"""fleetepi installs as one import namespace, ``fleetepi.*``.

The repository keeps agents/, detectors/ and stream/ at its top (the layout
the README promises) and pyproject maps them to fleetepi.agents,
fleetepi.detectors and fleetepi.stream. These tests hold the mapping to the
folders, and show that the built wheel puts nothing else at the top of
site-packages: a package named ``agents`` (the import name of a widely used
agents SDK) installed beside it still imports, and so does fleetepi.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _package_of(folder: Path, package_dir: dict[str, str]) -> str:
    rel = folder.relative_to(ROOT)
    for pkg, where in sorted(package_dir.items(), key=lambda kv: -len(kv[1])):
        if rel == Path(where) or Path(where) in rel.parents:
            return ".".join([pkg, *rel.relative_to(where).parts])
    raise AssertionError(f"{rel} is in no mapped folder")


def test_every_package_folder_is_installed_under_fleetepi() -> None:
    cfg = _setuptools()
    package_dir = cfg["package-dir"]
    assert all(name == "fleetepi" or name.startswith("fleetepi.") for name in package_dir)
    folders = [p.parent for top in package_dir.values() for p in (ROOT / top).rglob("__init__.py")
               if "__pycache__" not in p.parts]
    expected = sorted({_package_of(f, package_dir) for f in folders})
    # folders of data only are listed as packages too (setuptools ships them without a warning), each with
    # its files in package-data
    data = [p for p in cfg["packages"] if p not in expected]
    assert sorted(set(cfg["packages"]) - set(data)) == expected, "pyproject packages and the folders disagree"
    assert data and all(p in cfg["package-data"] for p in data), data


@pytest.mark.integration
def test_wheel_installs_beside_a_package_named_agents(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist),
                    str(ROOT)], check=True, cwd=tmp_path, timeout=600)
    (wheel,) = dist.glob("fleetepi-*.whl")
    tops = {name.split("/", 1)[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in tops if not t.endswith((".dist-info", ".data"))} == {"fleetepi"}
    assert "fleetepi/agents/rules/kernel-log/rules.json" in zipfile.ZipFile(wheel).namelist()

    dummy = tmp_path / "dummy" / "agents"
    dummy.mkdir(parents=True)
    (dummy / "__init__.py").write_text("WHO = 'the other agents package'\n")
    (dummy.parent / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "agents"\nversion = "9.9"\n[tool.setuptools]\npackages = ["agents"]\n')
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # Dependencies from this interpreter's own environment (no second download): its
    # site-packages is put behind the fresh venv's, which holds only the two wheels.
    subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel),
                    str(dummy.parent)], check=True, cwd=tmp_path, timeout=600)
    site = [p for p in sys.path if p.endswith("site-packages")]
    env = {"PYTHONPATH": ":".join(site), "PATH": f"{venv / 'bin'}:/usr/bin:/bin"}
    probe = ("import agents, fleetepi.agents.core, fleetepi.detectors, fleetepi.contract; "
             "print(agents.WHO); print(fleetepi.agents.__file__)")
    out = subprocess.run([str(py), "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path,
                         env=env, timeout=120).stdout.splitlines()
    assert out[0] == "the other agents package"
    assert out[1].startswith(str(venv)) and out[1].endswith("fleetepi/agents/__init__.py")
    helped = subprocess.run([str(venv / "bin" / "fleetepi"), "--help"], capture_output=True, text=True,
                            cwd=tmp_path, env=env, timeout=120)
    assert helped.returncode == 0, helped.stderr
    assert "Usage: fleetepi" in helped.stdout and "replay" in helped.stdout
    # development tools stay out of the wheel: the local broker says it needs a source checkout
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if "devbroker" in n]
    dev = subprocess.run([str(venv / "bin" / "fleetepi"), "dev", "kafka", "status"], capture_output=True, text=True,
                         cwd=tmp_path, env=env, timeout=120)
    assert dev.returncode == 1 and "source checkout" in dev.stderr and "Traceback" not in dev.stderr, dev.stderr
