"""Round-trip objects through the official `kubeflow-trainer-api` models of a given Trainer version.

The models ignore unknown fields, so `Model.from_dict(obj).to_dict()` silently drops a misspelt or
version-foreign field: every key of the object that is missing afterwards is reported. The test extras
install 2.3.0 (the SDK needs it); other versions are pip-installed once with `--target` into
~/.cache/trainer-platform/trainer-api-<version> and imported in a subprocess, so two versions of the same
package never meet in one interpreter. `python -m tests.trainer_api 2.2.1` pre-installs one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "trainer-platform"
PACKAGE = "kubeflow-trainer-api"

_SCRIPT = """
import json, sys
from importlib import metadata
from kubeflow_trainer_api import models
want = sys.argv[1]
have = metadata.version("kubeflow-trainer-api")
assert have == want, f"imported kubeflow-trainer-api {have}, wanted {want}"
out = []
for obj in json.load(sys.stdin):
    model = getattr(models, "TrainerV1alpha1" + obj["kind"])
    out.append(model.from_dict(obj).to_dict())
json.dump(out, sys.stdout, default=str)
"""


def models_dir(version: str) -> Path | None:
    """None when the environment already has this version; else a --target folder holding it."""
    if metadata.version(PACKAGE) == version:
        return None
    target = CACHE / f"trainer-api-{version}"
    if (target / "kubeflow_trainer_api").is_dir():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=CACHE, prefix=f".trainer-api-{version}-"))
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(staging), f"{PACKAGE}=={version}"],
        check=True,
    )
    try:
        staging.rename(target)  # atomic: a parallel worker that lost the race keeps the winner's copy
    except OSError:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def round_trip(objects: list[dict[str, Any]], version: str) -> list[dict[str, Any]]:
    env = dict(os.environ)
    folder = models_dir(version)
    if folder is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(folder), env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, version],
        input=json.dumps(objects),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    result: list[dict[str, Any]] = json.loads(done.stdout)
    return result


def lost_fields(original: Any, after: Any, path: str = "") -> list[str]:
    """Paths present (and not null) in `original` but gone from `after`."""
    if isinstance(original, dict):
        if not isinstance(after, dict):
            return [path or "<root>"]
        lost = []
        for key, value in original.items():
            sub = f"{path}.{key}" if path else str(key)
            if value is None:
                continue
            lost += [sub] if key not in after else lost_fields(value, after[key], sub)
        return lost
    if isinstance(original, list):
        if not isinstance(after, list) or len(after) != len(original):
            return [path]
        return [
            p for i, (a, b) in enumerate(zip(original, after, strict=True)) for p in lost_fields(a, b, f"{path}[{i}]")
        ]
    return []


if __name__ == "__main__":
    for v in sys.argv[1:] or ["2.2.1"]:
        print(f"{PACKAGE} {v}: {models_dir(v) or 'installed in this environment'}")
