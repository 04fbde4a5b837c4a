"""Which runs the Snakemake DAG has, for the rules' input functions (workflow/rules/common.smk).

A fixed campaign's runs are known from params (ablation.max_runs cuts the plan), so the whole
DAG is visible to `snakemake -n` from the start. With ablation.budget_hours the plan table (a
checkpoint: plan.smk) decides from the preflight's measurements; with ablation.adaptive each look
(a checkpoint: evaluate.smk) lists the runs so far and appends more, and the campaign's runs are
those of the first look that appends nothing. Asking a checkpoint before it is written is how
Snakemake defers the rest of the DAG, so these are input functions, not lists.

Here rather than in common.smk: Snakemake's linter wants rule files without functions, and a
function in a package can be read and tested without Snakemake. `checkpoints` is Snakemake's
(the `checkpoints` global of a Snakefile), asked only when an input function runs.
Light imports only: the DAG imports this module on every `snakemake` call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from campaign.core.defaults import train_key
from campaign.core.io import read_json
from campaign.plan.columns import kept_in_table
from campaign.plan.look_runs import LOOK_KEYS
from campaign.plan.planner import kept_runs, run_priorities

# What a rule takes as one input: a list of paths, or an input function of the job's wildcards.
Paths = list[str] | Callable[[Any], list[str]]


class DagRuns:
    """The campaign's runs as the DAG asks for them. config: the validated params;
    checkpoints: Snakemake's checkpoints (plan_table, look)."""

    def __init__(self, config: dict, checkpoints: Any):
        self.config = config
        self.checkpoints = checkpoints
        # The runs Snakemake trains, in the plan's order (ablation.max_runs cut).
        self.runs = kept_runs(config)
        self.budget_cut = config["ablation"]["budget_hours"] is not None
        self.adaptive = bool(config["ablation"]["adaptive"]["enabled"])
        self._priority = run_priorities(config)

    # ---------------------------------------------------------------- the runs
    def run_paths(self, pattern: str) -> Paths:
        """`pattern` (with `{run}`) for every kept run: a list, or with ablation.budget_hours
        an input function that asks the plan table which runs it kept; with ablation.adaptive
        the runs of the last look."""
        if not self.adaptive and not self.budget_cut:
            return [pattern.format(run=r) for r in self.runs]

        def paths(wildcards) -> list[str]:
            runs = self.final_look_runs() if self.adaptive else self._kept_in_table()
            return [pattern.format(run=r) for r in runs]

        return paths

    def _kept_in_table(self) -> list[str]:
        return kept_in_table(self.checkpoints.plan_table.get().output.runs)

    def priority(self, wildcards) -> int:
        """A training job's priority: the plan's order, the first run highest, so with few
        cores the runs that tell most finish first."""
        return self._priority.get(wildcards.run, 0)

    def devices(self, wildcards) -> int:
        """A run's train.devices: its cluster job asks for that many tasks (srun starts one
        worker per task) and GPUs (one a task; none where the profile sets gpu: 0)."""
        from campaign.plan import run_spec_of

        return int(train_key(run_spec_of(self.config, wildcards.run)["train"], "devices"))

    # ---------------------------------------------------------------- the looks
    def read_look(self, look: int) -> dict:
        """A finished look's record (results/adaptive/look_<look>.json), asked of its
        checkpoint."""
        return read_json(self.checkpoints.look.get(look=str(look)).output.look, LOOK_KEYS)

    def look_runs(self, look: int | str) -> list[str]:
        """The runs look `look` evaluates: the plan's kept runs at the first, then the runs the
        look before it lists (those it had and those it appended)."""
        if int(look) > 1:
            return self.read_look(int(look) - 1)["runs"]
        return self._kept_in_table() if self.budget_cut else self.runs

    def final_look_runs(self) -> list[str]:
        """The runs of the campaign's last look: the first look that appended nothing."""
        look = 1
        while not (record := self.read_look(look))["final"]:
            look += 1
        return record["runs"]

    def look_paths(self, pattern: str) -> Paths:
        """`pattern` (with `{look}`) for every look, the last one's included; none when
        ablation.adaptive is off."""
        if not self.adaptive:
            return []

        def paths(wildcards) -> list[str]:
            look = 1
            while not self.read_look(look)["final"]:
                look += 1
            return [pattern.format(look=j) for j in range(1, look + 1)]

        return paths

    def look_run_paths(self, pattern: str) -> Paths:
        """`pattern` (with `{run}`) for every run the job's look evaluates."""

        def paths(wildcards) -> list[str]:
            return [pattern.format(run=r) for r in self.look_runs(wildcards.look)]

        return paths

    def previous_look(self, pattern: str) -> Paths:
        """`pattern` (with `{look}`) of the look before the job's; none for the first."""

        def path(wildcards) -> list[str]:
            look = int(wildcards.look)
            return [] if look == 1 else [pattern.format(look=look - 1)]

        return path
