"""Where the upstream CRD files come from: the shared reference folder, or a pinned, checksummed fetch."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import urllib.request
import zipfile
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from trainer_infra.core.upstream import karpenter
from trainer_infra.sandbox.versions import VersionSet, go_mod_download, monitoring_crd_files, shared_dir

ENV = "TRAINER_PLATFORM_CRDS"
REPO_ROOT = Path(__file__).resolve().parents[2]
# libyaml's loader parses the ~1 MB Trainer CRDs 30x faster than pure Python (0.2 s vs 5.5 s each).
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainer-platform" / "crds"


def _sources() -> list[dict[str, str]]:
    text = resources.files("tests.conformance").joinpath("crd_sources.yaml").read_text()
    files: list[dict[str, str]] = yaml.safe_load(text)["files"]
    return files


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch_pinned(cache: Path = CACHE, opener: Any = urllib.request.urlopen) -> Path:
    """Download every pinned CRD not yet cached; refuse any whose sha256 differs from the pin."""
    for entry in _sources():
        target = cache / entry["path"]
        if target.is_file() and _sha256(target.read_bytes()) == entry["sha256"]:
            continue
        try:
            with opener(entry["url"], timeout=60) as response:
                data = response.read()
        except OSError as exc:  # URLError, timeouts, refused connections: no network here
            raise RuntimeError(
                f"the upstream CRDs are not in {shared_dir() / 'crds'} and the pinned download of {entry['url']} "
                f"failed ({exc}): put the shared reference folder beside the repository, or point "
                f"TRAINER_PLATFORM_SHARED (or {ENV}) at it"
            ) from None
        if _sha256(data) != entry["sha256"]:
            raise RuntimeError(f"{entry['url']}: sha256 {_sha256(data)} != pinned {entry['sha256']}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return cache


def crds_dir() -> Path:
    """TRAINER_PLATFORM_CRDS, else the shared folder's crds/ (TRAINER_PLATFORM_SHARED, default ../shared), else
    the pinned fetch into the cache."""
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured)
    shared = shared_dir() / "crds"
    return shared if shared.is_dir() else fetch_pinned()


@cache
def load_crds(root: str, component: str, version: str) -> dict[tuple[str, str], dict[str, Any]]:
    """(apiVersion, kind) → the served version's openAPIV3Schema, for one component release."""
    folder = Path(root) / component / f"v{version}"
    if not folder.is_dir():
        raise FileNotFoundError(f"no CRDs for {component} {version} in {folder}")
    return _schemas(tuple(sorted(folder.glob("*.yaml"))))


@cache
def monitoring_crds() -> dict[tuple[str, str], dict[str, Any]]:
    """The monitoring.coreos.com kinds the observability block creates, from the pinned
    prometheus-operator Go module (the same files the e2e sandbox installs)."""
    return _schemas(tuple(monitoring_crd_files(VersionSet().prometheus_operator)))


def _schemas(paths: tuple[Path, ...]) -> dict[tuple[str, str], dict[str, Any]]:
    return _schemas_of(tuple(path.read_text() for path in paths))


#: Karpenter's CRDs, read from the Go modules of the releases the karpenter backend targets: module → (version,
#: the zip's go.sum hash, the CRD files in it). The core module's NodePool is the one every provider starts from;
#: the AWS provider ships its own copy with AWS's label rules added, and the EC2NodeClass.
KARPENTER_MODULES = {
    karpenter.CORE_MODULE: (
        karpenter.CORE_VERSION,  # the version the opt-in e2e runs (tests/e2e/test_karpenter_kwok.py)
        "h1:5SEptlAvsOZbNg4qg8OSdF1qi6BEZHZLA020nXY7jGw=",
        ("pkg/apis/crds/karpenter.sh_nodepools.yaml",),
    ),
    "github.com/aws/karpenter-provider-aws": (
        "1.15.2",
        "h1:RGw64PB2ROUHZIUhBqjO78l3zJ9YctnWeullrr4cxYI=",
        ("pkg/apis/crds/karpenter.sh_nodepools.yaml", "pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml"),
    ),
}


def zip_hash(archive: Path) -> str:
    """The go.sum `h1:` hash of a module zip (golang.org/x/mod/sumdb/dirhash Hash1 over the zip's files)."""
    with zipfile.ZipFile(archive) as z:
        lines = "".join(f"{hashlib.sha256(z.read(n)).hexdigest()}  {n}\n" for n in sorted(z.namelist()))
    return "h1:" + base64.b64encode(hashlib.sha256(lines.encode()).digest()).decode()


def module_zip(module: str, version: str) -> Path:
    """The module's zip in Go's download cache, fetched through the Go module proxy if missing. Go checks it
    against sum.golang.org; `go` older than the module's `go` line still fetches the zip but reports an error,
    which is why the zip is taken from the JSON whatever the exit status."""
    proc = go_mod_download(module, version)
    try:
        archive = Path(json.loads(proc.stdout)["Zip"])
    except (json.JSONDecodeError, KeyError):
        raise RuntimeError(f"cannot download {module} v{version}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}") from None
    return archive


def karpenter_crd_texts(modules: dict[str, tuple[str, str, tuple[str, ...]]] = KARPENTER_MODULES) -> dict[str, str]:
    """`<module>/<file>` → the CRD file's text, from each module's zip after checking its hash against the pin."""
    out: dict[str, str] = {}
    for module, (version, pinned, files) in modules.items():
        archive = module_zip(module, version)
        if zip_hash(archive) != pinned:
            raise RuntimeError(f"{archive}: {zip_hash(archive)} != pinned {pinned}")
        with zipfile.ZipFile(archive) as z:
            for name in files:
                out[f"{module}/{name}"] = z.read(f"{module}@v{version}/{name}").decode()
    return out


@cache
def karpenter_crds(module: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The schemas of one Karpenter module's CRDs (KARPENTER_MODULES)."""
    texts = karpenter_crd_texts({module: KARPENTER_MODULES[module]})
    return _schemas_of(tuple(texts.values()))


def _schemas_of(texts: tuple[str, ...]) -> dict[tuple[str, str], dict[str, Any]]:
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for text in texts:
        crd = yaml.load(text, Loader=_Loader)  # a safe loader (C or pure Python)
        group, kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        for v in crd["spec"]["versions"]:
            if v.get("served", True):
                out[(f"{group}/{v['name']}", kind)] = {
                    "schema": v["schema"]["openAPIV3Schema"],
                    "scope": crd["spec"]["scope"],
                    "deprecated": bool(v.get("deprecated", False)),
                }
    return out
