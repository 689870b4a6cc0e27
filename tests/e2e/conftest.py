"""Fixtures for the e2e suite: one sandbox per pytest session (starting it costs ~30 s)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.e2e.build import Builder
from tests.e2e.kube import wait_for
from tests.e2e.node_session import node_platform, node_session  # noqa: F401 (the real node's session fixtures)
from tests.e2e.platform import Platform, delete_trainjobs, node_ready, wait_admission_enforced
from tests.e2e.render import RenderOutput, apply_render, controller_users, kueue_settings, render_stack
from tests.e2e.sandbox import Sandbox


def pytest_configure(config: pytest.Config) -> None:
    """Register the marker here too, so the suite runs from a bare checkout."""
    config.addinivalue_line("markers", "e2e: end-to-end against real controllers (make e2e)")


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


#: The local stack as the e2e runs it: observability is off in `local`, on here (it never changes
#: scheduling, so the scenarios hold either way; tests/observability/test_wiring.py shows the render delta).
E2E_EXTRA = {"observability": {"enabled": True}}


@pytest.fixture(scope="session")
def local_render(tmp_path_factory: pytest.TempPathFactory) -> RenderOutput:
    """``trainer-infra render --stack local`` with observability on: the scenarios apply it, the sandbox's
    Kueue takes its settings (and its metric settings), test_observability checks its rules and dashboards."""
    return render_stack("local", tmp_path_factory.mktemp("render") / "out", extra=E2E_EXTRA)


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory, local_render: RenderOutput) -> Iterator[Sandbox]:
    """A running sandbox whose Kueue schedules as the local stack configures it (fair sharing, gates).

    Builds missing binaries first unless E2E_NO_BUILD=1.
    """
    sb = Sandbox(
        tmp_path_factory.mktemp("sandbox"),
        kueue_settings=kueue_settings(local_render),
        controller_users=controller_users(local_render),
    )
    if os.environ.get("E2E_NO_BUILD") != "1":
        Builder(sb.versions).build()
    with sb:
        yield sb


@pytest.fixture(scope="session")
def kwok_nodes(sandbox: Sandbox) -> list[str]:
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
def platform(sandbox: Sandbox, local_render: RenderOutput) -> Platform:
    """Apply the `local` stack's render strictly (fake PVs for its claims)."""
    render = apply_render(sandbox, local_render.directory)
    objects = list(render.objects)
    nodes = [o["metadata"]["name"] for o in objects if o["kind"] == "Node"]
    wait_for(
        f"kwok nodes {nodes} Ready", lambda: all(node_ready(sandbox.client.get("v1", "Node", n)) for n in nodes), 90
    )
    platform = Platform(render, objects)
    if render.of_kind("ValidatingAdmissionPolicy"):
        for team in platform.render_teams():
            wait_admission_enforced(sandbox.client, team.namespace)
    return platform


@pytest.fixture
def clean_teams(sandbox: Sandbox, platform: Platform) -> Iterator[None]:
    yield
    delete_trainjobs(sandbox.client, sorted(t.namespace for t in platform.render_teams()))


@pytest.fixture(scope="session")
def local_settings(local_render: RenderOutput) -> dict[str, object]:
    """The Kueue behaviour settings of the `local` render (what the sandbox's Kueue runs with)."""
    return kueue_settings(local_render)
