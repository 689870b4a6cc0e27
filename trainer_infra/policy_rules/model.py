"""What a rule sees and what it reports."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from trainer_infra.core.objects import CHART_TYPE

# How a secret input looks to a rule: the offline render writes Pulumi secrets as this string, and the
# policy pack turns the engine's secret markers into the same string before the rules run.
SECRET_MARK = "<secret>"


@dataclass(frozen=True)
class Subject:
    """One Pulumi resource as the rules see it.

    `props` are the resource inputs: the whole manifest for a Kubernetes object, `chart`/`version`/
    `namespace`/`values` for a Helm chart. `child_policy` is known offline only, where chart children
    are not registered (pulumi-kubernetes#3183): it holds the options the chart's transforms give
    them, e.g. `{"CustomResourceDefinition": {"protect": True}}`. Live, children are subjects themselves.
    """

    type: str
    name: str
    props: Mapping[str, Any]
    protect: bool = False
    child_policy: Mapping[str, Mapping[str, bool]] = field(default_factory=dict)

    @property
    def is_chart(self) -> bool:
        return self.type == CHART_TYPE

    @property
    def kind(self) -> str | None:
        """The Kubernetes kind for Kubernetes objects; None for charts, providers, dynamic resources."""
        if not self.type.startswith("kubernetes:") or self.is_chart or "apiVersion" not in self.props:
            return None
        return str(self.props.get("kind", "")) or None

    @property
    def label(self) -> str:
        """`ClusterQueue team-a`, `Namespace team-a`, `chart kueue`, or the type and name."""
        if self.kind:
            meta = self.props.get("metadata") or {}
            ns = meta.get("namespace")
            return f"{self.kind} {ns + '/' if ns else ''}{meta.get('name', self.name)}"
        if self.is_chart:
            return f"chart {self.name}"
        return f"{self.type} {self.name}"


@dataclass(frozen=True)
class Violation:
    rule: str
    subject: str  # Subject.label
    path: str  # where in the props, e.g. `spec.template.spec.containers[0].image`
    message: str
    hint: str = ""
    advisory: bool = False

    def render(self) -> str:
        where = f" at {self.path}" if self.path else ""
        level = "advisory" if self.advisory else "violation"
        text = f"[{self.rule}] {level}: {self.subject}{where}: {self.message}"
        return text + (f"\n    hint: {self.hint}" if self.hint else "")


# A finding before it is attached to a rule: (subject, path, message).
Finding = tuple[Subject, str, str]


@dataclass(frozen=True)
class Rule:
    """`scope="resource"` rules judge one subject at a time (CrossGuard ResourceValidationPolicy);
    `scope="stack"` rules need every subject (StackValidationPolicy), e.g. to tell team namespaces
    from controller namespaces."""

    name: str
    description: str
    hint: str
    scope: Literal["resource", "stack"]
    fn: Callable[[Sequence[Subject]], Iterable[Finding]]

    def check(self, subjects: Sequence[Subject], advisory: bool = False) -> list[Violation]:
        return [Violation(self.name, s.label, path, msg, self.hint, advisory) for s, path, msg in self.fn(subjects)]
