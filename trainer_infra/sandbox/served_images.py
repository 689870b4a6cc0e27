"""Which image the sandbox's mirror serves for each reference a render runs: the CPU stand-in of every runtime
container that has one (the trainer's, the initializers'), and the team file service's."""

from __future__ import annotations

from typing import Any

from trainer_infra.sandbox.node import MIRROR
from trainer_infra.sandbox.oci_images import Image
from trainer_infra.sandbox.runtime_images import STAND_INS, TORCH, StandInError, stand_in_image
from trainer_infra.storage import files

Obj = dict[str, Any]


def runtime_images(render: Any) -> tuple[dict[str, Image], list[str]]:
    """The CPU stand-in of every image the render's runtimes run that has one (the trainer's, the initializers';
    its reference without the mirror → the image), and the runtimes left without one because a stand-in is not
    built (torch's must be); the team file service's image is torch's too."""
    read: dict[str, Image] = {}
    images: dict[str, Image] = {}
    missing = []
    for runtime in render.of_kind("ClusterTrainingRuntime") + render.of_kind("TrainingRuntime"):
        name = runtime["metadata"]["name"]
        for stand_in in (s for s in STAND_INS if name in s.runtimes):
            upstream = step_container(runtime, stand_in.container)["image"].removeprefix(f"{MIRROR}/")
            try:
                images[upstream] = read.get(stand_in.name) or read.setdefault(stand_in.name, stand_in_image(stand_in))
            except StandInError:
                if stand_in is TORCH:
                    raise
                missing.append(name)
    # the team file service's python image: the torch stand-in has python3 (its standard library is all it runs)
    for deployment in render.of_kind("Deployment"):
        if deployment["metadata"]["name"] == files.NAME:
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                upstream = container["image"].removeprefix(f"{MIRROR}/")
                images[upstream] = read.get(TORCH.name) or read.setdefault(TORCH.name, stand_in_image(TORCH))
    return images, sorted(set(missing))


def step_container(runtime: Obj, name: str) -> Obj:
    """The container ``name`` (``node``, ``model-initializer``, ``dataset-initializer``) of a runtime."""
    for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        for container in job["template"]["spec"]["template"]["spec"]["containers"]:
            if container["name"] == name:
                return dict(container)
    raise KeyError(f"runtime {runtime['metadata']['name']} has no container {name}")


def trainer_container(runtime: Obj) -> Obj:
    """The trainer container (``node`` in the ``node`` replicated job) of a (Cluster)TrainingRuntime."""
    job = next(j for j in runtime["spec"]["template"]["spec"]["replicatedJobs"] if j["name"] == "node")
    container: Obj = next(c for c in job["template"]["spec"]["template"]["spec"]["containers"] if c["name"] == "node")
    return container
