"""The version set the control plane runs, where its binaries are, and where the shared reference folder is.

Every binary, CRD folder and upstream manifest is chosen by this one object so that a version change is a
single edit (or environment variable) and lands in its own build-cache directory.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from trainer_infra.core.images import split_image
from trainer_infra.core.upstream import autoscaler, kueue
from trainer_infra.core.upstream.prometheus_operator import GROUP as MONITORING_GROUP
from trainer_infra.nodepools.kwok import KWOK_VERSION
from trainer_infra.versions import MATRIX

#: The checkout the package runs from (editable install); `../shared` beside it is the default shared folder.
CHECKOUT = Path(__file__).resolve().parents[2]
#: The binaries the control plane runs (the checks also build tools: promtool, promql-names).
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "jobset-manager",
    "kueue-manager",
    "trainer-controller-manager",
    "lws-manager",
    "chart-render",
)
#: The Helm library ``chart-render`` renders the charts with: the one pulumi-kubernetes (the version the e2e
#: proves) renders `helm.v4.Chart` with (its provider/go.mod), so the RBAC installed is what `pulumi up` installs.
HELM_VERSION = "3.20.2"


class BuildError(RuntimeError):
    """A binary is missing or failed to build; the message names it, its version and how to build it."""


@dataclass(frozen=True)
class VersionSet:
    """Pinned upstream versions (without a leading ``v``)."""

    kubernetes: str = "1.34.4"
    etcd: str = "3.6.16"
    kwok: str = KWOK_VERSION.removeprefix("v")  # the kwok backend's controller, which the sandbox runs
    # The platform's own components run at the compatibility matrix's defaults: one place to bump.
    jobset: str = MATRIX.defaults["jobset"]
    kueue: str = MATRIX.defaults["kueue"]
    trainer: str = MATRIX.defaults["trainer"]
    #: LeaderWorkerSet, the controller behind the Trainer data cache: the one the default Trainer release installs.
    lws: str = split_image(MATRIX.components["trainer"].default_release.images["lws"])[1].removeprefix("v")
    prometheus: str = "0.305.0"  # Go module version of Prometheus 3.5.0: promtool and the PromQL parser
    prometheus_operator: str = "0.85.0"  # monitoring.coreos.com CRDs, read from its Go module

    @property
    def key(self) -> str:
        """Directory name for build outputs: readable, and unique per set."""
        readable = (
            f"k8s{self.kubernetes}-etcd{self.etcd}-kwok{self.kwok}-js{self.jobset}"
            f"-kueue{self.kueue}-trainer{self.trainer}-lws{self.lws}-prom{self.prometheus}-po{self.prometheus_operator}"
        )
        digest = hashlib.sha256(repr(sorted(asdict(self).items())).encode()).hexdigest()[:8]
        return f"{readable}-{digest}"

    @property
    def kubernetes_minor(self) -> str:
        """``1.34`` from ``1.34.4``: what the stack config calls ``kubernetes.version``."""
        return ".".join(self.kubernetes.split(".")[:2])

    def api_version(self, group: str) -> str:
        """``group/version`` as the matrix release this set runs writes it (Kueue's, JobSet's, Trainer's)."""
        for name, component in MATRIX.components.items():
            release = component.release(str(getattr(self, name, ""))) or component.default_release
            if group in release.api_versions:
                return release.api_version(group)
        raise KeyError(f"the compatibility matrix (versions/matrix.yaml) names no API version for {group}")

    @classmethod
    def from_env(cls) -> VersionSet:
        """Default set, overridable per component with ``SANDBOX_<COMPONENT>_VERSION``."""
        base = cls()
        overrides: dict[str, str] = {}
        for name in asdict(base):
            value = os.environ.get(f"SANDBOX_{name.upper()}_VERSION")
            if value:
                overrides[name] = value.removeprefix("v")
        return replace(base, **overrides)


def cache_root() -> Path:
    """Build outputs live outside the repo so clones and CI runs share them (``SANDBOX_CACHE`` moves them).

    The folder keeps its first name, ``e2e``, so a machine's existing builds still count."""
    override = os.environ.get("SANDBOX_CACHE")
    if override:
        return Path(override)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "trainer-platform" / "e2e"


def binary_dir(versions: VersionSet) -> Path:
    """Where `trainer-infra sandbox build` puts the binaries of a version set."""
    return cache_root() / versions.key / "bin"


#: The oldest Go that builds every pinned module with ``GOTOOLCHAIN=local`` (CoreDNS 1.15's go.mod says 1.26).
GO_MINIMUM = (1, 26)
#: The one command that builds what is missing (idempotent: seconds when everything is built).
BUILD_COMMAND = "trainer-infra sandbox build"


def go_version() -> tuple[int, int] | None:
    """The ``go`` on PATH as (major, minor), or None when there is none (or it does not answer)."""
    try:
        out = subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = out.strip().removeprefix("go").split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (ValueError, IndexError):
        return None


def go_problem() -> str | None:
    """What is wrong with the machine's Go for building the binaries, or None when it will do."""
    wanted = ".".join(map(str, GO_MINIMUM))
    found = go_version()
    if found is None:
        return f"`go` is not on PATH: install Go {wanted} or newer (https://go.dev/dl/)"
    if found < GO_MINIMUM:
        return f"Go {found[0]}.{found[1]} is on PATH; the pinned modules need Go {wanted} or newer (https://go.dev/dl/)"
    return None


def check_binaries(versions: VersionSet, bin_dir: Path | None = None) -> Path:
    """The binary folder, or BuildError naming what is missing, what building it needs and the command."""
    folder = bin_dir or binary_dir(versions)
    missing = [name for name in BINARIES if not (folder / name).exists()]
    if missing:
        go = go_problem()
        raise BuildError(
            f"the control plane's binaries {missing} are missing in {folder} (version set {versions.key}); "
            f"`{BUILD_COMMAND}` builds them once from the Go module proxy: it needs Go "
            f"{'.'.join(map(str, GO_MINIMUM))} or newer and network access to proxy.golang.org, no root; "
            "≈ 17 min and a few GB on 2 cores cold, seconds when cached" + (f". First: {go}" if go else "")
        )
    return folder


def shared_dir() -> Path:
    """The project's shared reference folder (CRDs, upstream manifests), read at run time."""
    override = os.environ.get("TRAINER_PLATFORM_SHARED")
    path = Path(override) if override else CHECKOUT.parent / "shared"
    return path.resolve()


def go_mod_download(module: str, version: str, toolchain: str | None = None) -> subprocess.CompletedProcess[str]:
    """`go mod download -json module@v<version>`: into Go's module cache through the module proxy, checked against
    sum.golang.org (with the machine's Go, unless the module needs the ``toolchain`` its build uses)."""
    env = {**os.environ, "GOTOOLCHAIN": toolchain or "local"}
    env.pop("GOFLAGS", None)
    try:
        return subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@v{version}"],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path.home(),
        )
    except FileNotFoundError:
        raise BuildError(f"{module} v{version} is read from the Go module cache: `go` is not installed") from None


