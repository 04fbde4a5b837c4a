"""Measures `snakemake -n` (DAG build + dry run) on a ~1,000-run campaign vs a bare Snakefile.

Both workflows get the same job graph: one run_spec job per planned run (a wildcard output each),
plus manifest, plan_table, metrics and all. The bare one is plain shell rules with no params
functions, no planner and no config, so the ratio project/bare is the cost of the campaign's own
DAG-time work (config validation, the planner, per-job params functions). Goal: ratio <= 1.2.

A third workflow, "wiring", is the bare one with the project's per-job directives added (log,
benchmark, a code-file input, a params function returning a constant): it splits the gap into
what Snakemake spends on the rule shape and what the campaign's own Python costs.

Runs alternate A B C A B C ... after one untimed warm-up each, so drift (page cache, CPU clock)
hits every side alike; median and min are reported. Every `snakemake` start also imports the
installed executor plugins (the SLURM one runs `scontrol show config`, up to 10 s when no
controller answers): that is the same on every side and is why min is shown next to the median.
With --profile (or when the goal is missed) the project's and the bare dry runs are run under
cProfile and the planner calls are timed in-process, to show where the time goes.

    .venv/bin/python benchmarks/bench_dag.py [--seeds 10 --levels 10 --repeats 5 --profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
DRY_RUN = ["-m", "snakemake", "-n", "--cores", "1", "--quiet"]
# Never copied into the scratch project: state, outputs and the tests.
SKIP_TOP = {".git", ".venv", ".snakemake", ".campaign", "results", "logs", "tests", ".dvc/cache"}

BARE_SNAKEFILE = """\
# Bare twin of the campaign DAG: same jobs and shape, plain shell, no params functions.
RUNS = {runs!r}


rule all:
    input:
        "results/data/manifest.parquet",
        "results/data/summary.json",
        "results/data/manifest_diff.json",
        "results/plan/runs.tsv",
        expand("results/runs/{{run}}/spec.json", run=RUNS),
        "results/metrics.json",


rule manifest:
    output:
        "results/data/manifest.parquet",
        "results/data/summary.json",
        "results/data/manifest_diff.json",
    shell:
        "touch {{output}}"


rule run_spec:
    output:
        "results/runs/{{run}}/spec.json",
    shell:
        "echo {{wildcards.run}} > {{output}}"


rule plan_table:
    output:
        "results/plan/runs.tsv",
    shell:
        "touch {{output}}"


rule metrics:
    input:
        "results/data/summary.json",
        "results/plan/runs.tsv",
    output:
        "results/metrics.json",
    shell:
        "touch {{output}}"
"""


# The bare workflow with the project's per-job directives (log, benchmark, code input, params fn).
WIRING_RUN_SPEC = """\
def spec_fn(wildcards):
    return "{{}}"


rule run_spec:
    input:
        code=["code/plan.py"],
    output:
        "results/runs/{{run}}/spec.json",
    params:
        spec=spec_fn,
        state_dir=".campaign",
    log:
        "logs/run_spec/{{run}}.log",
    benchmark:
        "results/benchmarks/run_spec/{{run}}.tsv"
    shell:
"""
BARE_RUN_SPEC = """\
rule run_spec:
    output:
        "results/runs/{{run}}/spec.json",
    shell:
"""
# Entry-point frames that enclose the whole run: left out of the differential profile.
DRIVER_FRAMES = re.compile(
    r"asyncio/|runpy|importlib|contextvars|builtins\.exec|snakemake/(cli|api)\.py|"
    r"snakemake/workflow\.py:(execute|async_run|_build_dag)|<string>|snakemake/__main__"
)


# ------------------------------------------------------------------------------ scratch projects
def project_files(repo: Path) -> list[str]:
    """Tracked + untracked-not-ignored files (git ls-files -co --exclude-standard), minus tests/."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=repo, capture_output=True, check=True,
        ).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for dirpath, dirs, files in os.walk(repo):
            rel = Path(dirpath).relative_to(repo)
            dirs[:] = [d for d in dirs if (rel / d).as_posix() not in SKIP_TOP and d != "__pycache__"]
            names += [(rel / f).as_posix() for f in files]
    return sorted(
        n for n in names
        if n.split("/", 1)[0] not in SKIP_TOP and (repo / n).is_file()
    )


