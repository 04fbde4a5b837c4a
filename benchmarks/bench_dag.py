"""Measures `snakemake -n` (DAG build + dry run) on a ~1,000-run campaign vs a bare Snakefile.

Both workflows have the same job graph: one run_spec job per planned run (one wildcard output
each), plus manifest, plan_table, metrics and all. The bare one is plain shell rules with no
config, no planner and no params functions, so the ratio project/bare is the cost of the
campaign's own DAG-time work. Goal: ratio <= 1.2.

A third workflow, "wiring", is the bare one with the project's per-job directives added to
run_spec (log, benchmark, a code-file input, a params function returning a constant). It splits
the gap into what Snakemake spends on the rule shape and what the campaign's own Python costs.

Runs alternate project, bare, wiring, project, ... after one untimed warm-up each, so drift
(page cache, CPU clock, other load) hits every side alike; median and min are reported, and the
ratio is the median over rounds of project/bare within one round. Every `snakemake` start
imports the installed executor plugins (the SLURM one runs `scontrol show config`, up to 10 s
when no controller answers); that is the same on every side, and is why min is shown too.
With --profile, or when the goal is missed, the project's and the bare dry runs are run under
cProfile and the planner calls are timed in-process, to show where the time goes.

    .venv/bin/python benchmarks/bench_dag.py [--seeds 10 --levels 10 --repeats 9 --profile]
"""

from __future__ import annotations

import argparse
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
DRY_RUN = ("-m", "snakemake", "-n", "--cores", "1")
# Never copied into the scratch project: state, outputs and the tests.
SKIP_TOP = {".git", ".venv", ".snakemake", ".campaign", "results", "logs", "tests"}

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


{run_spec}
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
BARE_RUN_SPEC = """\
rule run_spec:
    output:
        "results/runs/{run}/spec.json",
    shell:
        "echo {wildcards.run} > {output}"
"""
# The same rule with the project's per-job directives: log, benchmark, code input, params fn.
WIRING_RUN_SPEC = """\
def spec_fn(wildcards):
    return "{}"


rule run_spec:
    input:
        code=["code/plan.py"],
    output:
        "results/runs/{run}/spec.json",
    params:
        spec=spec_fn,
        state_dir=".campaign",
    log:
        "logs/run_spec/{run}.log",
    benchmark:
        "results/benchmarks/run_spec/{run}.tsv"
    shell:
        "echo {wildcards.run} > {output} 2> {log}"
"""
# Entry-point frames that enclose the whole run: left out of the differential profile.
DRIVER_FRAMES = re.compile(
    r"asyncio/|runpy|importlib|contextvars|built-in method builtins\.exec|<string>|"
    r"snakemake/(cli|api|__main__)\.py|snakemake/workflow\.py:(execute|async_run|_build_dag)$"
)


# ------------------------------------------------------------------------------ scratch folders
def project_files(repo: Path) -> list[str]:
    """Tracked + untracked-not-ignored files (git ls-files -co --exclude-standard), minus tests/.

    Falls back to walking the folder (skipping state, outputs, caches) where git is unavailable.
    """
    try:
        out = subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=repo,
            capture_output=True,
            check=True,
        ).stdout.decode()
        names = [n for n in out.split("\0") if n]
    except (OSError, subprocess.CalledProcessError):
        names = []
        for dirpath, dirs, files in os.walk(repo):
            dirs[:] = [d for d in dirs if d not in SKIP_TOP and d != "__pycache__"]
            rel = Path(dirpath).relative_to(repo)
            names += [(rel / f).as_posix() for f in files]
    return sorted(n for n in names if n.split("/", 1)[0] not in SKIP_TOP and (repo / n).is_file())


