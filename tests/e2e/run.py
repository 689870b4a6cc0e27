"""Single entry point for ``make e2e``: build what is missing, then run the e2e suite.

Usage: ``python -m tests.e2e.run [pytest args...]``. Without arguments: the real install path with the platform's
scenarios on what it installed (``INSTALLED_TESTS``, root), the files with control planes of their own
(``HARNESS_TESTS``), with ``E2E_NODE=1`` the real node's own files (``NODE_TESTS``) and with ``E2E_SANDBOX=1`` the
real-node scenarios on ``make sandbox-up`` (``SANDBOX_TESTS``), each in a session of its own, the builds and sessions
in two lanes (``pipeline.py``: the harness session beside the toolchain's build and the real-node sessions). With
arguments: what they need built, then one session. Prints each part's time so CI logs show where the time went.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from tests.e2e import previous_release
from tests.e2e.pipeline import INTERRUPTED, Pipeline, Plan
from trainer_infra.observability.sources import EXTERNAL
from trainer_infra.sandbox import netns, runtime_images
from trainer_infra.sandbox.build import Builder, BuildError
from trainer_infra.sandbox.interrupts import wait_to_end
from trainer_infra.sandbox.karpenter_kwok import BINARY as KARPENTER_BINARY
from trainer_infra.sandbox.node_host import NodeError
from trainer_infra.sandbox.node_host import preflight as node_preflight
from trainer_infra.sandbox.toolchain import Toolchain
from trainer_infra.sandbox.versions import CHECKOUT, VersionSet, module_dir

#: the real install path (tests/e2e/installed.py): `pulumi preview` and the first `pulumi up` of the local stack,
#: then the platform's scenarios on what that up installed (the charts' controllers as pods on a real node, their
#: RBAC, their config from the product's Helm values), then the day-two steps up to the destroy; one session, in
#: this order (test_observability checks the metrics the scenarios produced)
INSTALLED_TESTS = (
    "tests/e2e/test_pulumi_install.py",
    "tests/e2e/test_smoke.py",
    "tests/e2e/test_scenarios.py",
    "tests/e2e/test_data_cache_runtime.py",
    "tests/e2e/test_attacks.py",
    "tests/e2e/test_deputies.py",
    "tests/e2e/test_migrate.py",
    "tests/e2e/test_observability.py",
    "tests/e2e/test_pulumi.py",
)
#: the files with control planes of their own (the fleet's three harness sandboxes run their controllers with the
#: identities the charts give them, ``controller_users``); they need neither root nor the Pulumi toolchain
HARNESS_TESTS = (
    "tests/e2e/test_failures.py",
    "tests/e2e/test_fleet.py",
    "tests/e2e/test_provisioning_request.py",
    "tests/e2e/test_simulate.py",
)
#: the files that need only the test tools (promtool), no cluster: a session of their own once those are built
TOOLS_TESTS = ("tests/e2e/test_alert_rules.py",)
#: every file that drives the real Pulumi toolchain on a chart sandbox (test_pulumi*.py)
PULUMI_PREFIX = "tests/e2e/test_pulumi"
#: the real node (kubelet + containerd) without the platform: opt-in, ``E2E_NODE=1`` or naming a file (``make
#: e2e-node``); the node and cluster networking on it (one session, tests/e2e/node_session.py)
NODE_TESTS = (
    "tests/e2e/test_node.py",
    "tests/e2e/test_node_network.py",
)
#: every file that starts a real node in the test process (a session with its own network and mount namespaces)
NODE_PREFIX = "tests/e2e/test_node"
#: the upgrade e2e (``make e2e-upgrade``, ``.ci/nightly``): it needs the release it starts from (previous_release.py)
UPGRADE_TEST = "tests/e2e/test_pulumi_upgrade.py"
#: Karpenter's core with its kwok provider: opt-in (`make e2e-karpenter`), its binary built only for it
KARPENTER_TEST = "tests/e2e/test_karpenter_kwok.py"
#: the platform's scenarios on real containers: ``make sandbox-up`` (the real `pulumi up` of the sandbox stack on an
#: untainted real node, in the daemon's own namespaces), then, as its team members, a first job, training with a
#: resume and an OOM, the teams' NetworkPolicies, the hostile-tenant attacks a real container changes, every CPU
#: runtime; ``make sandbox-down`` leaves nothing (one
#: session, tests/e2e/sandbox_session.py); opt-in, ``E2E_SANDBOX=1`` or naming a file (``make e2e-sandbox``)
SANDBOX_TESTS = (
    "tests/e2e/test_sandbox_up.py",
    "tests/e2e/test_sandbox_training.py",
    "tests/e2e/test_sandbox_network.py",
    "tests/e2e/test_sandbox_attacks.py",
    "tests/e2e/test_sandbox_limits.py",
    "tests/e2e/test_sandbox_llm.py",
    "tests/e2e/test_sandbox_runtimes.py",
    "tests/e2e/test_sandbox_pids.py",
    "tests/e2e/test_sandbox_progress.py",
    "tests/e2e/test_sandbox_queue.py",
    "tests/e2e/test_sandbox_model_out.py",
    "tests/e2e/test_sandbox_notebook.py",
)
SANDBOX_PREFIX = "tests/e2e/test_sandbox"
#: the toolchain steps that cost CPU-minutes cold (the venv and the plugin script take a few minutes at most)
GO_STEPS = ("pulumi", "pulumi-language-python", "pulumi-resource-kubernetes")


def installs(arg: str) -> bool:
    """Whether a pytest argument names a file that runs on a real `pulumi up` (a chart sandbox and its node)."""
    return PULUMI_PREFIX in arg or any(f in arg for f in INSTALLED_TESTS)


SKIPPED = (
    "[e2e] the platform's scenarios (test_smoke, test_scenarios, test_data_cache_runtime, test_attacks, test_deputies, "
    "test_migrate, "
    "test_observability) and the real install path (test_pulumi*.py) are NOT run: {why}. They run only on what the "
    "real `pulumi up` installs (the charts' controllers as pods on a real node: root for `unshare --net --mount`, "
    "containerd, runc, cgroups, and the Pulumi toolchain). Only test_failures, test_fleet and test_simulate run."
)


def with_pulumi(args: list[str], mode: str, toolchain: Toolchain) -> bool:
    """Whether this run drives the real Pulumi toolchain (and so runs the platform's scenarios at all).

    Unset: yes when root (its session needs a network and a mount namespace of its own), else it says that the
    scenarios do not run and why. ``E2E_PULUMI=1`` (what CI sets): yes, building the toolchain if needed (≈ 8 min
    cold on 2 cores, tests/e2e/README.md). ``auto``: only when its Go binaries are already built, for a machine
    where that build does not fit the time at hand. ``0``: no (only the files with their own control planes).
    Naming a file that needs it runs it."""
    if any(installs(arg) for arg in args) or mode == "1":
        return True
    if mode == "":
        if os.geteuid() == 0:
            return True
        print(SKIPPED.format(why="not root (run `make e2e` as root; E2E_PULUMI=0 says so in one line)"), flush=True)
        return False
    if mode != "auto":
        print("[e2e] E2E_PULUMI=0: the platform's scenarios and the real install path are not run.", flush=True)
        return False
    missing = [step for step in toolchain.missing() if step in GO_STEPS]
    if missing:
        why = (
            f"E2E_PULUMI=auto and the Pulumi toolchain is not built yet ({', '.join(missing)}; ≈ 8 min cold on "
            "2 cores; run `make e2e` once on this machine, or set E2E_PULUMI=1)"
        )
        print(SKIPPED.format(why=why), flush=True)
        return False
    return True


def fetch_exporter_sources() -> dict[str, float]:
    """Download the pinned exporters' Go modules whose sources test_observability reads.

    It reads them inside the install session's network namespace, which has no network: on a cold machine
    (an empty module cache) they must be fetched here, before it. Returns what was fetched, with its time."""
    fetched: dict[str, float] = {}
    for module, version in sorted({(e.module, e.version) for e, _ in EXTERNAL.values() if e.module and e.version}):
        began = time.monotonic()
        module_dir(module, version)
        if (took := time.monotonic() - began) > 1:  # a cached module answers in milliseconds
            fetched[f"{module} source"] = took
    return fetched


def main(argv: list[str] | None = None) -> int:
    """Build, then run pytest; exit with pytest's code."""
    args = list(sys.argv[1:] if argv is None else argv)
    versions = VersionSet.from_env()
    toolchain = Toolchain()
    named = [arg for arg in args if arg.startswith("tests/")]
    # a run of named files builds the Pulumi toolchain only when one of them drives it
    pulumi = with_pulumi(args, os.environ.get("E2E_PULUMI", ""), toolchain) and (
        not named or any(installs(arg) for arg in named)
    )
    node = os.environ.get("E2E_NODE") == "1" or any(NODE_PREFIX in arg for arg in args)
    sandbox = os.environ.get("E2E_SANDBOX") == "1" or any(SANDBOX_PREFIX in arg for arg in args)
    karpenter = os.environ.get("E2E_KARPENTER") == "1" or any(KARPENTER_TEST in arg for arg in args)
    env = {
        **os.environ,
        "SANDBOX_NO_BUILD": "1",
        **({"E2E_NODE": "1"} if node else {}),
        **({"E2E_SANDBOX": "1"} if sandbox else {}),
        **({"E2E_KARPENTER": "1"} if karpenter else {}),
    }
    try:
        if pulumi:
            toolchain.preflight()  # a missing archive fails now, not after the control plane's build
            # the charts' controllers run as pods on a real node: a missing package is named before any build
            node_preflight(in_session=False)
    except NodeError as exc:
        print(f"[e2e] cannot run: {exc}", file=sys.stderr)
        return 1
    except BuildError as exc:
        print(f"[e2e] build failed: {exc}", file=sys.stderr)
        return 1
    if not args:
        # every session: the builds and the sessions in two lanes (tests/e2e/pipeline.py)
        plan = Plan(
            installed=INSTALLED_TESTS if pulumi else (),
            harness=HARNESS_TESTS,
            node=NODE_TESTS if node else (),
            sandbox=SANDBOX_TESTS if sandbox else (),
            pytest_args=(*DURATIONS, "-m", "e2e"),
            env=env,
            tools=TOOLS_TESTS,
        )
        return Pipeline(plan, versions, before_install=fetch_exporter_sources).run()
    return run_named(args, named, versions, toolchain, pulumi=pulumi, node=node, sandbox=sandbox, env=env)


def run_named(
    args: list[str],
    named: list[str],
    versions: VersionSet,
    toolchain: Toolchain,
    *,
    pulumi: bool,
    node: bool,
    sandbox: bool,
    env: dict[str, str],
) -> int:
    """Named files (or pytest arguments): build what they need, one after another, then one session."""
    start = time.monotonic()
    try:
        # the node's files share one session (tests/e2e/node_session.py: the node and its network, no platform);
        # the pulumi session's chart sandbox and make sandbox-up run a real node too (kubelet, pause, kube-proxy,
        # CoreDNS, kube-router)
        # Karpenter with its kwok provider (its own Go toolchain): only for the opt-in test that runs it
        opt_in = frozenset({KARPENTER_BINARY} if any(KARPENTER_TEST in arg for arg in named) else ())
        built = Builder(versions).build(node=node or pulumi or sandbox, opt_in=opt_in)
        if sandbox:
            # the runtime stand-in images (the sandbox serves every one built) need the Debian archive: built here,
            # before the sandbox enters its own network namespace
            for stand_in in runtime_images.STAND_INS:
                began = time.monotonic()
                if runtime_images.build(stand_in):
                    built[f"{stand_in.name} stand-in image"] = time.monotonic() - began
        if any(UPGRADE_TEST in arg for arg in named):
            # the release the upgrade starts from: its module (chart) and the controllers that differ, built here
            built.update(previous_release.prepare(versions))
        if pulumi or sandbox:
            # the real Pulumi toolchain (CLI, language host, Kubernetes provider, matching SDKs): test_pulumi*.py and
            # make sandbox-up
            built.update(toolchain.build())
        if pulumi:
            built.update(fetch_exporter_sources())
    except BuildError as exc:
        print(f"[e2e] build failed: {exc}", file=sys.stderr)
        return 1
    build_s = time.monotonic() - start
    print(
        f"[e2e] binaries for {versions.key}: {'built ' + str(built) if built else 'cached'} ({build_s:.0f} s)",
        flush=True,
    )
    test_start = time.monotonic()
    code = run_sessions([args], env)
    if code == INTERRUPTED:
        print(f"[e2e] interrupted after {time.monotonic() - test_start:.0f} s; no later session run", flush=True)
        return code
    print(f"[e2e] build {build_s:.0f} s, tests {time.monotonic() - test_start:.0f} s, exit {code}", flush=True)
    return code


#: each session's slowest steps (a fixture's set-up, such as `make sandbox-up`, counts as its first test's), in the log
DURATIONS = ("--durations=20", "--durations-min=10")


def run_sessions(sessions: list[list[str]], env: dict[str, str]) -> int:
    """Each session (pytest arguments) in a pytest process of its own, in turn; the highest exit code.

    On Ctrl-C, ``INTERRUPTED`` once the running session has stopped everything it started (its fixtures' teardown:
    control plane, node, Pulumi plugins), and no later session. Not ``subprocess.call``: on Ctrl-C it SIGKILLs its
    child 0.25 s later, in the middle of that teardown (what left a control plane, a node, plugins and CNI network
    namespaces running). A SIGTERM is passed on to the session; this run ends by it once the session has stopped."""
    code = 0
    try:
        for pytest_args in sessions:
            cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *DURATIONS, *pytest_args]
            if any(installs(arg) or NODE_PREFIX in arg for arg in pytest_args):
                # the real node's bridge, rules and mounts (the chart sandbox's too) stay in the session
                cmd = netns.wrap(cmd, mount=True)
            session = subprocess.Popen(cmd, cwd=CHECKOUT, env=env)
            wait_to_end(session)
            code = max(code, session.returncode)
    except KeyboardInterrupt:
        return INTERRUPTED
    return code


if __name__ == "__main__":
    sys.exit(main())
