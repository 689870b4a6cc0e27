"""Which objects hold user work, and the resource options that keep them.

Team namespaces and team claims are `protect`ed (Pulumi refuses to delete or replace them) and
`retainOnDelete` (dropping them from the program leaves them in the cluster) until the team is marked
`decommission: true` or the stack sets `allowDataLoss: true`. Both opt-ins only drop the protection;
the deletion happens in a later `pulumi up`, after a human removed the team on purpose.
"""

from __future__ import annotations

from trainer_infra.manifests.meta import DECOMMISSIONED, TEAM_LABEL
from trainer_infra.teams.model import TeamConfig

__all__ = ["TEAM_LABEL", "decommission_annotations", "team_data_protected"]


def team_data_protected(team: TeamConfig, allow_data_loss: bool) -> bool:
    return not (team.decommission or allow_data_loss)


def decommission_annotations(team: TeamConfig) -> dict[str, str] | None:
    return {DECOMMISSIONED: "true"} if team.decommission else None
