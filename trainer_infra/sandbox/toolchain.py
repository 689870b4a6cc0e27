"""Build the real Pulumi toolchain the e2e drives: the CLI, the Python language host, the Kubernetes provider.

Usage: ``trainer-infra sandbox toolchain [--force] [--print-dir]``.

Outputs go to ``~/.cache/trainer-platform/e2e/toolchain/<set>/`` (``bin/`` and the Python ``venv/``), once per
version set; nothing is written into the repository. Sources:

- ``pulumi``: Pulumi's own ``cmd/pulumi`` from the Go module proxy, through the wrapper module
  ``go/pulumi/`` (its go.mod is generated: the pinned pkg/sdk plus pkg's clipboard replace).
- ``pulumi-language-python`` (+ ``-exec``): not on the proxy; extracted from
  ``../shared/upstream-src/pulumi-language-python-v<ver>.tar.gz`` (its local replaces dropped).
- ``pulumi-resource-kubernetes``: not on the proxy; extracted from the pulumi-kubernetes and fluxcd ``ssa``
  archives. The snapshot lacks generated files; ``go/k8sgen`` regenerates them from the
  Kubernetes OpenAPI specs inside ``k8s.io/kubernetes`` (module proxy). See ``../shared/upstream-src/README.md``
  for why pkg is pinned to 3.245.0 for the provider.
- the Python SDKs matching the binaries (``pulumi``, ``pulumi-kubernetes``: the SDK asks the engine for the
  provider version it was published with) in a venv of their own, beside the project's runtime dependencies.

Every failure names the step, the file it was working on and the log tail.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from trainer_infra.sandbox.build import BuildError
from trainer_infra.sandbox.versions import CHECKOUT, cache_root, shared_dir

#: The Go helper modules shipped with the package; the toolchain's are ``pulumi`` and ``k8sgen``.
TOOLCHAIN_SRC = Path(__file__).resolve().parent / "go"
#: Their bytes are part of the cache key: an edit rebuilds.
TOOLCHAIN_MODULES = ("k8sgen", "pulumi")
CLIPBOARD_REPLACE = "github.com/atotto/clipboard => github.com/tgummerer/clipboard v0.0.0-20241001131231-d02d263e614e"
PULUMI_PKG = "github.com/pulumi/pulumi/pkg/v3"
PULUMI_SDK = "github.com/pulumi/pulumi/sdk/v3"
SSA_MODULE = "github.com/fluxcd/pkg/ssa"
DOTNET_MODULE = "github.com/pulumi/pulumi-dotnet/pulumi-language-dotnet/v3"
PROVIDER_VERSION_VAR = "github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version"
# Kubernetes minors whose removed APIs the provider's schema keeps (upstream's generator merges these).
LEGACY_SPECS = ("1.17.0", "1.18.0", "1.19.0", "1.20.0", "1.26.0", "1.28.0", "1.30.0", "1.31.0")


@dataclass(frozen=True)
class ToolchainVersions:
    """Pinned versions of the Pulumi toolchain (without a leading ``v``)."""

    pulumi: str = "3.259.0"
    kubernetes_provider: str = "4.32.0"
    # What the provider compiles against: its own pin (3.243.0) is refused by the proxy, 3.259.0 breaks pkg/gen.
    provider_pulumi_pkg: str = "3.245.0"
    # The Kubernetes OpenAPI spec the provider's schema is generated from (its k8s.io/api v0.36.1).
    provider_openapi: str = "1.36.1"
    ssa_commit: str = "4f94dc680419"

    @property
    def key(self) -> str:
        """Directory name: readable, and unique per set (and per wrapper/generator source)."""
        digest = hashlib.sha256(repr(sorted(asdict(self).items())).encode())
        for path in sorted(p for module in TOOLCHAIN_MODULES for p in (TOOLCHAIN_SRC / module).rglob("*")):
            if path.is_file():
                digest.update(path.read_bytes())
        return f"pulumi{self.pulumi}-k8s{self.kubernetes_provider}-{digest.hexdigest()[:8]}"

    @property
    def python_sdks(self) -> list[str]:
        """The PyPI SDKs that match the binaries."""
        return [f"pulumi=={self.pulumi}", f"pulumi-kubernetes=={self.kubernetes_provider}"]


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def go_env() -> dict[str, str]:
    """Local Go toolchain, no cgo, modules resolved from the proxy as needed."""
    env = dict(os.environ)
    env.update(GOTOOLCHAIN="local", CGO_ENABLED="0", GOFLAGS="-mod=mod")
    return env


def cli_go_mod(version: str) -> str:
    """go.mod of the CLI wrapper: Pulumi's pkg and sdk at one version, with pkg's own clipboard replace."""
    return (
        "module trainer-platform/e2e/toolchain/pulumi\n\ngo 1.25\n\n"
        f"require (\n\t{PULUMI_PKG} v{version}\n\t{PULUMI_SDK} v{version}\n)\n\n"
        f"replace {CLIPBOARD_REPLACE}\n"
    )


_REPLACE_LINE = re.compile(r"^\s*(?:replace\s+)?(\S+)(?:\s+v\S+)?\s+=>\s+\.\S*\s*$")


def drop_local_replaces(gomod: str, modules: set[str]) -> str:
    """Remove ``replace <module> => ../local/path`` lines (single or inside a block) for ``modules``."""
    out = []
    for line in gomod.splitlines():
        match = _REPLACE_LINE.match(line)
        if match and match.group(1) in modules:
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def pin_requirements(gomod: str, pins: dict[str, str]) -> str:
    """Set ``module vX`` requirement lines (in blocks or single) to the pinned versions."""
    for module, version in pins.items():
        pattern = re.compile(rf"^(\s*(?:require\s+)?){re.escape(module)}\s+v\S+(.*)$", re.MULTILINE)
        gomod, count = pattern.subn(rf"\g<1>{module} v{version}\g<2>", gomod)
        if count == 0:
            raise ValueError(f"go.mod does not require {module}")
    return gomod


def drop_requirement(gomod: str, module: str) -> str:
    """Remove one requirement line (the provider's .NET host: only upstream's generator uses it)."""
    return re.sub(rf"^\s*(?:require\s+)?{re.escape(module)}\s+v\S+.*\n", "", gomod, flags=re.MULTILINE)


def project_requirements(pyproject: Path, sdks: list[str]) -> list[str]:
    """The project's runtime dependencies with the Pulumi SDKs replaced by the toolchain's pins."""
    deps: list[str] = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    pinned = {re.split(r"[=<>!~\[ ]", s, maxsplit=1)[0].lower() for s in sdks}
    kept = [d for d in deps if re.split(r"[=<>!~\[ ;]", d, maxsplit=1)[0].lower() not in pinned]
    return [*sdks, *kept]


def venv_requirements(versions: ToolchainVersions) -> list[str]:
    """The e2e program's venv: pinned SDKs, the project's other runtime dependencies, the policy pack's SDK."""
    reqs = project_requirements(CHECKOUT / "pyproject.toml", versions.python_sdks)
    policy = (CHECKOUT / "policy" / "requirements.txt").read_text().splitlines()
    extra = [r.strip() for r in policy if r.strip() and not r.startswith("#") and not r.lower().startswith("pulumi>")]
    return [*reqs, *extra]


