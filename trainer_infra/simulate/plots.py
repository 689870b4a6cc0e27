"""The report's PNG plots (matplotlib, the `simulate` extra): utilisation over time, each team's share of
what it received against its weight, wait distributions per team."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

matplotlib.use("Agg")  # files only, never a window

import matplotlib.pyplot as plt

from trainer_infra.simulate import metrics

if TYPE_CHECKING:
    from trainer_infra.simulate.run import Run


def write_plots(run: Run, series: dict[str, list[float]], out: Path) -> None:
    hours = [k * 60 / 3600 for k in range(max((len(v) for v in series.values()), default=0))]
    fig, ax = plt.subplots(figsize=(9, 4))
    bottom = [0.0] * len(hours)
    for cq, values in series.items():
        top = [b + v / max(run.capacity, 1) for b, v in zip(bottom, values, strict=True)]
        ax.fill_between(hours, bottom, top, step="post", label=cq, alpha=0.8)
        bottom = top
    ax.set(xlabel="trace time (h)", ylabel="share of the fleet's accelerators", ylim=(0, 1.05))
    ax.set_title(f"Fleet utilisation {run.label}".strip())
    ax.legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "utilisation.png", dpi=100)
    plt.close(fig)

    replayed = [j for j in run.jobs if not j.never_admissible]
    total = metrics.accelerator_seconds(replayed, run.until) or 1.0
    teams = sorted({j.team for j in replayed})
    got = [metrics.accelerator_seconds([j for j in replayed if j.team == t], run.until) / total for t in teams]
    weight_sum = sum(run.weights.get(t, 1.0) for t in teams) or 1.0
    want = [run.weights.get(t, 1.0) / weight_sum for t in teams]
    fig, ax = plt.subplots(figsize=(6, 4))
    xs = range(len(teams))
    ax.bar([x - 0.2 for x in xs], got, width=0.4, label="received share")
    ax.bar([x + 0.2 for x in xs], want, width=0.4, label="weight share")
    ax.set_xticks(list(xs), teams)
    ax.set(ylabel="share of admitted accelerator-seconds")
    ax.set_title(f"Share against weight {run.label}".strip())
    ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(out / "shares.png", dpi=100)
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(7, 4))
    waits = [[w / 60 for w in (j.wait for j in replayed if j.team == t) if w is not None] for t in teams]
    ax.boxplot([w or [0.0] for w in waits], tick_labels=teams, whis=(5, 95), showfliers=False)
    ax.set(ylabel="wait for admission (min, trace time)")
    ax.set_title(f"Waits per team (5th-95th percentile) {run.label}".strip())
    fig.tight_layout()
    fig.savefig(out / "waits.png", dpi=100)
    plt.close(fig)
