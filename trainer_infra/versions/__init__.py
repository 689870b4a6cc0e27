"""Pinned component versions and the compatibility matrix (data in matrix.yaml)."""

from trainer_infra.versions.matrix import MATRIX, CompatFinding, Release, check_compatibility

__all__ = ["MATRIX", "CompatFinding", "Release", "check_compatibility"]
