"""The base every config model shares, so that all of them reject unknown keys the same way; and the
container resources model several areas use."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from trainer_infra.core.types import Quantity


class StrictModel(BaseModel):
    """Stack files are camelCase YAML; a key we do not know is an error, never silently dropped."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
    )


class Resources(StrictModel):
    requests: dict[str, Quantity] = Field(default_factory=dict)
    limits: dict[str, Quantity] = Field(default_factory=dict)

    def as_k8s(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        if self.requests:
            out["requests"] = dict(sorted(self.requests.items()))
        if self.limits:
            out["limits"] = dict(sorted(self.limits.items()))
        return out
