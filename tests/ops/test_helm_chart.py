"""The Helm chart: lint, render (default and full values), Kubernetes schemas, and what it must say.

helm comes from scripts/install.d/helm.sh (``go install``, cached in
~/.cache/fleetepi/bin). The rendered manifests are validated offline with
kubernetes-validate (schemas of the Kubernetes release it ships). It has no
schemas for the prometheus-operator CRDs (ServiceMonitor, PrometheusRule), so
those are checked against the small schemas below, which hold the fields the
operator requires and the ones this chart sets.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "fleetepi"
FULL_VALUES = CHART / "ci" / "full-values.yaml"
RULES = REPO / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fleetepi-dashboard.json"
CACHE_BIN = Path(os.environ.get("FLEETEPI_CACHE", Path.home() / ".cache" / "fleetepi")) / "bin"

#: Kubernetes release whose schemas the manifests are checked against (the newest kubernetes-validate ships).
K8S_VERSION = kubernetes_validate.latest_version()

# Minimal schemas of the two prometheus-operator kinds (monitoring.coreos.com/v1).
SERVICE_MONITOR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "metadata": {"type": "object", "required": ["name"]},
        "spec": {
            "type": "object",
            "required": ["selector", "endpoints"],
            "properties": {
                "selector": {"type": "object", "required": ["matchLabels"]},
                "namespaceSelector": {"type": "object"},
                "endpoints": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["port"],
                        "properties": {
                            "port": {"type": "string"},
                            "path": {"type": "string"},
                            "interval": {"type": "string", "pattern": "^[0-9]+(ms|s|m|h)$"},
                            "relabelings": {"type": "array", "items": {"type": "object"}},
                        },
                    },
                },
            },
        },
    },
}
PROMETHEUS_RULE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "spec": {
            "type": "object",
            "required": ["groups"],
            "properties": {
                "groups": {
                    "type": "array",
                    "minItems": 1,
                    "items": {
                        "type": "object",
                        "required": ["name", "rules"],
                        "properties": {
                            "rules": {
                                "type": "array",
                                "items": {
                                    "type": "object",
                                    "required": ["expr"],
                                    "oneOf": [{"required": ["alert"]}, {"required": ["record"]}],
                                    "properties": {
                                        "expr": {"type": ["string", "integer"]},
                                        "for": {"type": "string"},
                                        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                                        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                    },
                                },
                            }
                        },
                    },
                }
            },
        },
    },
}
CRD_SCHEMAS = {"ServiceMonitor": SERVICE_MONITOR_SCHEMA, "PrometheusRule": PROMETHEUS_RULE_SCHEMA}


@pytest.fixture(scope="module")
def helm() -> str:
    for cand in (CACHE_BIN / "helm", shutil.which("helm")):
        if cand and Path(cand).is_file() and os.access(cand, os.X_OK):
            return str(cand)
    pytest.fail("helm not found in ~/.cache/fleetepi/bin or on PATH: run scripts/install.d/helm.sh (make services)")


def run_helm(helm: str, *args: str) -> str:
    proc = subprocess.run([helm, *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"helm {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def render(helm: str, *values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    args = ["template", "fleetepi", str(CHART), "--namespace", "monitoring"]
    for v in values:
        args += ["-f", str(v)]
    for s in sets:
        args += ["--set", s]
    return [d for d in yaml.safe_load_all(run_helm(helm, *args)) if d]


@pytest.fixture(scope="module")
def default_docs(helm: str) -> list[dict[str, Any]]:
    return render(helm)


@pytest.fixture(scope="module")
def full_docs(helm: str) -> list[dict[str, Any]]:
    return render(helm, FULL_VALUES)


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def one(docs: list[dict[str, Any]], kind: str, component: str | None = None) -> dict[str, Any]:
    found = [d for d in by_kind(docs, kind)
             if component is None or d["metadata"]["labels"].get("app.kubernetes.io/component") == component]
    assert len(found) == 1, f"expected one {kind} {component or ''}, got {len(found)}"
    return found[0]


# ---------------------------------------------------------------------- lint, render, schemas
@pytest.mark.parametrize("values", [None, FULL_VALUES], ids=["default", "full"])
def test_helm_lint_strict(helm: str, values: Path | None) -> None:
    args = ["lint", "--strict", str(CHART)] + (["-f", str(values)] if values else [])
    out = run_helm(helm, *args)
    assert "0 chart(s) failed" in out


@pytest.mark.parametrize("docs_fixture", ["default_docs", "full_docs"])
def test_rendered_manifests_match_kubernetes_schemas(docs_fixture: str, request: pytest.FixtureRequest) -> None:
    docs = request.getfixturevalue(docs_fixture)
    assert docs
    for doc in docs:
        name = f"{doc['kind']}/{doc['metadata']['name']}"
        if doc["kind"] in CRD_SCHEMAS:
            jsonschema.validate(doc, CRD_SCHEMAS[doc["kind"]])
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            pytest.fail(f"{name} is not a valid Kubernetes {K8S_VERSION} object: {exc.message} at {list(exc.path)}")


def test_default_render_has_every_component_and_no_crds(default_docs: list[dict[str, Any]]) -> None:
    kinds = sorted(d["kind"] for d in default_docs)
    for kind in ("DaemonSet", "ClusterRole", "ClusterRoleBinding", "Secret"):
        assert kind in kinds
    assert kinds.count("Deployment") == 2  # worker, hook
    assert kinds.count("Service") == 3
    # The CRD kinds need the prometheus-operator: off unless asked for.
    assert "ServiceMonitor" not in kinds and "PrometheusRule" not in kinds


def test_full_render_has_monitoring_objects(full_docs: list[dict[str, Any]]) -> None:
    assert len(by_kind(full_docs, "ServiceMonitor")) == 3
    assert len(by_kind(full_docs, "PrometheusRule")) == 1
    # existingSecret set: the chart makes no token Secret of its own.
    assert not by_kind(full_docs, "Secret")


def test_schema_rejects_unknown_and_bad_values(helm: str) -> None:
    for bad in ("bogus=1", "hook.replicas=2", "kafka.bootstrapServers=no-port", "agent.coreDir=relative/path"):
        proc = subprocess.run([helm, "template", "x", str(CHART), "--set", bad], capture_output=True, text=True,
                              timeout=60)
        assert proc.returncode != 0, f"--set {bad} was accepted"
        assert "values don't meet the specifications of the schema" in proc.stderr or "at '" in proc.stderr


# ---------------------------------------------------------------------- one rules file, one dashboard
def test_chart_files_are_identical_copies() -> None:
    """helm can only read files inside the chart: scripts/sync-helm-files.sh copies them; they must not drift."""
    for src, copy in ((RULES, CHART / "files" / "rules.yml"), (DASHBOARD, CHART / "files" / "fleetepi-dashboard.json")):
        assert copy.read_bytes() == src.read_bytes(), f"{copy} differs from {src}: run scripts/sync-helm-files.sh"


def test_prometheus_rule_groups_equal_the_rules_file(full_docs: list[dict[str, Any]]) -> None:
    rule = one(full_docs, "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(RULES.read_text())["groups"]
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def test_dashboard_configmap_is_the_generated_dashboard(full_docs: list[dict[str, Any]]) -> None:
    from fleetepi.dashboard.build import dashboard_dict

    cm = next(d for d in by_kind(full_docs, "ConfigMap") if "fleetepi-dashboard.json" in d.get("data", {}))
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert cm["metadata"]["namespace"] == "monitoring"
    assert json.loads(cm["data"]["fleetepi-dashboard.json"]) == dashboard_dict()


# ---------------------------------------------------------------------- the configs the pods read
def _config(docs: list[dict[str, Any]], key: str) -> Any:
    (cm,) = [d for d in by_kind(docs, "ConfigMap") if key in d.get("data", {})]
    return yaml.safe_load(cm["data"][key])


@pytest.mark.parametrize("docs_fixture", ["default_docs", "full_docs"])
def test_rendered_configs_pass_the_components_own_validation(docs_fixture: str, request: pytest.FixtureRequest) -> None:
    """Each ConfigMap is parsed by the loader its component runs at start-up (which refuses unknown keys)."""
    from fleetepi.agents.config import parse_config as parse_agent
    from fleetepi.detectors import DetectorConfig
    from fleetepi.hook.config import parse_config as parse_hook

    docs = request.getfixturevalue(docs_fixture)
    agent = parse_agent(_config(docs, "agent.yaml"), host="gpu-node-1")
    assert agent.output is not None and agent.output.startswith("kafka://")
    assert agent.publish.spool_dir == "/var/lib/fleetepi/spool"
    kinds = {s.kind for s in agent.sources}
    assert {"inventory", "coredir", "kmsg", "edac", "hwmon", "nvml"} <= kinds
    hook = parse_hook(_config(docs, "hook.yaml"))
    assert hook.token_file == "/etc/fleetepi-hook/token" and hook.rules
    DetectorConfig.from_mapping(_config(docs, "detectors.yaml") or {})


@pytest.mark.parametrize("docs_fixture", ["default_docs", "full_docs"])
def test_container_args_are_accepted_by_the_cli(docs_fixture: str, request: pytest.FixtureRequest) -> None:
    """Each container's args (image entrypoint: fleetepi) parse with the real click command."""
    from deploycheck import parse_command_line

    docs = request.getfixturevalue(docs_fixture)
    for kind, comp in (("DaemonSet", "agent"), ("Deployment", "worker"), ("Deployment", "hook")):
        (c,) = one(docs, kind, comp)["spec"]["template"]["spec"]["containers"]
        args = c["args"]
        assert args[0] == comp
        parse_command_line(comp, args[1:])


