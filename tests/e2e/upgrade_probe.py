"""The upgrade e2e's measurements while a `pulumi up` replaces a controller: a probe that submits a valid object
again and again and records each refusal (the longest refusal window is what the upgrade runbook promises), and a
watch of the controller pods being replaced (readiness, restarts, a restarted container's previous log)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer_infra.sandbox.kube import ApiError, KubeClient

Obj = dict[str, Any]
JS = ("jobset.x-k8s.io/v1alpha2", "JobSet")
#: how long the probe waits between two rounds (a round: one try of each probe, ≈ 0.05–0.1 s idle)
PROBE_INTERVAL = 0.1
#: the longest refusal accepted: none was measured (docs/versions.md); this bound leaves room for a loaded machine
#: and fails on a regression such as a Deployment that stops the old pod before the new one serves
MAX_REFUSAL = 10.0


@dataclass
class Probe:
    """Submits a valid object as a server-side dry-run again and again; records when (wall clock) each try was
    refused. ``served`` says the answer came through the webhooks that judge it (their defaults are in it): a
    webhook skipped would not count as accepted."""

    name: str
    client: KubeClient
    obj: Obj
    served: Callable[[Obj], bool]
    tries: list[tuple[float, str]] = field(default_factory=list)

    def once(self) -> None:
        started = time.time()
        try:
            answer = self.client.create(self.obj, dry_run=True)
            self.tries.append((started, "" if self.served(answer) else "accepted without the webhooks' defaults"))
        except ApiError as exc:
            self.tries.append((started, exc.message[:300] or str(exc.status)))
        except Exception as exc:  # the connection itself
            self.tries.append((started, f"{type(exc).__name__}: {exc}"[:300]))

    def longest_refusal(self) -> tuple[float, int, list[str]]:
        """(seconds from the first refused try of the longest run of refusals to the next accepted one, refused
        tries in all, their distinct messages)."""
        longest, start = 0.0, None
        for at, error in self.tries:
            if error and start is None:
                start = at
            elif not error and start is not None:
                longest, start = max(longest, at - start), None
        if start is not None:
            longest = max(longest, time.time() - start)
        errors = [e for _, e in self.tries if e]
        return round(longest, 2), len(errors), sorted(set(errors))[:5]


def probe_jobset() -> Obj:
    """A JobSet as any client (Trainer, for a TrainJob) submits it, in a namespace no team policy covers: only
    JobSet's own webhooks (and Kueue's, which ignores a JobSet without a queue) judge it."""
    pod = {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}
    return {
        "apiVersion": JS[0],
        "kind": JS[1],
        "metadata": {"name": "upgrade-probe", "namespace": "default"},
        "spec": {"replicatedJobs": [{"name": "w", "replicas": 1, "template": {"spec": {"template": {"spec": pod}}}}]},
    }


@dataclass
class ControllerWatch:
    """What the component's controller pods did while the probes ran: when each one was Ready or not, and the
    end of a container's previous log when it restarted (it is gone once the rollout deletes the pod)."""

    client: KubeClient
    #: the component's controller pods, read again each round
    pods: Callable[[], list[Obj]]
    seen: list[str] = field(default_factory=list)
    state: dict[str, tuple[bool, int]] = field(default_factory=dict)
    last: float = 0.0

    def once(self) -> None:
        if time.time() - self.last < 1.0:
            return
        self.last = time.time()
        try:
            self._read()
        except Exception as exc:  # the API server busy: the next round reads again; never stops the probes
            self.seen.append(f"{time.strftime('%H:%M:%S')} not read: {type(exc).__name__}: {str(exc)[:200]}")

    def _read(self) -> None:
        for pod in self.pods():
            name = pod["metadata"]["name"]
            statuses = pod.get("status", {}).get("containerStatuses") or []
            now = (all(c.get("ready") for c in statuses) and bool(statuses), sum(c["restartCount"] for c in statuses))
            if self.state.get(name) == now:
                continue
            self.seen.append(f"{time.strftime('%H:%M:%S')} {name}: ready={now[0]} restarts={now[1]}")
            if name in self.state and now[1] > self.state[name][1]:
                for c in statuses:
                    try:
                        tail = self.client.log(name, pod["metadata"]["namespace"], c["name"], previous=True, tail=40)
                    except Exception as exc:
                        tail = f"(no previous log: {exc})"
                    self.seen.append(f"{name}/{c['name']} previous log:\n{tail}")
            self.state[name] = now
