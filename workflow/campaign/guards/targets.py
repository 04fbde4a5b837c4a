"""Which guard jobs the DAG has: every guard task of evaluation.guards for the base, and every
guard task x every kept run (the runs the plan's DAG helper lists, after a budget cut or the
adaptive looks where those apply). Every trained run is guarded, not only the kept cell's: the
kept cell is known only after the evaluation, and a guard job is one harness run on the guard's
items, cheap beside the training it checks."""

from __future__ import annotations

from campaign.guards.tasks import guard_names


def guard_paths(params: dict, pattern: str, dag_runs):
    """`pattern` (in `{guard}`, and `{run}` where it holds one) for every guard and kept run: a
    list, or an input function where the runs are known only after a checkpoint."""
    per_guard = [pattern.replace("{guard}", name) for name in guard_names(params)]
    if "{run}" not in pattern:
        return per_guard
    found = [dag_runs.run_paths(p) for p in per_guard]
    if all(isinstance(f, list) for f in found):
        return [path for f in found for path in f]

    def paths(wildcards) -> list[str]:
        return [path for f in found for path in (f(wildcards) if callable(f) else f)]

    return paths
