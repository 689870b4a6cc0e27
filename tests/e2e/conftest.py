"""Fixtures for the e2e suite: the scenario files run on the session's one real install (tests/e2e/installed.py)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.e2e.installed import Deployed, deployment, e2e_render
from tests.e2e.node_session import node_session  # noqa: F401 (the real node's own session)
from tests.e2e.platform import Platform, delete_trainjobs, node_ready
from tests.e2e.sandbox_session import platform_sandbox  # noqa: F401 (make sandbox-up for the real-node scenarios)
from trainer_infra.sandbox.chart_sandbox import ChartSandbox
from trainer_infra.sandbox.kube import wait_for
from trainer_infra.sandbox.probes import wait_admission_enforced
from trainer_infra.sandbox.render import RenderOutput, kueue_settings


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker here too, so the suite runs from a bare checkout. An e2e session stops on SIGTERM (a CI
    timeout, ``run.py`` passing one on) as on Ctrl-C: pytest then tears every fixture down. Without this a SIGTERM
    was the sandbox's SystemExit, which pytest counts as one failed test before it runs the next."""
    config.addinivalue_line("markers", "e2e: end-to-end against real controllers (make e2e)")
    if "e2e" in (config.getoption("-m") or ""):
        signal.signal(signal.SIGTERM, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect (not skip) e2e tests unless the run selects them with ``-m`` naming ``e2e``.

    ``make test`` runs ``pytest`` over ``tests/``: it must not build Kubernetes or start a sandbox.
    """
    if "e2e" in (config.getoption("-m") or ""):
        return
    keep = [i for i in items if i.get_closest_marker("e2e") is None]
    dropped = [i for i in items if i.get_closest_marker("e2e") is not None]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


@pytest.fixture(scope="session")
def local_render(tmp_path_factory: pytest.TempPathFactory) -> RenderOutput:
    """``trainer-infra render`` of the stack the session's `pulumi up` deploys (`local`, observability on)."""
    return e2e_render(tmp_path_factory.mktemp("render") / "out")


@pytest.fixture(scope="session")
def deployed(tmp_path_factory: pytest.TempPathFactory, local_render: RenderOutput) -> Iterator[Deployed]:
    """The session's chart sandbox and Pulumi project (tests/e2e/installed.py), before its first `up`."""
    with deployment(tmp_path_factory.mktemp("pulumi"), local_render) as found:
        yield found


@pytest.fixture(scope="session")
def sandbox(deployed: Deployed) -> ChartSandbox:
    """The cluster of the session's real `pulumi up` (tests/e2e/installed.py): the charts' controllers as pods on
    the real node with the charts' RBAC and the product's Helm values. The up runs here when no test ran it yet."""
    deployed.install()
    return deployed.sandbox


@pytest.fixture(scope="session")
def kwok_nodes(sandbox: ChartSandbox) -> list[str]:
    """Two plain CPU kwok nodes for the smoke tests, waited on until kwok marks them Ready."""
    names = ["smoke-node-0", "smoke-node-1"]
    for name in names:
        sandbox.create_kwok_node(name, labels={"e2e.trainer-platform/pool": "smoke"})

    def ready() -> bool:
        nodes = [sandbox.client.get("v1", "Node", n) for n in names]
        return all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))
            for n in nodes
        )

    wait_for(f"kwok to mark nodes {names} Ready", ready, 60)
    return names


@pytest.fixture(scope="session")
def platform(sandbox: ChartSandbox, local_render: RenderOutput) -> Platform:
    """The `local` stack (``local_render``) as `pulumi up` applied it: its kwok nodes Ready, its admission
    policies enforced in every team namespace."""
    objects = list(local_render.objects)
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    wait_for(
        f"kwok nodes {nodes} Ready", lambda: all(node_ready(sandbox.client.get("v1", "Node", n)) for n in nodes), 90
    )
    platform = Platform(local_render, objects)
    if local_render.of_kind("ValidatingAdmissionPolicy"):
        for team in platform.render_teams():
            wait_admission_enforced(sandbox.client, team.namespace)
    return platform


@pytest.fixture
def clean_teams(sandbox: ChartSandbox, platform: Platform) -> Iterator[None]:
    yield
    delete_trainjobs(sandbox.client, sorted(t.namespace for t in platform.render_teams()))


@pytest.fixture(scope="session")
def local_settings(local_render: RenderOutput) -> dict[str, object]:
    """The Kueue behaviour settings of the `local` render (what the chart's Kueue runs with: the product's
    Helm values carry them)."""
    return kueue_settings(local_render)
