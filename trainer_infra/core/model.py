"""The base every config model shares, so that all of them reject unknown keys the same way; and the
container resources model several areas use."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from trainer_infra.core import kube
from trainer_infra.core.types import ContainerResource, NonNegativeQuantity


class StrictModel(BaseModel):
    """Stack files are camelCase YAML; a key we do not know is an error, never silently dropped."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
    )


#: The resources the charts' default values limit.
CHART_LIMITED = ("cpu", "memory")


class Resources(StrictModel):
    """A container's requests and limits, checked as the API server checks a pod's: no negative amounts,
    requests ≤ limits, extended resources (GPUs) whole and with request = limit."""

    requests: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict)
    limits: dict[ContainerResource, NonNegativeQuantity] = Field(default_factory=dict)

    def problems(self) -> list[tuple[str, str]]:
        """(`requests.cpu`-style key, problem) for what the API server would refuse in a pod."""
        return kube.requirements_problems(self.requests, self.limits)

    def as_k8s(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.requests:
            out["requests"] = dict(sorted(self.requests.items()))
        if self.limits:
            out["limits"] = dict(sorted(self.limits.items()))
        return out

    def as_chart_values(self) -> dict[str, dict[str, str | None]]:
        """A chart's `resources` value. Helm merges our values over the chart's defaults key by key, so a
        limit we leave out would keep the chart's own (Kueue's and JobSet's `limits.cpu: 2`); a null deletes
        it. Every cpu/memory limit not set here is therefore null: what we configure is all there is."""
        out: dict[str, dict[str, str | None]] = {k: dict(v) for k, v in self.as_k8s().items()}
        limits = out.setdefault("limits", {})
        for name in CHART_LIMITED:
            limits.setdefault(name, None)
        out["limits"] = dict(sorted(limits.items()))
        return out
