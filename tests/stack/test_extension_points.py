"""The declared ways to add things work as documented (docs/extending.md): a node-pool backend (with a cloud
node group, a resource of another provider), a storage backend, a chart component, an admission rule and an
alert are each one new module plus one registry entry (plus, for a component, one row in the compatibility
matrix). The test makes exactly those edits in a copy of the package, then type-checks it and renders a stack
that uses them all."""

from __future__ import annotations

import difflib
import filecmp
import json
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

from tests.helpers import ROOT
from tests.tenancy import cel_admission

FAKE_POOL = '''"""A node-pool backend that exists only in a test: nodes are declared, never created."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.cloud import AWS, CloudResource
from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.objects import ManagedObject
from trainer_infra.nodepools.backend import BackendDefaults, NodePoolBackend
from trainer_infra.nodepools.cloud import RefConfig, provider, ref
from trainer_infra.nodepools.labels import HOSTNAME, Taint
from trainer_infra.nodepools.model import NodePool, ResolvedPool


class FakePool(StrictModel):
    nodes: int


class FakeCluster(StrictModel):
    region: str
    cluster_name: RefConfig


class FakeBackend(BackendDefaults):
    name = "fake"
    settings_model = FakePool
    settings_hint = "fake: {nodes: 2}"
    cluster_model = FakeCluster

    def default_topology(self, pool: NodePool, settings: Any) -> tuple[str, ...]:
        return (HOSTNAME,)

    def extra_taints(self) -> tuple[Taint, ...]:
        return (Taint(key="example.com/fake", effect="NoSchedule"),)

    def node_count(self, pool: NodePool, settings: Any) -> int:
        return settings.nodes if isinstance(settings, FakePool) else 0

    def checks(self, pool: ResolvedPool) -> list[ConfigIssue]:
        return [] if pool.node_count <= 8 else [ConfigIssue(f"{pool.at}.fake.nodes", "at most 8 fake nodes")]

    def objects(self, pool: ResolvedPool) -> list[ManagedObject]:
        data = {"nodes": str(pool.node_count)}
        metadata = {"name": f"fake-{pool.name}", "namespace": "default"}
        return [ManagedObject({"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata, "data": data})]

    def resources(self, pool: ResolvedPool, cluster: Any) -> list[CloudResource]:
        """A cloud node group, as a backend that creates nodes would declare it."""
        c: FakeCluster = cluster
        size = {"desired_size": pool.node_count, "min_size": 0, "max_size": pool.node_count}
        args: dict[str, Any] = {"cluster_name": ref(c.cluster_name), "node_role_arn": "arn:aws:iam::1:role/n"}
        args.update(scaling_config=size, subnet_ids=["subnet-1"])
        aws = provider(AWS, self.name, {"region": c.region})
        return [CloudResource(aws, "eks", "NodeGroup", "aws:eks/nodeGroup:NodeGroup", f"nodegroup-{pool.name}", args)]


BACKEND: NodePoolBackend = FakeBackend()
'''

FAKE_STORAGE = '''"""A storage backend that exists only in a test."""

from __future__ import annotations

from typing import Any

from trainer_infra.core.model import StrictModel
from trainer_infra.storage.backend import StorageBackend, StorageDefaults


class FakeFs(StrictModel):
    tier: str


class FakeFsBackend(StorageDefaults):
    name = "fakefs"
    settings_model = FakeFs

    def provisioner(self, settings: Any) -> str | None:
        return "fake.csi.example.com"

    def parameters(self, settings: Any) -> dict[str, str]:
        return {"tier": settings.tier}


BACKEND: StorageBackend = FakeFsBackend()
'''