@dataclass(frozen=True)
class Step:
    """One named build step; ``outputs`` exist once it has run."""

    name: str
    outputs: tuple[Path, ...]
    run: Callable[[], None]


class Toolchain:
    """Builds the toolchain of one version set into its cache directory."""

    def __init__(self, versions: ToolchainVersions | None = None, root: Path | None = None) -> None:
        self.versions = versions or ToolchainVersions()
        self.dir = (root or cache_root()) / "toolchain" / self.versions.key
        self.bin_dir = self.dir / "bin"
        self.src_dir = self.dir / "src"
        self.log_dir = self.dir / "logs"
        self.requirements = venv_requirements(self.versions)
        digest = hashlib.sha256("\n".join(self.requirements).encode()).hexdigest()[:8]
        #: keyed by what is installed, not by the Go sources: editing the generator does not reinstall it
        self.venv = self.dir.parent / f"venv-pulumi{self.versions.pulumi}-{digest}"
        self.times_file = self.dir / "build-times.json"
        self.upstream = shared_dir() / "upstream-src"

    # -- paths -------------------------------------------------------------
    @property
    def pulumi(self) -> Path:
        return self.bin_dir / "pulumi"

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    def env(self) -> dict[str, str]:
        """Environment for running the CLI: our binaries first on PATH, no plugin downloads, no update checks."""
        env = dict(os.environ)
        env["PATH"] = f"{self.bin_dir}{os.pathsep}{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        env.update(
            PULUMI_SKIP_UPDATE_CHECK="true",
            PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION="true",
            PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK="true",
        )
        return env

    # -- running -----------------------------------------------------------
    def _run(
        self, step: str, cmd: list[str], cwd: Path, env: dict[str, str] | None = None, about: Path | None = None
    ) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log = self.log_dir / f"{step}.log"
        with log.open("a") as fh:
            fh.write(f"$ (cd {cwd}) {' '.join(cmd)}\n")
            fh.flush()
            proc = subprocess.run(cmd, cwd=cwd, env=env or go_env(), stdout=fh, stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            raise BuildError(
                f"toolchain step {step!r} failed (exit {proc.returncode}) on {about or cwd}; log {log}, last lines:\n"
                f"{_tail(log)}"
            )

    def _archive(self, step: str, name: str) -> Path:
        """An upstream archive from ../shared, checked against its SHA256SUMS when listed there."""
        path = self.upstream / name
        if not path.is_file():
            raise BuildError(
                f"toolchain step {step!r}: archive {path} is missing (set TRAINER_PLATFORM_SHARED to the shared folder)"
            )
        sums = self.upstream / "SHA256SUMS"
        if sums.is_file():
            listed = {line.split()[1]: line.split()[0] for line in sums.read_text().splitlines() if line.strip()}
            if name in listed and hashlib.sha256(path.read_bytes()).hexdigest() != listed[name]:
                raise BuildError(f"toolchain step {step!r}: {path} does not match its SHA256SUMS entry")
        return path

    def _extract(self, step: str, archive: str, into: Path) -> Path:
        shutil.rmtree(into, ignore_errors=True)
        into.mkdir(parents=True)
        path = self._archive(step, archive)
        try:
            with tarfile.open(path) as tar:
                tar.extractall(into, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise BuildError(f"toolchain step {step!r}: cannot extract {path}: {exc}") from exc
        return into

    def _install(self, produced: Path, name: str) -> None:
        self.bin_dir.mkdir(parents=True, exist_ok=True)
        tmp = (self.bin_dir / name).with_suffix(".partial")
        shutil.copy2(produced, tmp)
        tmp.chmod(0o755)
        tmp.replace(self.bin_dir / name)

    # -- steps -------------------------------------------------------------
    def build_cli(self) -> None:
        work = self.src_dir / "pulumi"
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(TOOLCHAIN_SRC / "pulumi", work)
        (work / "go.mod").write_text(cli_go_mod(self.versions.pulumi))
        out = self.dir / "tmp" / "pulumi"
        ldflags = f"-s -w -X {PULUMI_SDK}/go/common/version.Version=v{self.versions.pulumi}"
        self._run("pulumi", ["go", "build", f"-ldflags={ldflags}", "-o", str(out), f"{PULUMI_PKG}/cmd/pulumi"], work)
        self._install(out, "pulumi")

    def archives(self) -> dict[str, tuple[str, ...]]:
        """The ``../shared/upstream-src`` archives each step extracts."""
        v = self.versions
        return {
            "pulumi-language-python": (f"pulumi-language-python-v{v.pulumi}.tar.gz",),
            "pulumi-resource-kubernetes": (
                f"pulumi-kubernetes-v{v.kubernetes_provider}.tar.gz",
                f"fluxcd-pkg-ssa-{v.ssa_commit}.tar.gz",
            ),
        }

    def preflight(self, force: bool = False) -> None:
        """Every archive the build will extract, present and matching its checksum, before the first step: a
        missing one is reported at once, not after minutes of compiling what comes before it."""
        todo = {step.name for step in self.steps()} if force else set(self.missing())
        for step, names in self.archives().items():
            if step in todo:
                for name in names:
                    self._archive(step, name)

    def build_language_host(self) -> None:
        (archive,) = self.archives()["pulumi-language-python"]
        work = self._extract("pulumi-language-python", archive, self.src_dir / "langhost")
        cmd_dir = work / "sdk" / "python" / "cmd"
        gomod = cmd_dir / "pulumi-language-python" / "go.mod"
        text = drop_local_replaces(gomod.read_text(), {PULUMI_PKG, PULUMI_SDK})
        gomod.write_text(pin_requirements(text, {PULUMI_PKG: self.versions.pulumi, PULUMI_SDK: self.versions.pulumi}))
        out = self.dir / "tmp" / "pulumi-language-python"
        ldflags = f"-s -w -X {PULUMI_SDK}/go/common/version.Version=v{self.versions.pulumi}"
        self._run(
            "pulumi-language-python",
            ["go", "build", f"-ldflags={ldflags}", "-o", str(out), "."],
            cmd_dir / "pulumi-language-python",
            about=gomod,
        )
        self._install(out, "pulumi-language-python")
        self._install(cmd_dir / "pulumi-language-python-exec", "pulumi-language-python-exec")

    def write_dynamic_provider_plugin(self) -> None:
        """``pulumi-resource-pulumi-python``: the engine starts it for ``pulumi.dynamic`` resources (the readiness
        gates). Upstream ships it as a shell script beside the CLI; ours runs the SDK's own ``pulumi.dynamic``
        module with the toolchain venv's interpreter."""
        script = self.dir / "tmp" / "pulumi-resource-pulumi-python"
        script.parent.mkdir(parents=True, exist_ok=True)
        script.write_text(f'#!/bin/sh\nexec "{self.python}" -u -m pulumi.dynamic "$@"\n')
        self._install(script, "pulumi-resource-pulumi-python")
        self._dynamic_plugin_stamp().write_text(str(self.python) + "\n")

    def _dynamic_plugin_stamp(self) -> Path:
        """The plugin names the venv, whose path follows the requirements: rewritten when they change."""
        return self.bin_dir / f".pulumi-resource-pulumi-python-{self.venv.name}"

    def _provider_tree(self) -> Path:
        return self.src_dir / "pulumi-kubernetes"

    def prepare_provider(self) -> None:
        """Extract provider + ssa; pin pkg/sdk, point ssa at its archive, add our generator."""
        v = self.versions
        provider_archive, ssa_archive = self.archives()["pulumi-resource-kubernetes"]
        root = self._extract("provider-sources", provider_archive, self._provider_tree())
        ssa = self._extract("provider-sources", ssa_archive, self.src_dir / "fluxcd-pkg")
        gomod = root / "provider" / "go.mod"
        text = pin_requirements(
            gomod.read_text(), {PULUMI_PKG: v.provider_pulumi_pkg, PULUMI_SDK: v.provider_pulumi_pkg}
        )
        text = drop_requirement(text, DOTNET_MODULE)
        text += f"\nreplace {SSA_MODULE} => {ssa / 'ssa'}\n"
        gomod.write_text(text)
        # upstream's generator imports the .NET host (refused by the proxy): ours replaces it
        shutil.rmtree(root / "provider" / "cmd" / "pulumi-gen-kubernetes")
        shutil.copytree(TOOLCHAIN_SRC / "k8sgen", root / "provider" / "cmd" / "k8sgen")

    def openapi_specs(self) -> Path:
        """The provider's Kubernetes OpenAPI spec and the legacy ones, read from k8s.io/kubernetes modules."""
        specs = self.src_dir / "openapi"
        specs.mkdir(parents=True, exist_ok=True)
        wanted = {f"swagger-v{v}.json": v for v in LEGACY_SPECS}
        wanted["swagger.json"] = self.versions.provider_openapi
        for filename, version in wanted.items():
            dest = specs / filename
            if dest.exists():
                continue
            proc = subprocess.run(
                ["go", "mod", "download", "-json", f"k8s.io/kubernetes@v{version}"],
                cwd=self.dir,
                env={**go_env(), "GOFLAGS": ""},
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                raise BuildError(
                    f"toolchain step 'openapi-specs': cannot download k8s.io/kubernetes@v{version} for {filename}: "
                    f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}"
                )
            source = Path(json.loads(proc.stdout)["Dir"]) / "api" / "openapi-spec" / "swagger.json"
            if not source.is_file():
                raise BuildError(f"toolchain step 'openapi-specs': {source} is missing")
            shutil.copyfile(source, dest.with_suffix(".partial"))
            dest.with_suffix(".partial").replace(dest)
        return specs / "swagger.json"

    def generate_provider_files(self) -> None:
        """schema.json, the missing Go SDK files, and the embedded schema (upstream's generate.go)."""
        root = self._provider_tree()
        provider = root / "provider"
        resource_cmd = provider / "cmd" / "pulumi-resource-kubernetes"
        swagger = self.openapi_specs()
        gen = self.dir / "tmp" / "k8sgen"
        self._run("k8sgen-build", ["go", "build", "-o", str(gen), "./cmd/k8sgen"], provider, about=provider / "go.mod")
        self._run("k8sgen-schema", [str(gen), "schema", str(swagger), str(root)], provider, about=swagger)
        schema = resource_cmd / "schema.json"
        self._run(
            "k8sgen-go",
            [str(gen), "go", str(schema), str(root), self.versions.kubernetes_provider],
            provider,
            about=schema,
        )
        env = {**go_env(), "VERSION": self.versions.kubernetes_provider}
        self._run(
            "provider-embed", ["go", "run", "./generate.go"], resource_cmd, env=env, about=resource_cmd / "generate.go"
        )

    def build_provider_steps(self) -> None:
        """Extract and patch the provider module, generate its missing files, build it."""
        self.prepare_provider()
        self.generate_provider_files()
        self.build_provider()

    def build_provider(self) -> None:
        provider = self._provider_tree() / "provider"
        out = self.dir / "tmp" / "pulumi-resource-kubernetes"
        ldflags = f"-s -w -X {PROVIDER_VERSION_VAR}={self.versions.kubernetes_provider}"
        self._run(
            "pulumi-resource-kubernetes",
            ["go", "build", f"-ldflags={ldflags}", "-o", str(out), "./cmd/pulumi-resource-kubernetes"],
            provider,
            about=provider / "go.mod",
        )
        self._install(out, "pulumi-resource-kubernetes")
        shutil.rmtree(self._provider_tree(), ignore_errors=True)
        shutil.rmtree(self.src_dir / "fluxcd-pkg", ignore_errors=True)

    def build_venv(self) -> None:
        """The SDKs matching the binaries + the project's other runtime dependencies + CrossGuard's SDK.

        The program itself is imported from the checkout (PYTHONPATH), never installed here: the venv is
        shared by every clone on the machine.
        """
        shutil.rmtree(self.venv, ignore_errors=True)
        self._run("python-venv", [sys.executable, "-m", "venv", str(self.venv)], self.dir, env=dict(os.environ))
        requirements = self.venv / "requirements.txt"
        requirements.write_text("\n".join(self.requirements) + "\n")
        self._run(
            "python-venv",
            [str(self.python), "-m", "pip", "install", "-q", "-r", str(requirements)],
            self.dir,
            env=dict(os.environ),
            about=requirements,
        )
        self.venv.joinpath(".complete").write_text("\n".join(self.requirements) + "\n")

    def steps(self) -> list[Step]:
        """Build order: CLI, language host (shares the CLI's compiled pkg), provider, Python venv."""
        return [
            Step("pulumi", (self.pulumi,), self.build_cli),
            Step(
                "pulumi-language-python",
                (self.bin_dir / "pulumi-language-python", self.bin_dir / "pulumi-language-python-exec"),
                self.build_language_host,
            ),
            Step(
                "pulumi-resource-kubernetes",
                (self.bin_dir / "pulumi-resource-kubernetes",),
                self.build_provider_steps,
            ),
            Step("python-venv", (self.venv / ".complete",), self.build_venv),
            Step("pulumi-python-plugin", (self._dynamic_plugin_stamp(),), self.write_dynamic_provider_plugin),
        ]

    def missing(self) -> list[str]:
        """The steps that a build would run (nothing cached for them yet)."""
        return [step.name for step in self.steps() if not all(p.exists() for p in step.outputs)]

    def build(self, force: bool = False) -> dict[str, float]:
        """Run the steps whose outputs are missing; return seconds per step run."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.preflight(force)
        times: dict[str, float] = {}
        todo = set(self.missing())
        for step in self.steps():
            if not force and step.name not in todo:
                continue
            print(f"[toolchain] {step.name} ...", flush=True)
            start = time.monotonic()
            step.run()
            times[step.name] = round(time.monotonic() - start, 1)
            print(f"[toolchain] {step.name} done in {times[step.name]} s", flush=True)
        shutil.rmtree(self.dir / "tmp", ignore_errors=True)
        if times:
            history = json.loads(self.times_file.read_text()) if self.times_file.exists() else []
            history.append({"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "seconds": times})
            self.times_file.write_text(json.dumps(history, indent=2) + "\n")
        return times


def main(argv: list[str] | None = None) -> int:
    """CLI entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="rebuild every step")
    parser.add_argument("--print-dir", action="store_true", help="print the toolchain directory and exit")
    args = parser.parse_args(argv)
    toolchain = Toolchain()
    if args.print_dir:
        print(toolchain.dir)
        return 0
    start = time.monotonic()
    try:
        times = toolchain.build(force=args.force)
    except BuildError as exc:
        print(f"[toolchain] ERROR: {exc}", file=sys.stderr)
        return 1
    print(json.dumps({"toolchain": str(toolchain.dir), "seconds": times, "total": round(time.monotonic() - start, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