def levels_around(base: float | int, n: int, step, integer: bool) -> list:
    """n distinct levels that include the baseline value (so the baseline cell merges into the
    grid and the plan has exactly seeds × n × n runs)."""
    if integer:
        start = max(2, base - step * (n // 2))
        values = [start + step * i for i in range(n)]
        if base not in values:
            values[0] = base
        return sorted(set(values))
    return sorted({float(f"{base * step ** (i - n // 2):.6g}") for i in range(n)})


def make_project(dest: Path, seeds: int, levels: int) -> dict:
    """Copy the project into dest with an ablation of seeds × levels (lr) × levels (max_length)."""
    for name in project_files(REPO):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    params = yaml.safe_load((dest / "params.yaml").read_text(encoding="utf-8"))
    train = params["train"]
    params["ablation"]["seeds"] = list(range(1, seeds + 1))
    params["ablation"]["factors"] = {
        "train": {
            "lr": levels_around(train["lr"], levels, 2**0.5, integer=False),
            "max_length": levels_around(train["max_length"], levels, 4, integer=True),
        }
    }
    params["ablation"]["max_runs"] = max(params["ablation"]["max_runs"], 2 * seeds * levels**2)
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False), encoding="utf-8")
    return params


def make_bare(dest: Path, n_runs: int, seed: int, wiring: bool = False) -> None:
    """The bare twin (or, with wiring, the twin with the project's per-job directives)."""
    rng = random.Random(seed)
    runs: set[str] = set()
    while len(runs) < n_runs:  # 48-bit ids: a collision is all but impossible, stay exact anyway
        runs.add(f"run-{rng.getrandbits(48):012x}")
    text = BARE_SNAKEFILE.format(runs=sorted(runs))
    if wiring:
        text = text.replace(BARE_RUN_SPEC.format(), WIRING_RUN_SPEC.format())
        (dest / "code").mkdir(parents=True, exist_ok=True)
        (dest / "code" / "plan.py").write_text("# stands in for a stage's code file\n")
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "Snakefile").write_text(text, encoding="utf-8")


# ------------------------------------------------------------------------------ running
def env_for(project: Path) -> dict:
    # The venv's editable install points at the main checkout; make the copy's package win so
    # the dry run imports (and lists as code inputs) the scratch copy's modules.
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(project / "workflow")] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    )
    return env


def dry_run(folder: Path, env: dict, extra: tuple[str, ...] = ("--quiet",)) -> tuple[float, str]:
    """Wall seconds of one `snakemake -n --cores 1 [--quiet]` with this interpreter, and its output."""
    cmd = [sys.executable, *DRY_RUN[:-1], *extra]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        sys.exit(f"error: snakemake -n failed in {folder} (exit {proc.returncode}):\n{tail}")
    return seconds, proc.stdout + proc.stderr


def job_counts(output: str) -> dict[str, int]:
    """Per-rule job counts from the 'Job stats' table of a (non-quiet) dry run."""
    counts = {}
    block = output.split("Job stats:", 1)[-1]
    for line in block.splitlines()[3:]:
        m = re.match(r"^(\S+)\s+(\d+)\s*$", line)
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    return counts


# ------------------------------------------------------------------------------ profiling
def profile_dry_run(project: Path, env: dict, top: int, scratch: Path) -> None:
    prof = scratch / "dry_run.prof"
    cmd = [sys.executable, "-m", "cProfile", "-o", str(prof), *DRY_RUN]
    subprocess.run(cmd, cwd=project, env=env, capture_output=True, check=True)
    stats = pstats.Stats(str(prof), stream=(buf := io.StringIO()))
    print(f"\n## cProfile of `snakemake -n` on the project: top {top} by cumulative time")
    stats.sort_stats("cumulative").print_stats(top)
    print(_stats_table(buf.getvalue()))
    buf.seek(0)
    buf.truncate()
    print(f"\n## ... of which project code (campaign package, Snakefile, rules): top {top}")
    stats.sort_stats("cumulative").print_stats(re.escape(str(project)), top)
    print(_stats_table(buf.getvalue()))


