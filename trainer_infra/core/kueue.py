"""Kept only for modules other branches are moving (the data cache's deputies, `simulate/`): Kueue's names live in
`core/upstream/kueue.py`. Delete once those import it from there."""

from __future__ import annotations

from trainer_infra.core.upstream.kueue import PRIORITY_LABEL, QUEUE_LABEL, TOPOLOGY_ANNOTATIONS

__all__ = ["PRIORITY_LABEL", "QUEUE_LABEL", "TOPOLOGY_ANNOTATIONS"]