def levels_around(base: float, n: int, step: float, integer: bool) -> list:
    """n distinct factor levels that include the baseline value, so the baseline cell merges
    into the grid and the plan has exactly seeds × n × n runs."""
    if integer:
        start = max(2, int(base) - int(step) * (n // 2))
        values = [start + int(step) * i for i in range(n)]
        if base not in values:
            values[0] = int(base)
        return sorted(set(values))
    return sorted({float(f"{base * step ** (i - n // 2):.6g}") for i in range(n)})


def make_project(dest: Path, seeds: int, levels: int) -> None:
    """Copy the project into dest; ablation = seeds × levels (train.lr) × levels (max_length)."""
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


def make_twin(dest: Path, n_runs: int, seed: int, wiring: bool) -> None:
    """The bare twin with n_runs run_spec jobs (with wiring: the project's per-job directives)."""
    rng = random.Random(seed)
    runs: set[str] = set()
    while len(runs) < n_runs:  # 48-bit ids: a collision is all but impossible; stay exact
        runs.add(f"run-{rng.getrandbits(48):012x}")
    run_spec = WIRING_RUN_SPEC if wiring else BARE_RUN_SPEC
    dest.mkdir(parents=True, exist_ok=True)
    text = BARE_SNAKEFILE.format(runs=sorted(runs), run_spec=run_spec)
    (dest / "Snakefile").write_text(text, encoding="utf-8")
    if wiring:
        (dest / "code").mkdir(exist_ok=True)
        (dest / "code" / "plan.py").write_text("# stands in for a stage's code file\n")


# ------------------------------------------------------------------------------ running
def env_for(project: Path) -> dict:
    """The venv's editable install points at the main checkout; put the copy's package first so
    the dry run imports (and lists as code inputs) the scratch copy's modules."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(project / "workflow"), env.get("PYTHONPATH")])
    )
    return env


def dry_run(folder: Path, env: dict, quiet: bool = True) -> tuple[float, str]:
    """Wall seconds of one `snakemake -n --cores 1 [--quiet]` run with this interpreter."""
    cmd = [sys.executable, *DRY_RUN, *(["--quiet"] if quiet else [])]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=folder, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-15:])
        sys.exit(f"error: snakemake -n failed in {folder} (exit {proc.returncode}):\n{tail}")
    return seconds, proc.stdout + proc.stderr


def job_counts(output: str) -> dict[str, int]:
    """Per-rule job counts from the 'Job stats' table of a non-quiet dry run."""
    counts = {}
    for line in output.split("Job stats:", 1)[-1].splitlines()[3:]:
        m = re.match(r"^(\S+)\s+(\d+)\s*$", line)
        if not m:
            break
        counts[m.group(1)] = int(m.group(2))
    return counts


# ------------------------------------------------------------------------------ profiling
def _profile(folder: Path, env: dict, out: Path) -> dict[tuple[str, str], list[float]]:
    """cProfile one quiet dry run; {(file, function): [ncalls, tottime, cumtime]}, paths short."""
    cmd = [sys.executable, "-m", "cProfile", "-o", str(out), *DRY_RUN, "--quiet"]
    subprocess.run(cmd, cwd=folder, env=env, capture_output=True, check=True)
    rows: dict[tuple[str, str], list[float]] = {}
    for (filename, _line, name), (_cc, ncalls, tottime, cumtime, _callers) in pstats.Stats(
        str(out), stream=io.StringIO()
    ).stats.items():
        filename = re.sub(r".*/site-packages/", "", filename)
        filename = re.sub(r".*/bench_dag-[^/]+/project/", "", filename)
        filename = re.sub(r".*/lib/python3\.\d+/", "", filename)
        row = rows.setdefault((filename, name), [0, 0.0, 0.0])
        row[0] += ncalls
        row[1] += tottime
        row[2] = max(row[2], cumtime)  # one code object per key in practice; max avoids doubling
    return rows


def _print_rows(title: str, rows: list[tuple[str, list[float], list[float] | None]]) -> None:
    print(f"\n{title}")
    if rows and rows[0][2] is not None:
        print(f"{'Δcum s':>7} {'cum s':>7} {'bare s':>7} {'calls':>7} {'bare':>6}  function")
        for key, p, b in rows:
            print(
                f"{p[2] - b[2]:>7.3f} {p[2]:>7.3f} {b[2]:>7.3f} "
                f"{int(p[0]):>7} {int(b[0]):>6}  {key}"
            )
    else:
        print(f"{'cum s':>7} {'self s':>7} {'calls':>7}  function")
        for key, p, _ in rows:
            print(f"{p[2]:>7.3f} {p[1]:>7.3f} {int(p[0]):>7}  {key}")


def profile_dry_runs(project: Path, bare: Path, env: dict, top: int, scratch: Path) -> None:
    """Where the project's extra time goes: its own code, and every function's cumulative time
    under the project minus under the bare twin (cProfile inflates call-heavy Python code)."""
    p = _profile(project, env, scratch / "project.prof")
    b = _profile(bare, env, scratch / "bare.prof")
    zero = [0, 0.0, 0.0]
    total_p = max(v[2] for v in p.values())
    total_b = max(v[2] for v in b.values())
    print(
        f"\n## cProfile of one quiet dry run: project {total_p:.2f} s, bare {total_b:.2f} s "
        f"(profiler overhead included)"
    )
    own = sorted(
        (k for k in p if k[0].startswith(("Snakefile", "workflow/"))), key=lambda k: -p[k][2]
    )
    _print_rows(
        f"### project code (campaign package, Snakefile, rules): top {top} by cumulative time",
        [(f"{k[0]}:{k[1]}", p[k], None) for k in own[:top]],
    )
    diff = sorted(
        (k for k in p if not DRIVER_FRAMES.search(f"{k[0]}:{k[1]}")),
        key=lambda k: -(p[k][2] - b.get(k, zero)[2]),
    )
    _print_rows(
        f"### top {top} by cumulative time project − bare (entry-point frames left out)",
        [(f"{k[0]}:{k[1]}", p[k], b.get(k, zero)) for k in diff[:top]],
    )


def profile_planner(project: Path, repeats: int) -> None:
    """Time the DAG-time calls of the campaign package in this process (best of repeats)."""
    sys.path.insert(0, str(project / "workflow"))
    try:
        from snakemake.utils import validate as snakemake_validate

        from campaign import plan
        from campaign.config import validate
        from campaign.hashing import canonical_json
        from campaign.stages import get_stage
    except ImportError as e:
        print(f"\n(planner timing skipped: {e})")
        return
    params = yaml.safe_load((project / "params.yaml").read_text(encoding="utf-8"))
    schema = str(project / "workflow" / "schemas" / "params.schema.yaml")

    def best(fn, cold: bool = True) -> float:
        times = []
        for _ in range(repeats):
            if cold:
                plan._INDEX_CACHE.clear()
            else:
                plan.plan_index(params)
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    run_ids = list(plan.plan_index(params))
    run_spec_stage, plan_stage = get_stage("run_spec"), get_stage("plan_table")

    def per_job_specs() -> None:
        # What each run_spec job's params function does: the stage's spec as canonical JSON.
        for rid in run_ids:
            canonical_json(run_spec_stage.spec(params, run=rid))

    t0 = time.perf_counter()
    snakemake_validate(params, schema, set_default=False)
    first_sm_validate = time.perf_counter() - t0
    rows = [
        ("campaign.config.validate (schema + plan_index)", best(lambda: validate(params))),
        ("snakemake.utils.validate, first call", first_sm_validate),
        (
            "snakemake.utils.validate, later calls",
            best(lambda: snakemake_validate(params, schema, set_default=False)),
        ),
        ("plan.plan_runs", best(lambda: plan.plan_runs(params))),
        ("plan.plan_index, cold", best(lambda: plan.plan_index(params))),
        (f"run_spec params fn × {len(run_ids)} (index warm)", best(per_job_specs, cold=False)),
        ("plan_table params fn (index warm)", best(lambda: plan_stage.spec(params), cold=False)),
    ]
    print(
        f"\n## In-process cost of the campaign's DAG-time calls ({len(run_ids)} runs, "
        f"best of {repeats}, no profiler)"
    )
    print(f"{'call':<52} {'seconds':>8}")
    for name, seconds in rows:
        print(f"{name:<52} {seconds:>8.3f}")


# ------------------------------------------------------------------------------ main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=10, help="ablation seeds (default 10)")
    ap.add_argument("--levels", type=int, default=10, help="levels of lr and of max_length (10)")
    ap.add_argument("--repeats", type=int, default=9, help="timed dry runs per side (default 9)")
    ap.add_argument("--seed", type=int, default=0, help="RNG seed for the twins' run ids (0)")
    ap.add_argument("--goal", type=float, default=1.2, help="max ratio project/bare (1.2)")
    ap.add_argument("--profile", action="store_true", help="profile even when the goal is met")
    ap.add_argument("--top", type=int, default=10, help="rows of each profile listing (10)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch folder")
    args = ap.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="bench_dag-"))
    try:
        folders = {
            "project": scratch / "project",
            "bare": scratch / "bare",
            "wiring": scratch / "wiring",
        }
        make_project(folders["project"], args.seeds, args.levels)
        env = env_for(folders["project"])
        # Untimed warm-up of each side (byte-compiles, page cache, .snakemake/); its full
        # (non-quiet) output gives the job counts, which must agree.
        jobs = {"project": job_counts(dry_run(folders["project"], env, quiet=False)[1])}
        n_runs = jobs["project"].get("run_spec", 0)
        for name in ("bare", "wiring"):
            make_twin(folders[name], n_runs, args.seed, wiring=name == "wiring")
            jobs[name] = job_counts(dry_run(folders[name], env, quiet=False)[1])
            if jobs[name] != jobs["project"]:
                sys.exit(
                    f"error: job counts differ: project {jobs['project']}, {name} {jobs[name]}"
                )
        n_jobs = jobs["project"]["total"]

        print("# bench_dag: wall time of `snakemake -n --cores 1 --quiet` (DAG build + dry run)")
        print(
            f"# project: a copy of this repo, plan = {args.seeds} seeds × {args.levels} lr × "
            f"{args.levels} max_length levels = {n_runs} runs; {n_jobs} jobs per workflow"
        )
        print(
            "# bare: same jobs, plain shell rules; wiring: bare + the project's per-job "
            "directives (log, benchmark, code input, params fn)"
        )
        print(
            f"# {args.repeats} timed runs per side, alternating, after 1 warm-up each; "
            f"goal: project/bare <= {args.goal:g}"
        )

        times: dict[str, list[float]] = {name: [] for name in folders}
        for _ in range(args.repeats):
            for name in folders:
                times[name].append(dry_run(folders[name], env)[0])

        med = {name: statistics.median(t) for name, t in times.items()}
        low = {name: min(t) for name, t in times.items()}
        # Ratio per round (runs minutes apart drift together), then the median over rounds.
        paired = {
            name: statistics.median(a / b for a, b in zip(t, times["bare"], strict=True))
            for name, t in times.items()
        }
        print(
            f"\n{'workflow':<9} {'jobs':>5} {'median s':>9} {'min s':>7} {'ms/job':>7} "
            f"{'÷bare':>6} {'÷bare min':>9}"
        )
        for name in folders:
            print(
                f"{name:<9} {n_jobs:>5} {med[name]:>9.3f} {low[name]:>7.3f} "
                f"{1000 * med[name] / n_jobs:>7.2f} {paired[name]:>6.2f} "
                f"{low[name] / low['bare']:>9.2f}"
            )
        ratio = paired["project"]
        print("(÷bare: median over rounds of the per-round ratio; ÷bare min: ratio of the mins)")
        print(
            f"\nratio project/bare: {ratio:.2f} "
            f"(ratio of medians {med['project'] / med['bare']:.2f}, "
            f"of mins {low['project'] / low['bare']:.2f}); goal <= {args.goal:g}: "
            f"{'MET' if ratio <= args.goal else 'MISSED'}"
        )
        print(
            f"  gap {med['project'] - med['bare']:+.3f} s (medians) = rule shape (wiring − bare) "
            f"{med['wiring'] - med['bare']:+.3f} s + campaign code (project − wiring) "
            f"{med['project'] - med['wiring']:+.3f} s"
        )

        if args.profile or ratio > args.goal:
            profile_dry_runs(folders["project"], folders["bare"], env, args.top, scratch)
            profile_planner(folders["project"], repeats=3)
    finally:
        if args.keep:
            print(f"\n(scratch kept: {scratch})")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
