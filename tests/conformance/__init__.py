"""Validation of rendered objects against upstream truth (CRD schemas + CEL, Kubernetes core schemas).

Needs the test extras (`kubernetes-validate`, `common-expression-language`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conformance.crds import crds_dir, karpenter_crds, load_crds, monitoring_crds
from tests.conformance.schema import SchemaValidator
from trainer_infra.core.types import DNS_SUBDOMAIN


@dataclass(frozen=True)
class Finding:
    obj: str
    message: str

    def __str__(self) -> str:
        return f"{self.obj}: {self.message}"


def describe(obj: dict[str, Any]) -> str:
    md = obj.get("metadata", {})
    ns = f"{md['namespace']}/" if md.get("namespace") else ""
    return f"{obj.get('kind')} {ns}{md.get('name')} ({obj.get('apiVersion')})"


class Conformance:
    """Validates objects for one version set: CRD kinds against the pinned CRDs, core kinds against
    the Kubernetes OpenAPI schemas of the stack's minor version."""

    def __init__(self, kubernetes: str, versions: dict[str, str], root: Path | None = None) -> None:
        self.kubernetes = kubernetes
        folder = str(root or crds_dir())
        self.crds: dict[tuple[str, str], dict[str, Any]] = {}
        for component, version in versions.items():
            self.crds.update(load_crds(folder, component, version))
        self.crds.update(monitoring_crds())

    def check(self, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[Finding]:
        key = (str(obj.get("apiVersion")), str(obj.get("kind")))
        what = describe(obj)
        if key not in self.crds and key[0].startswith(("karpenter.sh/", "karpenter.k8s.aws/")):
            # the CRDs the AWS provider installs (NodePool with its label rules, EC2NodeClass), from its Go module
            self.crds.update(karpenter_crds("github.com/aws/karpenter-provider-aws"))
        if key in self.crds:
            return [Finding(what, e) for e in self._check_cr(obj, self.crds[key], old)]
        return [Finding(what, e) for e in self._check_core(obj)]

    def check_all(self, objs: list[dict[str, Any]]) -> list[Finding]:
        return [f for o in objs for f in self.check(o)]

    def _check_cr(self, obj: dict[str, Any], crd: dict[str, Any], old: dict[str, Any] | None) -> list[str]:
        import re

        errors = SchemaValidator().validate(obj, crd["schema"], old)
        md = obj.get("metadata", {})
        if not re.match(DNS_SUBDOMAIN, str(md.get("name", ""))) or len(str(md.get("name", ""))) > 253:
            errors.append(f"metadata.name: not a DNS subdomain: {md.get('name')!r}")
        namespaced = crd["scope"] == "Namespaced"
        if namespaced != bool(md.get("namespace")):
            errors.append(
                f"metadata.namespace: {crd['scope']} kind {'needs' if namespaced else 'must not have'} a namespace"
            )
        if crd["deprecated"]:
            errors.append(f"{obj['apiVersion']} is deprecated for {obj['kind']}")
        return errors

    def _check_core(self, obj: dict[str, Any]) -> list[str]:
        import kubernetes_validate

        try:
            kubernetes_validate.validate(obj, self.kubernetes, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.absolute_path) if hasattr(exc, "absolute_path") else ""
            return [f"{where or '<root>'}: {exc.message}"]
        except kubernetes_validate.SchemaNotFoundError:
            return [f"no schema for {obj.get('apiVersion')} {obj.get('kind')} in Kubernetes {self.kubernetes}"]
        return []