def _stats_table(text: str) -> str:
    """The rows of a pstats listing, paths shortened to the site-packages / project tail."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().startswith("ncalls")), None)
    if start is None:
        return "(no rows)"
    rows = [line for line in lines[start:] if line.strip()]
    rows = [re.sub(r"\S*/site-packages/", "", r) for r in rows]
    rows = [re.sub(r"\S*/bench_dag-[^/]+/project/", "", r) for r in rows]
    return "\n".join(re.sub(r"/root/\.pyenv/versions/[^/]+/lib/python[^/]+/", "", r) for r in rows)


def profile_planner(project: Path, repeats: int) -> None:
    """Time the planner and the per-job params functions in this process (best of repeats)."""
    sys.path.insert(0, str(project / "workflow"))
    from campaign import plan
    from campaign.config import validate
    from campaign.stages import get_stage

    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))

    def best(fn) -> float:
        times = []
        for _ in range(repeats):
            plan._INDEX_CACHE.clear()
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    runs = list(plan.plan_index(params))
    run_spec_stage, plan_stage = get_stage("run_spec"), get_stage("plan_table")

    def per_job_specs():
        # What Snakemake calls per run_spec job: stage_spec("run_spec", run=...) -> canonical JSON.
        from campaign.hashing import canonical_json

        for rid in runs:
            canonical_json(run_spec_stage.spec(params, run=rid))

    rows = [
        ("config.validate (schema + plan_index)", best(lambda: validate(params))),
        ("plan.plan_runs (cold)", best(lambda: plan.plan_runs(params))),
        ("plan.plan_index (cold, = plan_runs + dict)", best(lambda: plan.plan_index(params))),
        (f"run_spec params fn × {len(runs)} (index warm)", _warm(plan, params, per_job_specs)),
        ("plan_table params fn (plan_runs again)", best(lambda: plan_stage.spec(params))),
    ]
    print(f"\n## In-process planner cost ({len(runs)} runs, best of {repeats})")
    print(f"{'call':<48} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<48} {seconds:>8.3f}")


def _warm(plan, params, fn) -> float:
    plan.plan_index(params)
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


# ------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="ablation seeds (default 10)")
    ap.add_argument("--levels", type=int, default=10, help="levels of lr and of max_length (10)")
    ap.add_argument("--repeats", type=int, default=5, help="timed dry runs per side (default 5)")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed for the bare run ids (0)")
    ap.add_argument("--goal", type=float, default=1.2, help="max ratio project/bare (1.2)")
    ap.add_argument("--profile", action="store_true", help="profile even when the goal is met")
    ap.add_argument("--top", type=int, default=10, help="rows of each profile listing (10)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench_dag-"))
    try:
        project, bare = scratch / "project", scratch / "bare"
        make_project(project, args.seeds, args.levels)
        env = env_for(project)
        # Untimed warm-up: byte-compiles, fills the page cache, creates .snakemake/, and its
        # full (non-quiet) output gives the job counts.
        _, out = dry_run(project, env, extra=())
        project_jobs = job_counts(out)
        n_runs = project_jobs.get("run_spec", 0)
        make_bare(bare, n_runs, args.seed)
        _, out = dry_run(bare, env, extra=())
        bare_jobs = job_counts(out)
        if bare_jobs != project_jobs:
            sys.exit(f"error: job counts differ: project {project_jobs}, bare {bare_jobs}")

        print("# bench_dag: `snakemake -n --cores 1 --quiet` wall time, campaign vs bare Snakefile")
        print(f"# plan: {args.seeds} seeds × {args.levels} lr × {args.levels} max_length levels; "
              f"jobs {project_jobs.get('total')} ({n_runs} run_spec); "
              f"{args.repeats} repeats per side, alternating, after 1 warm-up each")
        print(f"# goal: project/bare <= {args.goal:g} (median)")

        times: dict[str, list[float]] = {"project": [], "bare": []}
        for _ in range(args.repeats):
            times["project"].append(dry_run(project, env)[0])
            times["bare"].append(dry_run(bare, env)[0])

        print(f"\n{'workflow':<10} {'jobs':>6} {'median s':>9} {'min s':>7} {'ms/job':>7}")
        for name in ("project", "bare"):
            med, low = statistics.median(times[name]), min(times[name])
            jobs = project_jobs["total"]
            print(f"{name:<10} {jobs:>6} {med:>9.3f} {low:>7.3f} {1000 * med / jobs:>7.2f}")
        ratio = statistics.median(times["project"]) / statistics.median(times["bare"])
        ratio_min = min(times["project"]) / min(times["bare"])
        extra = statistics.median(times["project"]) - statistics.median(times["bare"])
        verdict = "MET" if ratio <= args.goal else "MISSED"
        print(f"\nratio project/bare: median {ratio:.2f}, min {ratio_min:.2f} "
              f"(+{extra:.3f} s for the project); goal <= {args.goal:g}: {verdict}")

        if args.profile or ratio > args.goal:
            profile_dry_run(project, env, args.top, scratch)
            profile_planner(project, repeats=3)
    finally:
        if args.keep:
            print(f"\n(scratch kept: {scratch})")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