def module_dir(module: str, version: str, toolchain: str | None = None) -> Path:
    """Source directory of ``module@v<version>`` in the Go module cache (downloaded if needed)."""
    proc = go_mod_download(module, version, toolchain)
    if proc.returncode != 0:
        raise BuildError(f"cannot download {module} v{version}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return Path(json.loads(proc.stdout)["Dir"])


def required_version(go_mod: str, module: str) -> str:
    """The version (without its `v`) a go.mod's `require` gives ``module``."""
    for line in go_mod.splitlines():
        words = line.split()
        if words[:1] == ["require"]:
            words = words[1:]
        if len(words) >= 2 and words[0] == module and words[1].startswith("v"):
            return words[1][1:]
    raise BuildError(f"go.mod requires no {module}")


def provisioning_request_crd(kueue_version: str) -> Path:
    """The ProvisioningRequest CRD at the version Kueue ``kueue_version`` is built against (its go.mod), from the Go
    module cache. Kueue sets its ProvisioningRequest admission check controller up only when the API server serves
    this kind at start (cmd/kueue/main.go `setupControllers`, `provisioning.ServerSupportsProvisioningRequest`)."""
    go_mod = (module_dir(kueue.GO_MODULE, kueue_version) / "go.mod").read_text()
    folder = module_dir(autoscaler.GO_MODULE, required_version(go_mod, autoscaler.GO_MODULE))
    return folder / autoscaler.PROVISIONING_REQUEST_CRD


#: The Prometheus Operator kinds the platform's observability block creates.
MONITORING_CRDS = ("servicemonitors", "podmonitors", "prometheusrules")


def monitoring_crd_files(version: str) -> list[Path]:
    """monitoring.coreos.com CRDs of a pinned prometheus-operator release, from its Go module."""
    folder = (
        module_dir("github.com/prometheus-operator/prometheus-operator", version)
        / "example"
        / "prometheus-operator-crd"
    )
    return [folder / f"{MONITORING_GROUP}_{plural}.yaml" for plural in MONITORING_CRDS]