FAKE_COMPONENT = '''"""A chart component that exists only in a test."""

from __future__ import annotations

from typing import Any

from trainer_infra.components.component import ChartComponent, Controller, ResolvedRelease, StackView
from trainer_infra.components.settings import ControllerConfig


class FakeChartConfig(ControllerConfig):
    """A controller installed from a test chart."""


class FakeChart(Controller):
    name = "fakechart"
    settings_model = FakeChartConfig
    after = ("kueue",)

    def values(self, stack: StackView, release: ResolvedRelease) -> dict[str, Any]:
        return {"image": release.image("manager")}

    def probes(self, release: ResolvedRelease, mirror: str | None) -> tuple[dict[str, Any], ...]:
        return ()


COMPONENT: ChartComponent = FakeChart()
'''

FAKE_ADMISSION_RULE = '''"""An admission rule that exists only in a test: no pod may call itself mallory."""

from __future__ import annotations

from trainer_infra.admission.model import AdmissionRule, AdmissionSettings, AdmittedKind


def _not_mallory(kind: AdmittedKind, settings: AdmissionSettings) -> str:
    return "!has(s.hostname) || s.hostname != 'mallory'"


RULE = AdmissionRule("notMallory", ("Pod", "JobSet"), "calls a pod mallory", _not_mallory, per_pod=True)
'''

FAKE_ALERT = '''"""An alert that exists only in a test."""

from __future__ import annotations

from typing import Any

from trainer_infra.observability.alerts.model import Alert, AlertBase, alert
from trainer_infra.observability.facts import PlatformFacts


class FakeAlertSettings(AlertBase):
    """Too many fakes."""

    threshold: int = 5


def _fakes(facts: PlatformFacts, fake: FakeAlertSettings) -> list[dict[str, Any]]:
    return [alert("TrainerPlatformFakes", f"fakes > {fake.threshold}", fake.severity, "fakes", "too many", None)]


ALERT = Alert("fakes", "fakes", FakeAlertSettings, _fakes)
'''

MATRIX_ROW = """  fakechart:
    chart: oci://example.com/charts/fakechart
    default: 1.0.0
    namespace: fakechart-system
    releases:
      - version: 1.0.0
        chartVersion: 1.0.0
        minKubernetes: "1.29"
        images: {manager: example.com/fakechart:v1.0.0}
        sources: [tests/stack/test_extension_points.py]
"""


def _register(path: Path, module: str, entry: str) -> None:
    """The registry edit a contributor makes: name the module in the import and list its entry last."""
    text = path.read_text()
    head, sep, tail = text.partition("Registry(\n")
    package = ".".join(path.parent.parts[path.parts.index("trainer_infra") :])
    # the area's one import of its modules, on one line or wrapped in parentheses by the formatter
    found = re.findall(rf"^from {re.escape(package)} import (\([^)]*\)|[^\n]*)$", head, re.MULTILINE)
    assert len(found) == 1, f"{path}: one import of the area's modules"
    names = [n.strip() for n in found[0].strip("()").replace("\n", " ").split(",") if n.strip()]
    head = head.replace(
        f"from {package} import {found[0]}", f"from {package} import {', '.join(sorted([*names, module]))}"
    )
    body, close, rest = tail.partition("\n)")
    path.write_text(f"{head}{sep}{body}\n    {module}.{entry},{close}{rest}")


