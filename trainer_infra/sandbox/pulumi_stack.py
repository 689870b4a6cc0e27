"""Drive the project's Pulumi program with the real CLI (``toolchain.py``) against the sandbox.

The e2e project is generated in a work directory, never in the checkout: a ``Pulumi.yaml`` whose ``main`` is the
repository root (the same ``__main__.py`` users run) and whose virtualenv is the toolchain's (the SDKs matching
the built engine and provider: the project's own ``.venv`` pins a newer pulumi-kubernetes whose SDK would ask
for a provider we cannot build here), a stack file derived from ``stacks/Pulumi.local.yaml``, a local file
backend and a passphrase secrets provider. The policy pack runs the repository's ``policy/__main__.py``.
The commands are those of ``.ci/pulumi-preview`` (the PR workflow's preview step), with the CLI set up as the
workflows set it up: automatic logs off (``.ci/pulumi-automatic-logs-off``) and zstd-compressed state
(``PULUMI_DIY_BACKEND_ZSTD``).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.components.settings import deep_merge
from trainer_infra.sandbox import leftovers
from trainer_infra.sandbox.chart_registry import ChartRegistry
from trainer_infra.sandbox.chart_sandbox import NFS_DRIVER_VALUES, ChartSandbox, placement_values
from trainer_infra.sandbox.interrupts import uninterruptible
from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.toolchain import Toolchain
from trainer_infra.sandbox.versions import CHECKOUT, shared_dir

STACK = "e2e"
#: A throwaway passphrase for the e2e's own secrets provider (the state lives in a temporary directory).
PASSPHRASE = "trainer-platform-e2e"
PREVIEW_SCRIPT = CHECKOUT / ".ci" / "pulumi-preview"
DRIFT_SCRIPT = CHECKOUT / ".ci" / "pulumi-drift"
LOGS_OFF_SCRIPT = CHECKOUT / ".ci" / "pulumi-automatic-logs-off"
#: what the workflows set for every CLI call (.github/workflows/*.yml)
WORKFLOW_ENV = {"PULUMI_DIY_BACKEND_ZSTD": "true"}
#: seconds an interrupted CLI run gets to cancel its steps and end its plugins before it is killed
CANCEL_GRACE = 60.0


def read_state_file(path: Path) -> str:
    """A DIY backend's file as text, zstd-compressed (``PULUMI_DIY_BACKEND_ZSTD``) or not."""
    data = path.read_bytes()
    if path.name.endswith((".zst", ".zst.bak")):
        import zstandard

        try:
            data = zstandard.ZstdDecompressor().decompressobj().decompress(data)
        except zstandard.ZstdError as exc:  # a file being written
            raise ValueError(f"{path}: {exc}") from exc
    return data.decode(errors="replace")


class PulumiError(RuntimeError):
    """A pulumi command failed; the message holds the command, exit code and the engine's diagnostics."""


@dataclass(frozen=True)
class Result:
    """One CLI run."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def output(self) -> str:
        return self.stdout + self.stderr

    def steps(self) -> list[dict[str, Any]]:
        """The engine's planned steps of a ``--json`` preview."""
        doc: dict[str, Any] = json.loads(self.stdout)
        return list(doc.get("steps", []))


