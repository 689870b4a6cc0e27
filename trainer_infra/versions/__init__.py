"""Pinned component versions and the compatibility matrix (data in matrix.yaml)."""

from trainer_infra.versions.matrix import (
    COMPONENTS,
    MATRIX,
    CompatFinding,
    check_compatibility,
)

__all__ = ["COMPONENTS", "MATRIX", "CompatFinding", "check_compatibility"]
