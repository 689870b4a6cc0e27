"""The base every config model shares, so that all of them reject unknown keys the same way."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class StrictModel(BaseModel):
    """Stack files are camelCase YAML; a key we do not know is an error, never silently dropped."""

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        frozen=True,
        validate_default=True,
    )