def diagnostics(output: str, limit: int = 6000) -> str:
    """What failed and why: the engine's ``Diagnostics:`` section, the error diagnostics of a ``--json`` run
    (each with its resource, long ones cut in the middle), or else the output's tail."""
    start = output.find("Diagnostics:")
    if start >= 0:
        return output[start : start + limit]
    try:
        doc = json.loads(output[output.find("{") :]) if "{" in output else {}
    except json.JSONDecodeError:
        doc = {}
    errors = [d for d in doc.get("diagnostics", []) if d.get("severity") == "error"] if isinstance(doc, dict) else []
    if errors:
        share = max(limit // len(errors), 300)
        return "\n".join(
            f"{d.get('urn', '(no resource)')}: {_cut(str(d.get('message', '')).strip(), share)}" for d in errors
        )
    return output[-limit:]


def _cut(text: str, size: int) -> str:
    """Head and tail: a provider error puts the object first and the API server's reason last."""
    return text if len(text) <= size else f"{text[: size // 2]} … {text[-size // 2 :]}"


def stack_config(base: dict[str, Any], *, context: str, mirror: str, **overrides: Any) -> dict[str, Any]:
    """The e2e stack: ``base`` (a stack file's content) pointed at the sandbox context, the chart mirror and the
    image mirror the real node pulls through, its controllers placed on the real node (``placement_values``;
    kept under any override of ``components``), the NFS node plugin kept off it."""
    doc = copy.deepcopy(base)
    config = doc.setdefault("config", {})
    config.setdefault("trainer-platform:kubernetes", {})["context"] = context
    config.setdefault("trainer-platform:charts", {})["repositoryMirror"] = mirror
    for key, value in overrides.items():
        config[f"trainer-platform:{key}"] = copy.deepcopy(value)
    config.setdefault("trainer-platform:images", {})["registryMirror"] = MIRROR
    components = config.setdefault("trainer-platform:components", {})
    for name, values in placement_values().items():
        component = components.setdefault(name, {}) or {}
        component["values"] = deep_merge(component.get("values") or {}, values)
        components[name] = component
    nfs = (config.get("trainer-platform:storage") or {}).get("nfs")
    if nfs is not None:
        driver = nfs.setdefault("driver", {})
        driver["values"] = deep_merge(driver.get("values") or {}, NFS_DRIVER_VALUES)
    return doc


class PulumiProject:
    """The generated project directory and every CLI call made on it."""

    def __init__(self, toolchain: Toolchain, workdir: Path, *, kubeconfig: Path, ca_bundle: Path) -> None:
        self.toolchain = toolchain
        self.workdir = workdir
        self.kubeconfig = kubeconfig
        self.ca_bundle = ca_bundle
        self.state_dir = workdir / "state"
        self.policy_dir = workdir / "policy"
        self.results: list[Result] = []

    # -- files ---------------------------------------------------------------
    def write(self, stack: dict[str, Any]) -> None:
        """Pulumi.yaml, Pulumi.<stack>.yaml and the policy pack shim."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.state_dir.mkdir(exist_ok=True)
        home = {**os.environ, "PULUMI_HOME": str(self.workdir / "home")}
        subprocess.run(["bash", str(LOGS_OFF_SCRIPT)], env=home, check=True, capture_output=True, text=True)
        project = yaml.safe_load((CHECKOUT / "Pulumi.yaml").read_text())
        project["runtime"]["options"]["virtualenv"] = str(self.toolchain.venv)
        project["main"] = os.path.relpath(CHECKOUT, self.workdir)
        project.pop("stackConfigDir", None)
        (self.workdir / "Pulumi.yaml").write_text(yaml.safe_dump(project, sort_keys=False))
        self.write_stack(stack)
        pack = yaml.safe_load((CHECKOUT / "policy" / "PulumiPolicy.yaml").read_text())
        pack["runtime"]["options"]["virtualenv"] = str(self.toolchain.venv)
        self.policy_dir.mkdir(exist_ok=True)
        (self.policy_dir / "PulumiPolicy.yaml").write_text(yaml.safe_dump(pack, sort_keys=False))
        (self.policy_dir / "__main__.py").write_text(
            '"""Runs the repository\'s policy pack (only its virtualenv differs)."""\n'
            "import runpy\n\n"
            f"runpy.run_path({str(CHECKOUT / 'policy' / '__main__.py')!r}, run_name='__main__')\n"
        )

    def write_stack(self, stack: dict[str, Any]) -> None:
        """Replace the stack file's config (secrets set with ``config_secret`` must be set again)."""
        path = self.workdir / f"Pulumi.{STACK}.yaml"
        current = yaml.safe_load(path.read_text()) if path.exists() else {}
        doc = copy.deepcopy(stack)
        if current and "encryptionsalt" in current:
            doc["encryptionsalt"] = current["encryptionsalt"]
        path.write_text(yaml.safe_dump(doc, sort_keys=False))

    # -- running -------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = self.toolchain.env()
        env.update(
            PULUMI_HOME=str(self.workdir / "home"),
            PULUMI_BACKEND_URL=f"file://{self.state_dir}",
            PULUMI_CONFIG_PASSPHRASE=PASSPHRASE,
            KUBECONFIG=str(self.kubeconfig),
            # the chart mirror's certificate is signed by the sandbox CA, as a private mirror's would be
            SSL_CERT_FILE=str(self.ca_bundle),
            PYTHONPATH=str(CHECKOUT),
            PULUMI_STACK=STACK,
            PULUMI_POLICY_PACK=str(self.policy_dir),
            **WORKFLOW_ENV,
        )
        env.pop("PULUMI_ACCESS_TOKEN", None)
        return env

    def run(self, *args: str, check: bool = True, timeout: float = 1800, env: dict[str, str] | None = None) -> Result:
        """Run ``pulumi <args>`` in the project; on failure raise with the engine's diagnostics."""
        return self._exec(
            [str(self.toolchain.pulumi), *args, "--non-interactive"], check=check, timeout=timeout, env=env
        )

    def _exec(self, cmd: list[str], *, check: bool, timeout: float, env: dict[str, str] | None = None) -> Result:
        start = time.monotonic()
        full_env = {**self.env(), **(env or {})}
        # in a session of its own: the terminal's Ctrl-C reaches the test, which cancels the CLI exactly once (a
        # second SIGINT makes the engine give up at once) and waits for it (``cancel``)
        proc = subprocess.Popen(
            cmd,
            cwd=self.workdir,
            env=full_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except BaseException:  # Ctrl-C, SIGTERM, the timeout
            self.cancel(proc)
            raise
        result = Result(tuple(cmd[1:]), proc.returncode, stdout, stderr, round(time.monotonic() - start, 1))
        self.results.append(result)
        if check and proc.returncode != 0:
            raise PulumiError(
                f"`pulumi {' '.join(cmd[1:])}` exited {proc.returncode} after {result.seconds} s:\n"
                f"{diagnostics(result.output)}"
            )
        return result

    @uninterruptible
    def cancel(self, proc: subprocess.Popen[str]) -> None:
        """Stop an interrupted CLI run and everything it started: one SIGINT (the engine cancels its steps, then ends
        its plugins), SIGKILL after ``CANCEL_GRACE``, then every process still naming the project (its plugins run
        in process groups of their own: a killed engine orphans them, with ``PULUMI_HOME`` in their environment)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.communicate(timeout=CANCEL_GRACE)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        for line in leftovers.processes_of(self.workdir):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(line.split(":", 1)[0]), signal.SIGKILL)
        proc.communicate()  # the pipes' ends (a plugin that held them is gone)
        print(f"[e2e] pulumi (pid {proc.pid}) interrupted: exited {proc.returncode}, its plugins ended", flush=True)

    def init(self) -> None:
        self.run("login", f"file://{self.state_dir}")
        self.run("stack", "init", STACK, "--secrets-provider", "passphrase")

    def config_secret(self, path: str, value: str) -> None:
        self.run("config", "set", "--secret", "--path", path, value, "--stack", STACK)

    def preview(self, *extra: str, check: bool = True, timeout: float = 1800) -> Result:
        """The PR workflow's preview (``.ci/pulumi-preview``): ``--diff`` with the policy pack enforced."""
        return self._exec(["bash", str(PREVIEW_SCRIPT), *extra], check=check, timeout=timeout)

    def drift(self, timeout: float = 1800) -> Result:
        """The scheduled drift check (``.ci/pulumi-drift``): exit 0 none, 1 drift, 2 the check failed."""
        return self._exec(["bash", str(DRIFT_SCRIPT)], check=False, timeout=timeout)

    def up(self, *extra: str, check: bool = True, timeout: float = 1800, env: dict[str, str] | None = None) -> Result:
        """With the policy pack enforced, as the deploy workflow runs it (pulumi-up.yml, ``policyPacks: policy``)."""
        args = ("up", "--yes", "--skip-preview", "--stack", STACK, "--policy-pack", str(self.policy_dir), *extra)
        return self.run(*args, check=check, timeout=timeout, env=env)

    def destroy(self, *extra: str, check: bool = True) -> Result:
        """With its preview, as documented: the preview refuses protected deletions before anything is deleted."""
        return self.run("destroy", "--yes", "--stack", STACK, *extra, check=check)

    def export(self) -> dict[str, Any]:
        """The stack's state (``pulumi stack export``), secrets left encrypted."""
        data: dict[str, Any] = json.loads(self.run("stack", "export", "--stack", STACK).stdout)
        return data

    def state_files_text(self) -> str:
        """Everything the file backend wrote (checkpoints, history, backups)."""
        return "\n".join(read_state_file(p) for p in sorted(self.state_dir.rglob("*")) if p.is_file())


@dataclass
class Installation:
    """An empty control plane, the chart mirror and a Pulumi project whose stack points at both."""

    sandbox: ChartSandbox
    registry: ChartRegistry
    project: PulumiProject

    def config(self, base: dict[str, Any], **overrides: Any) -> dict[str, Any]:
        ctx = yaml.safe_load(self.sandbox.kubeconfig.read_text())["current-context"]
        return stack_config(base, context=ctx, mirror=self.registry.mirror, **overrides)


def chart_archives() -> list[Path]:
    """The official charts the mirror serves (``charts.repositoryMirror``)."""
    return sorted((shared_dir() / "charts").glob("*.tgz"))


@contextmanager
def installation(work: Path, base: dict[str, Any], sandbox: ChartSandbox | None = None) -> Iterator[Installation]:
    """Build the toolchain (unless ``SANDBOX_NO_BUILD=1``: the runner built it), start the sandbox (its real node and
    the mirror of charts and images; ``sandbox``: a not yet started one, else a ``ChartSandbox`` in
    ``work/sandbox``), init the stack with ``base``; everything is stopped on exit, and checked to be."""
    toolchain = Toolchain()
    if os.environ.get("SANDBOX_NO_BUILD") != "1":
        toolchain.build()
    sandbox = sandbox or ChartSandbox(work / "sandbox", archives=chart_archives())
    with sandbox:
        assert sandbox.registry is not None
        registry = sandbox.registry
        project = PulumiProject(
            toolchain, work / "project", kubeconfig=sandbox.kubeconfig, ca_bundle=sandbox.ca.cert_path
        )
        found = Installation(sandbox, registry, project)
        project.write(found.config(base))
        project.init()
        yield found
    _nothing_left(work, registry, sandbox)


def _nothing_left(work: Path, registry: ChartRegistry, sandbox: ChartSandbox) -> None:
    """The control plane, the node with its pods and network, the engine and its plugins, and the mirror are
    gone."""
    host, _, port = registry.host.rpartition(":")
    deadline = time.monotonic() + 15  # a killed process may take a moment to leave /proc
    while (still := leftovers.processes_of(work)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if leftovers.answering(host, int(port)):
        still.append(f"the chart mirror still answers on {registry.host}")
    still += [f"{what}: {found}" for what, found in sandbox.leftovers().items()]
    if still:
        raise AssertionError("still running or left after the installation stopped:\n" + "\n".join(still))
