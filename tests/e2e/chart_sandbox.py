"""The sandbox for the real install path: an empty control plane that ``pulumi up`` fills.

Unlike ``Sandbox`` (which applies CRDs, starts JobSet/Kueue/Trainer with harness-written configs and registers
their webhooks by URL), ``ChartSandbox`` starts only etcd, the API server, controller-manager, scheduler and
kwok, plus one untainted kwok node for the charts' controller Pods whose podCIDR is routed locally. The
``Podlet`` runs the real controller binary for each chart Pod kwok binds there, from the Pod spec Pulumi's
charts produced. The API server routes to Service endpoints (``--enable-aggregator-routing``), so webhooks and
Kueue's visibility APIService are reached through the charts' Services.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e import netns
from tests.e2e.kube import wait_for
from tests.e2e.podlet import Binary, Podlet
from tests.e2e.sandbox import TIMEOUT, Sandbox, SandboxError

SYSTEM_NODE = "e2e-system"
#: kwok gives the system node's Pods IPs from here. Not 127.0.0.0/8: EndpointSlices refuse loopback addresses
#: (`may not be in the loopback range`, found by the first run), so the range is made local, but only inside
#: the session's own network namespace (``tests/e2e/netns.py``).
SYSTEM_POD_CIDR = "10.251.90.0/24"


class ChartSandbox(Sandbox):
    """Control plane + kwok + podlet; the platform itself comes from Pulumi."""

    apiserver_args = ("--enable-aggregator-routing=true",)

    def __init__(self, workdir: Path, **kwargs: Any) -> None:
        super().__init__(workdir, **kwargs)
        self.podlet: Podlet | None = None

    def binaries(self) -> list[Binary]:
        """Controller binaries by the image name the charts use."""
        v = self.versions
        return [
            Binary("jobset", self.bin_dir / "jobset-manager", v.jobset),
            Binary("kueue", self.bin_dir / "kueue-manager", v.kueue),
            Binary("trainer-controller-manager", self.bin_dir / "trainer-controller-manager", v.trainer),
            # the Trainer chart's LWS subchart (data cache): image registry.k8s.io/lws/lws
            Binary("lws", self.bin_dir / "lws-manager", v.lws),
        ]

    def _start(self) -> None:
        self._start_control_plane()
        self._route_pod_cidr()
        self._system_node()
        self.podlet = Podlet(
            self.client,
            node=SYSTEM_NODE,
            binaries=self.binaries(),
            workdir=self.workdir / "pods",
            server=self.server,
            ca_cert=self.ca.cert_path,
        ).start()
        self._write_state()

    def _route_pod_cidr(self) -> None:
        """Every address of the system node's podCIDR is this (private) host, like 127.0.0.0/8."""
        try:
            netns.make_local(SYSTEM_POD_CIDR)
        except netns.NetnsError as exc:
            raise SandboxError(str(exc)) from None

    def _system_node(self) -> None:
        self.create_kwok_node(
            SYSTEM_NODE, labels={"node-role.kubernetes.io/control-plane": ""}, pod_cidr=SYSTEM_POD_CIDR
        )

        def ready() -> bool:
            conds = self.client.get("v1", "Node", SYSTEM_NODE).get("status", {}).get("conditions", [])
            return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

        wait_for(f"kwok to mark {SYSTEM_NODE} Ready", ready, TIMEOUT)

    def stop(self) -> None:
        """The podlet's controllers first (they hold API connections), then the control plane."""
        if self.podlet is not None:
            self.podlet.stop()
            self.podlet = None
        super().stop()
