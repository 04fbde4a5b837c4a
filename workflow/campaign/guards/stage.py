"""The guard stages: one job per (trained run, guard task) and one per guard task for the base
model, each writing its per-item scores; then one job that decides every cell against the base
on every guard (campaign.guards.decide) and writes the scored-items table, guards.json and the
guard lines of the verdict.
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.evaluate import ITEM_COLUMNS  # the scored-items table every producer writes
from campaign.guards.decide import BASE, decide_guards
from campaign.guards.harness import SPLIT, model_arguments, score_guard


def _write_items(rows: list[dict], variant: str, cell, seed, path: Path) -> None:
    import pandas as pd

    frame = pd.DataFrame(
        [{"variant": variant, "cell": cell, "seed": seed, "split": SPLIT, **r} for r in rows],
        columns=list(ITEM_COLUMNS),
    )
    frame.to_parquet(path, index=False)


def stage_guard(ctx) -> None:
    """A trained run's model (a full folder, or a LoRA adapter over the base) on one guard."""
    task = ctx.spec["guard"]["task"]
    model = Path(ctx.inputs["model"][0])
    base = Path(ctx.inputs["base_model"][0])
    where = f"guard {task}, run {ctx.spec['run']}"
    rows = score_guard(model_arguments(model, base), task, ctx.inputs, where)
    # the cell and seed are the plan's: the deciding stage reads them from the plan table
    _write_items(rows, ctx.spec["run"], None, None, ctx.outputs["scores"])


def stage_guard_base(ctx) -> None:
    """The base model (model.source) on one guard."""
    task = ctx.spec["guard"]["task"]
    base = Path(ctx.inputs["base_model"][0])
    rows = score_guard({"pretrained": str(base)}, task, ctx.inputs, f"guard {task}, base")
    _write_items(rows, BASE, BASE, 0, ctx.outputs["scores"])


def guard_items(base_paths: list[Path], run_paths: list[Path], plan: Path):
    """The scored-items table of every guard job, each run's cell and seed from the plan."""
    import pandas as pd

    from campaign.evaluate import read_plan

    factors, cells, seeds, _, _ = read_plan(plan)
    frames = [pd.read_parquet(p) for p in base_paths]
    for path in run_paths:
        frame = pd.read_parquet(path)
        run = str(frame["variant"].iloc[0]) if len(frame) else None
        if run not in cells:
            raise CampaignError(f"{path}: run {run} is not in the plan table")
        named = ", ".join(f"{f}={v}" for f, v in zip(factors, cells[run], strict=True))
        frames.append(frame.assign(cell=named or "baseline", seed=seeds[run]))
    return pd.concat(frames, ignore_index=True)[list(ITEM_COLUMNS)]


def stage_guards(ctx) -> None:
    """Every cell against the base on every guard: the items table, guards.json, summary.txt."""
    s = ctx.spec
    items = guard_items(ctx.inputs["base_scores"], ctx.inputs["run_scores"], ctx.inputs["runs"][0])
    decided = decide_guards(items, s["guards"], s["confidence"], s["power"])
    items.to_parquet(ctx.outputs["table"], index=False)
    ctx.outputs["guards"].write_text(json.dumps(decided, indent=2, sort_keys=True) + "\n")
    ctx.outputs["summary"].write_text("\n".join(decided["lines"]) + "\n")
