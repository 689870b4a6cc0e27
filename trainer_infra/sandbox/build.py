"""Build every binary the sandbox runs, once per version set, from the Go module proxy.

Usage: ``trainer-infra sandbox build [--force] [--only NAME ...] [--node]``. Needs Go (``GO_MINIMUM``) and the
module proxy; no root.

Outputs go to ``~/.cache/trainer-platform/e2e/<version-set>/bin/`` (never into
the repo); the Go build and module caches stay in their default locations so
that a second version set, or a rebuild after ``--force``, reuses them.
Builds run one after another: linking kube-apiserver alone needs several GB.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainer_infra.core.upstream import jobset, karpenter, kubernetes, kueue, kwok, lws
from trainer_infra.sandbox.versions import (
    HELM_VERSION,
    BuildError,
    VersionSet,
    binary_dir,
    cache_root,
    go_problem,
)

__all__ = ["BuildError", "Builder"]

#: The Go helper modules (wrappers around upstream mains, our small tools), shipped with the package.
GO_SRC = Path(__file__).resolve().parent / "go"
KUBE_COMMANDS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler")
#: The pod sandbox image the real node runs, as kubeadm 1.34 pins it (cmd/kubeadm/app/constants.PauseVersion).
#: Not in ``VersionSet``: its key names the cache folder of every other binary.
PAUSE_VERSION = "3.10.1"
#: The real node's cluster networking (``cluster_network.py``), pinned here for the same reason: cluster DNS and
#: the NetworkPolicy enforcer (kube-proxy is the ``k8s.io/kubernetes`` of the set).
COREDNS_VERSION = "1.15.0"
KUBE_ROUTER_VERSION = "2.1.0"


@dataclass(frozen=True)
class Target:
    """One binary: its file name, the upstream version it comes from, how to build it."""

    name: str
    component: str
    version: str
    build: Callable[[Builder, Target], None]
    tool: bool = False  # a checking tool (promtool), not run by the sandbox
    node: bool = False  # the real node's (kubelet, pause): built only when asked (``--node``)
    opt_in: bool = False  # built only when named (``--only NAME``): what an opt-in e2e alone runs
    toolchain: str | None = None  # a Go the module needs beyond the machine's (``GOTOOLCHAIN`` of this build only)


def _tail(path: Path, lines: int = 30) -> str:
    """Last lines of a log, for error messages that explain themselves."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Builder:
    """Builds the targets of one version set into its cache directory."""

    def __init__(self, versions: VersionSet, root: Path | None = None) -> None:
        self.versions = versions
        self.set_dir = (root or cache_root()) / versions.key
        self.bin_dir = self.set_dir / "bin" if root else binary_dir(versions)
        self.src_dir = self.set_dir / "src"
        self.log_dir = self.set_dir / "logs"
        self.times_file = self.set_dir / "build-times.json"

    # -- environment -------------------------------------------------------
    def go_env(self, mod_mod: bool = True, toolchain: str | None = None) -> dict[str, str]:
        """Go settings: local toolchain unless a target names one, default caches, serial-friendly."""
        env = dict(os.environ)
        env["GOTOOLCHAIN"] = toolchain or "local"
        env["CGO_ENABLED"] = "0"
        env.setdefault("GOMAXPROCS", str(os.cpu_count() or 2))
        if mod_mod:
            env["GOFLAGS"] = "-mod=mod"
        else:
            env.pop("GOFLAGS", None)
        return env

    def _run(self, cmd: list[str], target: Target, cwd: Path, env: dict[str, str]) -> None:
        """Run one go command, appending to the target's log; raise BuildError on failure."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"build-{target.name}.log"
        with log.open("a") as fh:
            fh.write(f"$ (cd {cwd}) {' '.join(cmd)}\n")
            fh.flush()
            proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise BuildError(
                f"building {target.name} ({target.component} v{target.version}) failed "
                f"with exit code {proc.returncode}; log {log}, last lines:\n{_tail(log)}"
            )

    # -- build recipes -----------------------------------------------------
    def build_from_module(self, target: Target, module: str, package: str, version_var: str | None) -> None:
        """Build a main package inside a writable copy of its own module, as upstream's Makefile does.

        ``go install mod@version`` is not used: it looks up ``@v/list`` for deprecations, which the
        module proxy here answers 403 for JobSet and Kueue, and it refuses modules with replaces.
        """
        source = Path(self.download(module, target)["Dir"])
        work = self.src_dir / target.name
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(source, work)
        for path in [work, *work.rglob("*")]:
            path.chmod(path.stat().st_mode | 0o200)
        out = self.set_dir / "tmp" / target.name
        out.parent.mkdir(parents=True, exist_ok=True)
        ldflags = "-s -w"
        if version_var:
            ldflags += f" -X {version_var}=v{target.version}"
        env = self.go_env(toolchain=target.toolchain)
        self._run(["go", "build", f"-ldflags={ldflags}", "-o", str(out), package], target, work, env)
        self._install(out, target)
        shutil.rmtree(work, ignore_errors=True)

    def build_wrapper(self, target: Target, name: str, go_mod: str | None, ldflags: str = "-s -w") -> None:
        """Build one of our wrapper modules (controlplane/<name>) with its go.mod pinned to the target's version."""
        work = self._wrapper_dir(name)
        if go_mod is not None:
            (work / "go.mod").write_text(go_mod)
        out = self.set_dir / "tmp" / target.name
        out.parent.mkdir(parents=True, exist_ok=True)
        self._run(["go", "build", f"-ldflags={ldflags}", "-o", str(out), "."], target, work, self.go_env())
        self._install(out, target)

    def build_etcd(self, target: Target) -> None:
        """Our wrapper module around etcdmain.Main at the pinned etcd version."""
        self.build_wrapper(target, "etcd", etcd_go_mod(target.version))

    def build_kube(self, target: Target) -> None:
        """One Kubernetes command from our wrapper module, with version stamping."""
        work = self.src_dir / "kube"
        gomod = work / "go.mod"
        if not gomod.exists() or f"{kubernetes.GO_MODULE} v{target.version}\n" not in gomod.read_text():
            shutil.rmtree(work, ignore_errors=True)
            shutil.copytree(GO_SRC / "kube", work)
            (work / "go.sum").unlink(missing_ok=True)
            gomod.write_text(kube_go_mod(target.version, self.staging_modules(target)))
        # a command added since this copy was made (the kubelet) joins the same module, go.sum and caches
        shutil.copytree(GO_SRC / "kube" / target.name, work / target.name, dirs_exist_ok=True)
        out = self.set_dir / "tmp" / target.name
        out.parent.mkdir(parents=True, exist_ok=True)
        ldflags = "-s -w " + " ".join(f"-X {k}={v}" for k, v in kube_version_ldflags(target.version).items())
        self._run(
            ["go", "build", f"-ldflags={ldflags}", "-o", str(out), f"./{target.name}"],
            target,
            work,
            self.go_env(),
        )
        self._install(out, target)

    def build_pause(self, target: Target) -> None:
        """The pod sandbox process of the real node (see controlplane/pause): standard library only."""
        self.build_wrapper(target, "pause", None)

    def build_coredns(self, target: Target) -> None:
        """CoreDNS with the cluster DNS plugins only (see controlplane/coredns), at the pinned version."""
        ldflags = f"-s -w -X github.com/coredns/coredns/coremain.GitCommit=v{target.version}"
        self.build_wrapper(target, "coredns", coredns_go_mod(target.version), ldflags)

    def build_promql_names(self, target: Target) -> None:
        """Our PromQL name extractor, against the pinned Prometheus parser (see controlplane/promql)."""
        self.build_wrapper(target, "promql", promql_go_mod(target.version))

    def build_chart_render(self, target: Target) -> None:
        """Our `helm template` of one chart archive, against the pinned Helm library (see controlplane/chartrender)."""
        self.build_wrapper(target, "chartrender", chartrender_go_mod(target.version))

    def staging_modules(self, target: Target) -> list[str]:
        """Staging modules that k8s.io/kubernetes replaces locally at this tag."""
        info = self.download(kubernetes.GO_MODULE, target)
        return parse_staging_replaces(Path(info["GoMod"]).read_text())

    def download(self, module: str, target: Target) -> dict[str, str]:
        """`go mod download -json` of `module` at the target's version: where its source and go.mod are."""
        proc = subprocess.run(
            ["go", "mod", "download", "-json", f"{module}@v{target.version}"],
            cwd=self.set_dir,
            env=self.go_env(mod_mod=False, toolchain=target.toolchain),
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise BuildError(
                f"cannot download {module} v{target.version} for {target.name}: "
                f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}"
            )
        info: dict[str, str] = json.loads(proc.stdout)
        return info

    # -- helpers -----------------------------------------------------------
    def _wrapper_dir(self, name: str) -> Path:
        """Fresh copy of a wrapper module outside the repo (go.sum is written there)."""
        work = self.src_dir / name
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(GO_SRC / name, work)
        (work / "go.sum").unlink(missing_ok=True)
        return work

    def _install(self, produced: Path, target: Target) -> None:
        """Atomically place a binary and its stamp, so a half build is never reused."""
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        dest = self.bin_dir / target.name
        tmp = dest.with_suffix(".partial")
        shutil.move(str(produced), tmp)
        tmp.chmod(0o755)
        tmp.replace(dest)
        self._stamp(target).write_text(f"{target.component} v{target.version}\n")

    def _stamp(self, target: Target) -> Path:
        return self.bin_dir / f".{target.name}.built"

    def is_built(self, target: Target) -> bool:
        """Built means the binary and its stamp for this exact version both exist."""
        stamp = self._stamp(target)
        return (
            (self.bin_dir / target.name).exists()
            and stamp.exists()
            and stamp.read_text().strip() == f"{target.component} v{target.version}"
        )

    def targets(self) -> list[Target]:
        """Every binary, in build order (Kubernetes first: it is the longest)."""
        v = self.versions

        def from_module(module: str, package: str, version_var: str | None = None) -> Callable[[Builder, Target], None]:
            return lambda b, t: b.build_from_module(t, module, package, version_var)

        kube: list[Target] = [Target(name, "kubernetes", v.kubernetes, Builder.build_kube) for name in KUBE_COMMANDS]
        return [
            Target("etcd", "etcd", v.etcd, Builder.build_etcd),
            *kube,
            Target("kwok", "kwok", v.kwok, from_module(kwok.GO_MODULE, "./cmd/kwok")),
            Target(
                "jobset-manager",
                "jobset",
                v.jobset,
                from_module(jobset.GO_MODULE, ".", jobset.VERSION_VARIABLE),
            ),
            Target(
                "kueue-manager",
                "kueue",
                v.kueue,
                from_module(kueue.GO_MODULE, "./cmd/kueue", kueue.VERSION_VARIABLE),
            ),
            Target(
                "trainer-controller-manager",
                "trainer",
                v.trainer,
                from_module("github.com/kubeflow/trainer/v2", "./cmd/trainer-controller-manager"),
            ),
            Target(
                "lws-manager",
                "lws",
                v.lws,
                from_module(lws.GO_MODULE, "./cmd", lws.VERSION_VARIABLE),
            ),
            Target("chart-render", "helm", HELM_VERSION, Builder.build_chart_render),
            Target(
                "promtool",
                "prometheus",
                v.prometheus,
                from_module("github.com/prometheus/prometheus", "./cmd/promtool"),
                tool=True,
            ),
            Target("promql-names", "prometheus", v.prometheus, Builder.build_promql_names, tool=True),
            Target(
                "karpenter-kwok",
                "karpenter",
                karpenter.CORE_VERSION,
                from_module(karpenter.CORE_MODULE, "./kwok", karpenter.CORE_VERSION_VARIABLE),
                opt_in=True,
                toolchain=karpenter.CORE_TOOLCHAIN,
            ),
            Target("kubelet", "kubernetes", v.kubernetes, Builder.build_kube, node=True),
            Target("pause", "pause", PAUSE_VERSION, Builder.build_pause, node=True),
            Target("kube-proxy", "kubernetes", v.kubernetes, Builder.build_kube, node=True),
            Target("coredns", "coredns", COREDNS_VERSION, Builder.build_coredns, node=True),
            Target(
                "kube-router",
                "kube-router",
                KUBE_ROUTER_VERSION,
                from_module(
                    "github.com/cloudnativelabs/kube-router/v2",
                    "./cmd/kube-router",
                    "github.com/cloudnativelabs/kube-router/v2/pkg/version.Version",
                ),
                node=True,
            ),
        ]

    def reuse(self, target: Target) -> Path | None:
        """Copy the same binary (same component and version) from another version set's cache.

        Switching only Trainer to 2.3.0 then costs one controller build, not a relink of Kubernetes.
        """
        stamp = f"{target.component} v{target.version}"
        for other in sorted(self.set_dir.parent.glob(f"*/bin/.{target.name}.built")):
            binary = other.parent / target.name
            if other.parent == self.bin_dir or not binary.exists() or other.read_text().strip() != stamp:
                continue
            self.bin_dir.mkdir(parents=True, exist_ok=True)
            tmp = (self.bin_dir / target.name).with_suffix(".partial")
            shutil.copy2(binary, tmp)
            tmp.replace(self.bin_dir / target.name)
            self._stamp(target).write_text(stamp + "\n")
            return binary
        return None

    def build(
        self,
        only: set[str] | None = None,
        force: bool = False,
        node: bool = False,
        opt_in: frozenset[str] = frozenset(),
    ) -> dict[str, float]:
        """Build what is missing (the real node's binaries only with ``node`` or by name, an opt-in target only when
        named in ``opt_in`` or ``only``); return seconds spent per built target."""
        self.set_dir.mkdir(parents=True, exist_ok=True)
        # two builds of one set share src/ and tmp/: a second one waits, then finds the binaries built
        with (self.set_dir / ".build.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            return self._build(only, force, node, opt_in)

    def _build(self, only: set[str] | None, force: bool, node: bool, opt_in: frozenset[str]) -> dict[str, float]:
        times: dict[str, float] = {}
        for target in self.targets():
            if only and target.name not in only:
                continue
            left_out = (target.node and not node) or (target.opt_in and target.name not in opt_in)
            if left_out and not only:
                continue
            if not force and self.is_built(target):
                continue
            if not force and (source := self.reuse(target)) is not None:
                print(f"[build] {target.name} ({target.component} v{target.version}) reused from {source}", flush=True)
                continue
            if (problem := go_problem()) is not None:
                raise BuildError(f"cannot build {target.name} ({target.component} v{target.version}): {problem}")
            print(f"[build] {target.name} ({target.component} v{target.version}) ...", flush=True)
            start = time.monotonic()
            target.build(self, target)
            times[target.name] = round(time.monotonic() - start, 1)
            print(f"[build] {target.name} done in {times[target.name]} s", flush=True)
        if times:
            history = json.loads(self.times_file.read_text()) if self.times_file.exists() else []
            history.append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": times})
            self.times_file.write_text(json.dumps(history, indent=2) + "\n")
        return times

    def binary(self, name: str) -> Path:
        """Path of a built binary (raises if the set was not built)."""
        path = self.bin_dir / name
        if not path.exists():
            raise BuildError(f"{name} is not built for {self.versions.key}: run trainer-infra sandbox build")
        return path


_STAGING_RE = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s+=>\s+\./staging/src/", re.MULTILINE)


def parse_staging_replaces(gomod: str) -> list[str]:
    """Module paths that k8s.io/kubernetes's go.mod points at its ./staging tree."""
    return sorted(set(_STAGING_RE.findall(gomod)))


def kube_go_mod(version: str, staging: list[str]) -> str:
    """go.mod of the Kubernetes wrapper: staging modules pinned to their v0.X.Y tags.

    The scheduler-plugins project uses the same replace-everything pattern.
    """
    _, minor, patch = version.split(".")
    staging_version = f"v0.{minor}.{patch}"
    replaces = "\n".join(f"\t{m} => {m} {staging_version}" for m in staging)
    return (
        "module trainer-platform/e2e/controlplane/kube\n\n"
        "go 1.24\n\n"
        f"require {kubernetes.GO_MODULE} v{version}\n\n"
        f"replace (\n{replaces}\n)\n"
    )


def etcd_go_mod(version: str) -> str:
    """go.mod of the etcd wrapper at the requested version."""
    return f"module trainer-platform/e2e/controlplane/etcd\n\ngo 1.24\n\nrequire go.etcd.io/etcd/server/v3 v{version}\n"


def coredns_go_mod(version: str) -> str:
    """go.mod of the CoreDNS wrapper at the requested CoreDNS version (its go directive: CoreDNS 1.15 needs 1.26)."""
    return (
        "module trainer-platform/e2e/controlplane/coredns\n\ngo 1.26\n\n"
        f"require github.com/coredns/coredns v{version}\n"
    )


def promql_go_mod(version: str) -> str:
    """go.mod of the PromQL name extractor at the requested Prometheus module version."""
    return (
        "module trainer-platform/e2e/controlplane/promql\n\ngo 1.24\n\n"
        f"require github.com/prometheus/prometheus v{version}\n"
    )


def chartrender_go_mod(version: str) -> str:
    """go.mod of the chart renderer at the requested Helm module version."""
    return f"module trainer-platform/e2e/controlplane/chartrender\n\ngo 1.24\n\nrequire helm.sh/helm/v3 v{version}\n"


def kube_version_ldflags(version: str) -> dict[str, str]:
    """What hack/lib/version.sh stamps; Kueue refuses a server reporting v0.0.0-master."""
    major, minor, _ = version.split(".")
    values = {
        "gitVersion": f"v{version}",
        "gitMajor": major,
        "gitMinor": minor,
        "gitTreeState": "clean",
        "gitCommit": "0000000000000000000000000000000000000000",
        "buildDate": "1970-01-01T00:00:00Z",
    }
    flags: dict[str, str] = {}
    for pkg in kubernetes.VERSION_PACKAGES:
        for key, value in values.items():
            flags[f"{pkg}.{key}"] = value
    return flags


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="rebuild even if binaries exist")
    parser.add_argument("--only", action="append", help="build only this binary (repeatable)")
    parser.add_argument(
        "--node",
        action="store_true",
        help="also build the real node's kubelet, pause, kube-proxy, CoreDNS and kube-router",
    )
    parser.add_argument("--print-dir", action="store_true", help="print the bin directory and exit")
    parser.add_argument("--write-kube-gomod", action="store_true", help="regenerate the committed kube go.mod")
    args = parser.parse_args(argv)
    versions = VersionSet.from_env()
    builder = Builder(versions)
    if args.print_dir:
        print(builder.bin_dir)
        return 0
    if args.write_kube_gomod:
        target = next(t for t in builder.targets() if t.name == "kube-apiserver")
        builder.set_dir.mkdir(parents=True, exist_ok=True)
        text = kube_go_mod(target.version, builder.staging_modules(target))
        (GO_SRC / "kube" / "go.mod").write_text(text)
        return 0
    start = time.monotonic()
    try:
        times = builder.build(set(args.only) if args.only else None, force=args.force, node=args.node)
    except BuildError as exc:
        print(f"[build] ERROR: {exc}", file=sys.stderr)
        return 1
    total = round(time.monotonic() - start, 1)
    print(json.dumps({"version_set": versions.key, "bin": str(builder.bin_dir), "seconds": times, "total": total}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