def test_agent_config_paths_are_mounted(full_docs: list[dict[str, Any]]) -> None:
    """Every host path the agent's config names lies under one of the pod's mounts."""
    (c,) = one(full_docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    mounts = [m["mountPath"] for m in c["volumeMounts"]]
    cfg = _config(full_docs, "agent.yaml")
    paths = [cfg["publish"]["spool_dir"]]
    for src in cfg["sources"]:
        paths += [v for k, v in src.items() if k in {"path", "root", "directory", "dmi_root", "state_path"}]
    for path in paths:
        assert any(path == m or path.startswith(m.rstrip("/") + "/") for m in mounts), f"{path} is not mounted"


# ---------------------------------------------------------------------- least privilege
def test_agent_daemonset_mounts_host_read_only(default_docs: list[dict[str, Any]]) -> None:
    ds = one(default_docs, "DaemonSet")
    pod = ds["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert pod["automountServiceAccountToken"] is False
    assert not pod.get("hostNetwork") and not pod.get("hostPID") and not pod.get("hostIPC")
    (c,) = pod["containers"]
    host_vols = {v["name"]: v["hostPath"]["path"] for v in pod["volumes"] if "hostPath" in v}
    assert set(host_vols.values()) >= {"/var/lib/systemd/coredump", "/dev/kmsg", "/sys"}
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    writable = {name for name in host_vols if not mounts[name].get("readOnly")}
    assert writable == {"state"}, f"host paths mounted writable: {writable}"
    sc = c["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert sorted(sc["capabilities"]["add"]) == ["DAC_READ_SEARCH", "SYSLOG"]
    env = {e["name"]: e for e in c["env"]}
    assert env["FLEETEPI_HOST"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_agent_without_kmsg_needs_no_syslog(helm: str) -> None:
    docs = render(helm, sets=("agent.kmsg.enabled=false",))
    (c,) = one(docs, "DaemonSet")["spec"]["template"]["spec"]["containers"]
    assert c["securityContext"]["capabilities"]["add"] == ["DAC_READ_SEARCH"]
    assert all(m["mountPath"] != "/dev/kmsg" for m in c["volumeMounts"])


def test_hook_cluster_role_can_only_get_and_patch_nodes(default_docs: list[dict[str, Any]]) -> None:
    role = one(default_docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}]
    binding = one(default_docs, "ClusterRoleBinding")
    (subject,) = binding["subjects"]
    hook = one(default_docs, "Deployment", "hook")
    assert subject["name"] == hook["spec"]["template"]["spec"]["serviceAccountName"]
    assert subject["namespace"] == "monitoring"
    # Nobody else gets an API token.
    for kind, comp in (("Deployment", "worker"), ("DaemonSet", "agent")):
        assert one(default_docs, kind, comp)["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    # Safe by default: the hook only logs what it would do.
    cm = next(d for d in by_kind(default_docs, "ConfigMap") if "hook.yaml" in d.get("data", {}))
    assert yaml.safe_load(cm["data"]["hook.yaml"])["dry_run"] is True


def test_worker_and_hook_run_non_root_read_only(full_docs: list[dict[str, Any]]) -> None:
    for comp in ("worker", "hook"):
        pod = one(full_docs, "Deployment", comp)["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        (c,) = pod["containers"]
        assert c["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                        "capabilities": {"drop": ["ALL"]}}
    worker = one(full_docs, "Deployment", "worker")
    assert worker["spec"]["replicas"] == 6
    args = worker["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[args.index("--broker") + 1] == "kafka://kafka-0.kafka:9093,kafka-1.kafka:9093"


def test_service_monitors_pin_the_job_names_the_rules_use(full_docs: list[dict[str, Any]]) -> None:
    jobs = set()
    for sm in by_kind(full_docs, "ServiceMonitor"):
        for ep in sm["spec"]["endpoints"]:
            jobs |= {r["replacement"] for r in ep["relabelings"] if r.get("targetLabel") == "job"}
    assert jobs == {"fleetepi-agent", "fleetepi-worker", "fleetepi-hook"}
    # FleetepiWorkerDown selects the workers' job with a regex: the pinned name must match it.
    groups = yaml.safe_load(RULES.read_text())["groups"]
    (expr,) = [r["expr"] for g in groups for r in g["rules"] if r.get("alert") == "FleetepiWorkerDown"]
    m = re.search(r'job=~"([^"]+)"', expr)
    assert m and re.fullmatch(m.group(1), "fleetepi-worker"), expr


# ---------------------------------------------------------------------- documentation
def _leaf_keys(values: dict[str, Any], prefix: str = "") -> list[str]:
    keys = []
    for k, v in values.items():
        path = f"{prefix}{k}"
        # Free-form maps (configs, selectors) are documented as a whole.
        if isinstance(v, dict) and v and k not in {"config", "nodeSelector", "resources", "podSecurityContext",
                                                    "tolerations", "detectors"}:
            keys.extend(_leaf_keys(v, path + "."))
        else:
            keys.append(path)
    return keys


def test_readme_documents_every_value() -> None:
    readme = (CHART / "README.md").read_text()
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    missing = [k for k in _leaf_keys(values) if f"`{k}`" not in readme]
    assert not missing, f"values missing from helm/fleetepi/README.md: {missing}"


def test_full_values_sets_every_value() -> None:
    """ci/full-values.yaml exercises every key of values.yaml (so the full render covers every branch)."""
    full = yaml.safe_load(FULL_VALUES.read_text())

    def has(path: str) -> bool:
        node: Any = full
        for part in path.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    missing = [k for k in _leaf_keys(yaml.safe_load((CHART / "values.yaml").read_text())) if not has(k)]
    assert not missing, f"not in ci/full-values.yaml: {missing}"
