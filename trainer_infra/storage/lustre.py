"""A Lustre file system per team claim: Amazon FSx for Lustre or Google Cloud Managed Lustre."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from trainer_infra.core.errors import ConfigIssue
from trainer_infra.core.model import StrictModel
from trainer_infra.core.upstream import aws, gke
from trainer_infra.storage.backend import GI, StorageDefaults


class LustreBackend(StrictModel):
    """A Lustre file system per claim: Amazon FSx for Lustre (`fsx.csi.aws.com`) or Google Cloud Managed
    Lustre (`lustre.csi.storage.gke.io`)."""

    provider: Literal["fsx", "gke"]
    subnet_id: str | None = Field(default=None, description="fsx: subnet of the file systems.")
    security_group_ids: list[str] = Field(default_factory=list, description="fsx: security groups.")
    deployment_type: Literal["SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2"] = Field(
        default="PERSISTENT_2", description="fsx: durability; SCRATCH_2 loses data when a server fails."
    )
    per_unit_storage_throughput: int | None = Field(
        default=None, description="MB/s per TiB (fsx PERSISTENT_*: 125-1000; gke: 125, 250, 500 or 1000)."
    )
    network: str | None = Field(default=None, description="gke: VPC network of the cluster.")


# Settings that belong to one provider only (the other one's CSI driver ignores them).
PROVIDER_FIELDS = {
    "fsx": (
        ("subnet_id", "subnetId"),
        ("security_group_ids", "securityGroupIds"),
        ("deployment_type", "deploymentType"),
    ),
    "gke": (("network", "network"),),
}
# MB/s per TiB each accepts: FSx (PerUnitStorageThroughput, SSD) per deployment type; GKE Managed Lustre.
THROUGHPUT: dict[str, tuple[int, ...]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
    "SCRATCH_2": (),
    "gke": (125, 250, 500, 1000),
}


class LustreStorage(StorageDefaults):
    name = "lustre"
    settings_model = LustreBackend
    driver = None  # provisioner() picks it by provider

    def provisioner(self, s: LustreBackend) -> str | None:
        return aws.FSX_CSI_DRIVER if s.provider == "fsx" else gke.LUSTRE_CSI_DRIVER

    def parameters(self, s: LustreBackend) -> dict[str, str]:
        out: dict[str, str] = {}
        if s.provider == "fsx":
            out = {"deploymentType": s.deployment_type, "fileSystemTypeVersion": "2.15"}
            if s.subnet_id:
                out["subnetId"] = s.subnet_id
            if s.security_group_ids:
                out["securityGroupIds"] = ",".join(s.security_group_ids)
        elif s.network:
            out["network"] = s.network
        if s.per_unit_storage_throughput is not None:
            out["perUnitStorageThroughput"] = str(s.per_unit_storage_throughput)
        return dict(sorted(out.items()))

    def minimum_bytes(self, s: LustreBackend) -> tuple[int, str] | None:
        return (1200 * GI, "FSx for Lustre file systems start at 1200Gi") if s.provider == "fsx" else None

    def checks(self, s: LustreBackend) -> list[ConfigIssue]:
        at = "storage.lustre"
        other = {"fsx": "gke", "gke": "fsx"}[s.provider]
        issues = [
            ConfigIssue(
                f"{at}.{key}", f"a {other} setting, no effect with provider {s.provider}", None, f"remove {key}"
            )
            for field, key in PROVIDER_FIELDS[other]
            if field in s.model_fields_set
        ]
        allowed = THROUGHPUT[s.provider if s.provider == "gke" else s.deployment_type]
        throughput = s.per_unit_storage_throughput
        if throughput is not None and throughput not in allowed:
            what = f"provider {s.provider}" if s.provider == "gke" else f"deploymentType {s.deployment_type}"
            hint = (
                f"one of {', '.join(map(str, allowed))}" if allowed else "remove it (SCRATCH_2 has a fixed throughput)"
            )
            issues.append(
                ConfigIssue(f"{at}.perUnitStorageThroughput", f"not a throughput of {what}", str(throughput), hint)
            )
        if s.provider != "fsx":
            return issues
        if not s.subnet_id:
            hint = "FSx for Lustre creates each file system in this subnet"
            issues.append(ConfigIssue("storage.lustre.subnetId", "required with provider fsx", None, hint))
        if s.deployment_type.startswith("PERSISTENT") and s.per_unit_storage_throughput is None:
            message = f"required with deploymentType {s.deployment_type}"
            hint = "MB/s per TiB: 125, 250, 500 or 1000 for PERSISTENT_2 (50, 100 or 200 for PERSISTENT_1)"
            issues.append(ConfigIssue("storage.lustre.perUnitStorageThroughput", message, None, hint))
        return issues


BACKEND = LustreStorage()