def _mypy_config_without_sdks(folder: Path) -> Path:
    """The project's mypy settings as an ini file, with the cloud SDKs' modules not followed (their names are Any)."""
    settings = dict(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"])
    overrides = settings.pop("overrides", [])
    overrides.append({"module": ["pulumi_gcp.*", "pulumi_aws.*", "pulumi_azure_native.*"], "follow_imports": "skip"})

    def ini(values: dict[str, Any]) -> list[str]:
        text = {
            k: ", ".join(v) if isinstance(v, list) else str(v).lower() if isinstance(v, bool) else v
            for k, v in values.items()
        }
        return [f"{k} = {v}" for k, v in text.items()]

    lines = ["[mypy]", *ini(settings)]
    for section in overrides:
        lines += [f"[mypy-{','.join(section.pop('module'))}]", *ini(section)]
    config = folder / "mypy.ini"
    config.write_text("\n".join(lines) + "\n")
    return config


def _changed_lines(before: Path, after: Path) -> list[str]:
    diff = difflib.unified_diff(before.read_text().splitlines(), after.read_text().splitlines(), n=0)
    return [line for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---"))]


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_a_backend_a_storage_backend_and_a_component_are_one_module_and_one_entry_each(tmp_path: Path) -> None:
    pkg = tmp_path / "trainer_infra"
    shutil.copytree(ROOT / "trainer_infra", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "runtimes", tmp_path / "runtimes")
    (pkg / "nodepools" / "fake.py").write_text(FAKE_POOL)
    (pkg / "storage" / "fakefs.py").write_text(FAKE_STORAGE)
    (pkg / "components" / "fakechart.py").write_text(FAKE_COMPONENT)
    (pkg / "tenancy" / "admission" / "fake.py").write_text(FAKE_ADMISSION_RULE)
    (pkg / "observability" / "alerts" / "fake.py").write_text(FAKE_ALERT)
    _register(pkg / "nodepools" / "registry.py", "fake", "BACKEND")
    _register(pkg / "storage" / "registry.py", "fakefs", "BACKEND")
    _register(pkg / "components" / "registry.py", "fakechart", "COMPONENT")
    _register(pkg / "tenancy" / "admission" / "registry.py", "fake", "RULE")
    _register(pkg / "observability" / "alerts" / "registry.py", "fake", "ALERT")
    matrix = pkg / "versions" / "matrix.yaml"
    matrix.write_text(matrix.read_text().replace("components:\n", "components:\n" + MATRIX_ROW, 1))

    # Only new files, plus the registry entries (and the matrix row) in existing ones.
    compare = filecmp.dircmp(ROOT / "trainer_infra", pkg, ignore=["__pycache__"])
    changed: dict[str, list[str]] = {}

    def walk(cmp: filecmp.dircmp[str], prefix: str) -> None:
        for name in cmp.diff_files:
            changed[prefix + name] = _changed_lines(Path(cmp.left) / name, Path(cmp.right) / name)
        assert not cmp.left_only, f"removed: {cmp.left_only}"
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(compare, "")
    assert sorted(changed) == [
        "components/registry.py",
        "nodepools/registry.py",
        "observability/alerts/registry.py",
        "storage/registry.py",
        "tenancy/admission/registry.py",
        "versions/matrix.yaml",
    ]
    for name, lines in changed.items():
        if name.endswith("registry.py"):  # the import line names the module; one entry line lists it
            assert [line for line in lines if line.startswith("+") and "import" not in line] == [
                line for line in lines if line.startswith("+    ")
            ]
            assert len([line for line in lines if line.startswith("+    ")]) == 1, lines

    # The Protocols are what mypy checks the new modules against. The cloud SDKs are skipped here (`make typecheck`
    # checks the backends against them): cold, their hundreds of thousands of lines take minutes.
    typed = _run(["-m", "mypy", "--config-file", str(_mypy_config_without_sdks(tmp_path)), "trainer_infra"], tmp_path)
    assert typed.returncode == 0, typed.stdout[-2000:]

    stack: dict[str, Any] = {
        "config": {
            "trainer-platform:kubernetes": {"version": "1.34"},
            "trainer-platform:nodePools": [
                {"name": "sim", "backend": "fake", "fake": {"nodes": 2}, "node": {"cpu": "8", "memory": "32Gi"}}
            ],
            "trainer-platform:cloud": {"fake": {"region": "eu-west-1", "clusterName": "example"}},
            "trainer-platform:storage": {"fakefs": {"tier": "gold"}},
            "trainer-platform:teams": [{"name": "alpha", "quota": {"sim": {"cpu": "8"}}}],
            "trainer-platform:components": {"fakechart": {"replicas": 2}},
            "trainer-platform:observability": {"enabled": True, "alerts": {"fakes": {"threshold": 7}}},
        }
    }
    config = tmp_path / "Pulumi.fake.yaml"
    config.write_text(yaml.safe_dump(stack))
    out = tmp_path / "out"
    done = _run(["-m", "trainer_infra", "render", "--config-file", str(config), "--out", str(out)], tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    manifests = list(yaml.safe_load_all((out / "manifests.yaml").read_text()))
    by_kind = {(m["kind"], m["metadata"]["name"]): m for m in manifests}
    assert by_kind[("ConfigMap", "fake-sim")]["data"] == {"nodes": "2"}
    resources = json.loads((out / "resources.json").read_text())
    group = next(r for r in resources if r["type"] == "aws:eks/nodeGroup:NodeGroup")
    assert group["name"] == "nodegroup-sim" and group["protect"] and group["parent"] == "platform"
    assert group["provider"] == "fake-provider"  # explicit, from `cloud.fake`; never the default provider
    assert group["inputs"] == {
        "clusterName": "example",
        "nodeRoleArn": "arn:aws:iam::1:role/n",
        "scalingConfig": {"desiredSize": 2, "maxSize": 2, "minSize": 0},
        "subnetIds": ["subnet-1"],
    }
    assert by_kind[("StorageClass", "trainer-platform-shared")]["provisioner"] == "fake.csi.example.com"
    assert ("Namespace", "fakechart-system") in by_kind
    flavor = next(m for m in manifests if m["kind"] == "ResourceFlavor")
    assert {"key": "example.com/fake", "operator": "Exists", "effect": "NoSchedule"} in flavor["spec"]["tolerations"]
    queue = by_kind[("ClusterQueue", "alpha")]["spec"]["resourceGroups"][0]["flavors"][0]["resources"]
    assert {"name": "cpu", "nominalQuota": "8"} in queue
    releases = yaml.safe_load((out / "helm-releases.yaml").read_text())["releases"]
    fake = next(r for r in releases if r["name"] == "fakechart")
    assert fake["version"] == "1.0.0" and fake["values"] == {"image": "example.com/fakechart:v1.0.0"}
    # The rule is in the policies of the kinds it names, and refuses what it says.
    policies = {m["metadata"]["name"]: m for m in manifests if m["kind"] == "ValidatingAdmissionPolicy"}
    named = {n for n, p in policies.items() if any("mallory" in v["message"] for v in p["spec"]["validations"])}
    assert named == {"trainer-platform-tenancy-pods", "trainer-platform-tenancy-jobsets"}
    team = by_kind[("Namespace", "alpha")]["metadata"]["annotations"]

    def pod_refusals(hostname: str) -> list[str]:
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": "u", "controller": True}
        pod = {
            "metadata": {"name": "p", "ownerReferences": [owner]},  # a job's pod (rule podQueue)
            "spec": {"hostname": hostname, "containers": [{"name": "c"}]},
        }
        policy = policies["trainer-platform-tenancy-pods"]
        return cel_admission.refusals(policy, pod, namespace="alpha", namespace_annotations=team)

    assert pod_refusals("mallory") == ["Pod p refused: calls a pod mallory"]
    assert pod_refusals("alice") == []
    # The alert's settings block is in the config and its rule in its own group.
    (rules,) = [m for m in manifests if m["kind"] == "PrometheusRule"]
    (group,) = [g for g in rules["spec"]["groups"] if g["name"] == "trainer-platform.fakes"]
    assert [(r["alert"], r["expr"]) for r in group["rules"]] == [("TrainerPlatformFakes", "fakes > 7")]

    # Its checks and its settings model are part of validation like everyone else's.
    stack["config"]["trainer-platform:nodePools"][0]["fake"] = {"nodes": 9, "colour": "red"}
    stack["config"]["trainer-platform:observability"]["alerts"]["fakes"] = {"threshold": "many"}
    config.write_text(yaml.safe_dump(stack))
    refused = _run(["-m", "trainer_infra", "validate", "--config-file", str(config)], tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert "nodePools[0].fake.colour: unknown key 'colour'" in refused.stderr
    assert "observability.alerts.fakes.threshold" in refused.stderr
