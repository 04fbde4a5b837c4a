"""Kill soak (issue 32): SIGKILL a running campaign at random moments, resume it, and check that
what it ends with equals an uninterrupted run's results byte for byte.

Three scenarios, each on fresh copies of one campaign (``--campaign``): ``tiny``, the tiny
classification campaign (tests/fixtures/tiny_params.yaml), or ``trl-generation``, the generation
campaign of tests/workflow/test_generation_e2e.py (a from-config Llama on conversations) whose
runs all train through ``train.command`` with the TRL SFTTrainer example
(examples/trl_sft_generation.py), its steps cut so that one campaign takes minutes:

- ``workstation``: `snakemake --profile profiles/default`, killed (its whole process group:
  Snakemake and the stage processes it started) after a random delay, started again, and so on
  ``--kills`` times; then run to its end.
- ``slurm``: the same through `--profile profiles/slurm` on the local cluster of
  scripts/slurm-cluster.sh (skipped, and said so, when no cluster answers). The kill takes the
  Snakemake controller; jobs already submitted run on, and the next start finds them.
- ``shared``: two campaigns whose ``campaign.state_dir`` is one folder (one store), run at the
  same time; each kill takes one of the running ones, chosen at random, while the other runs
  on, and the killed one starts again at once.

Every recovered campaign's ``results/`` is compared with the reference run's, file by file by
content hash, without the timed outputs (tests/conftest.py TIMED_OUTPUTS and TIMED_FOLDERS:
wall times, hosts and run ids). The delays are drawn from ``--seed`` over [1 s, the reference
run's duration]; a start that ends before its kill is the recovery run that the comparison
takes (the next kills go to a fresh copy). In the SLURM scenario the jobs a killed controller
left running are waited for before the comparison (they may still write). Prints one line per
start and a tally per scenario (kills, campaigns recovered, identical, files compared), with
MISSED where fewer than 30 kills landed in all or fewer than 8 in the SLURM profile:

    python scripts/kill_soak.py --scenarios workstation:11,slurm:9,shared:10
    python scripts/kill_soak.py --campaign trl-generation --scenarios workstation:6

CPU-heavy (one tiny campaign is several minutes on two cores): outside CI by design.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "workflow"), str(REPO / "workflow")]

from conftest import BIN, env, result_hashes  # noqa: E402 -- after sys.path
from conftest import copy_project as copy_tiny  # noqa: E402

PROFILES = {"workstation": "profiles/default", "shared": "profiles/default"}
SLURM_PROFILE = "profiles/slurm"


SCENARIOS = ("workstation", "slurm", "shared")
MIN_KILLS = 30  # the goal over all scenarios
MIN_SLURM_KILLS = 8  # ... of which in the SLURM profile
# squeue's states of a job that may still run (finished ones stay listed for MinJobAge)
LIVE_STATES = "PENDING,RUNNING,CONFIGURING,COMPLETING,SUSPENDED"
CAMPAIGNS = ("tiny", "trl-generation")
TRL = "examples/trl_sft_generation.py"
CAMPAIGN = "tiny"  # the campaign that copy_project makes (main sets it from --campaign)


def trl_generation_params() -> dict:
    """The generation e2e test's campaign with every run trained by the TRL example, and its
    steps cut (training, the non-blocking overfit check) so that one campaign takes minutes."""
    from test_generation_e2e import params

    p = params()
    p["train"]["commands"] = {
        "trl": {"argv": ["python", TRL], "files": [TRL], "packages": ["trl", "transformers"]}
    }
    p["train"]["command"] = "trl"
    p["train"].update(max_steps=40, eval_every=20, checkpoint_every=10)
    p["preflight"]["overfit"]["steps"] = 40
    return p


def copy_project(dest: Path) -> Path:
    """A fresh project of the soaked campaign (CAMPAIGN) at dest, without results."""
    if CAMPAIGN == "tiny":
        return copy_tiny(dest)
    import json

    import yaml
    from test_generation_e2e import conversations

    copy_tiny(dest, params=None)
    (dest / "params.yaml").write_text(yaml.safe_dump(trl_generation_params(), sort_keys=False))
    raw = dest / "data" / "raw" / "talks.jsonl"
    raw.write_text("".join(json.dumps(r) + "\n" for r in conversations()))
    return dest


@dataclass
class Tally:
    scenario: str
    kills: int = 0  # SIGKILLs that landed while the campaign ran
    campaigns: int = 0  # campaigns recovered (their last run ended well) and compared
    identical: int = 0
    files: int = 0  # result files compared, over all its campaigns
    differing: list[str] = field(default_factory=list)


def parse_plan(text: str, default_kills: int) -> dict[str, int]:
    """`workstation:11,slurm:9,shared` -> kills per scenario, in the order given (a scenario
    without a count gets `default_kills`)."""
    plan: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition(":")
        if name not in SCENARIOS:
            raise SystemExit(
                f"--scenarios: unknown scenario {name!r} (known: {', '.join(SCENARIOS)})"
            )
        if name in plan:
            raise SystemExit(f"--scenarios: {name} given twice")
        kills = default_kills
        if count:
            if not count.isdigit() or int(count) < 1:
                raise SystemExit(f"--scenarios: {part!r}: expected {name}:N with N >= 1")
            kills = int(count)
        plan[name] = kills
    if not plan:
        raise SystemExit(f"--scenarios: name at least one of {', '.join(SCENARIOS)}")
    return plan


def render(tallies: list[Tally], skipped: list[str]) -> list[str]:
    """The soak's closing table (one row per scenario and a total) and what it missed."""
    lines = [
        "| scenario | kills landed | campaigns recovered | identical | files compared |",
        "|---|---|---|---|---|",
    ]
    for t in tallies:
        lines.append(f"| {t.scenario} | {t.kills} | {t.campaigns} | {t.identical} | {t.files} |")
    total = Tally(
        "total",
        kills=sum(t.kills for t in tallies),
        campaigns=sum(t.campaigns for t in tallies),
        identical=sum(t.identical for t in tallies),
        files=sum(t.files for t in tallies),
    )
    lines.append(
        f"| {total.scenario} | {total.kills} | {total.campaigns} | {total.identical} "
        f"| {total.files} |"
    )
    lines += [f"DIFFERS {line}" for t in tallies for line in t.differing]
    lines += [f"SKIPPED {line}" for line in skipped]
    if total.kills < MIN_KILLS:
        lines.append(f"MISSED: {total.kills} kills landed; the soak asks for at least {MIN_KILLS}")
    slurm_kills = sum(t.kills for t in tallies if t.scenario == "slurm")
    if slurm_kills < MIN_SLURM_KILLS:
        lines.append(
            f"MISSED: {slurm_kills} kills in the SLURM profile; the soak asks for at least "
            f"{MIN_SLURM_KILLS}"
        )
    return lines


def start(project: Path, profile: str, log: Path) -> subprocess.Popen:
    """Snakemake in its own process group (so a kill takes its jobs with it)."""
    cmd = [str(BIN / "snakemake"), "--profile", profile, "--cores", "2"]
    with log.open("a") as out:
        return subprocess.Popen(
            cmd,
            cwd=project,
            env=env(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def kill_after(proc: subprocess.Popen, delay_s: float, project: Path, profile: str) -> bool:
    """SIGKILL the process group after delay_s, then `snakemake --unlock` (the lock a killed
    Snakemake leaves, as a user removes it); False when the run ended before. A run that ended
    with an error stops the soak: a recovery must succeed."""
    try:
        code = proc.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        cmd = [str(BIN / "snakemake"), "--profile", profile, "--unlock"]
        subprocess.run(cmd, cwd=project, env=env(), capture_output=True, check=True, timeout=300)
        return True
    if code != 0:
        raise SystemExit(f"{project}: a run after a kill failed ({code}); see its log")
    return False


def finish(project: Path, profile: str, log: Path, timeout_s: float) -> None:
    proc = start(project, profile, log)
    try:
        code = proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise SystemExit(f"{project}: the recovery run did not end in {timeout_s:.0f} s") from None
    if code != 0:
        raise SystemExit(f"{project}: the recovery run failed ({code}); see {log}")


def compare(name: str, project: Path, reference: dict[str, str], tally: Tally) -> None:
    got = result_hashes(project, timed=False)
    tally.campaigns += 1
    tally.files += len(got)
    diff = sorted(k for k in set(got) | set(reference) if got.get(k) != reference.get(k))
    if diff:
        tally.differing.append(f"{name}: {', '.join(diff[:5])}{' ...' if len(diff) > 5 else ''}")
        print(f"  {name}: DIFFERS from the uninterrupted run in {len(diff)} files")
    else:
        tally.identical += 1
        print(f"  {name}: identical to the uninterrupted run ({len(got)} files)")


def share_store(project: Path, store: Path) -> None:
    import yaml

    params = yaml.safe_load((project / "params.yaml").read_text())
    params["campaign"]["state_dir"] = str(store)
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))


def slurm_jobs(project: Path) -> list[str]:
    """Ids of the SLURM jobs still live whose working folder is in `project` (what a killed
    controller left running)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", LIVE_STATES, "-o", "%i|%Z"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    rows = (line.split("|", 1) for line in out.splitlines() if "|" in line)
    return [job for job, cwd in rows if Path(cwd) == project or project in Path(cwd).parents]


def wait_for_jobs(project: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while jobs := slurm_jobs(project):
        if time.monotonic() > deadline:
            raise SystemExit(f"{project}: SLURM jobs {jobs} still live after {timeout_s:.0f} s")
        time.sleep(5)


def soak_single(name, profile, work, reference, delays, kills, rng, tally, timeout_s) -> None:
    """Fresh projects, each started and killed until a start runs to its end (the kill came
    late), then compared; until `kills` kills have landed. `delays`: (min, max) seconds."""
    landed_here, n = 0, 0
    while landed_here < kills:
        n += 1
        project = copy_project(work / name / f"project{n}")
        log = work / name / f"project{n}.log"
        while landed_here < kills:
            delay = rng.uniform(*delays)
            landed = kill_after(start(project, profile, log), delay, project, profile)
            print(f"{stamp()} {name}/project{n}: after {delay:.1f} s: "
                  f"{'killed' if landed else 'ended'}", flush=True)  # fmt: skip
            if not landed:
                break
            landed_here += 1
            tally.kills += 1
        else:
            finish(project, profile, log, timeout_s)
        if profile == SLURM_PROFILE:
            wait_for_jobs(project, timeout_s)
        compare(f"{name}/project{n}", project, reference, tally)


def soak_shared(work, reference, delays, kills, rng, tally, timeout_s) -> None:
    """Pairs of campaigns on one store (a fresh store per pair), started together. Each kill
    takes one of the pair's running campaigns at random while the other runs on, and the
    killed one is started again at once; a campaign that ends is done. A new pair starts when
    both are done, until `kills` kills have landed; then each runs to its end and is compared."""
    profile = PROFILES["shared"]
    landed_here, n = 0, 0
    while landed_here < kills:
        n += 1
        pair = work / "shared" / f"pair{n}"
        projects = [copy_project(pair / name) for name in ("a", "b")]
        for project in projects:
            share_store(project, pair / "store")
        logs = [pair / f"{p.name}.log" for p in projects]
        running = {i: start(p, profile, logs[i]) for i, p in enumerate(projects)}
        while running and landed_here < kills:
            victim = rng.choice(sorted(running))
            delay = rng.uniform(*delays)
            deadline = time.monotonic() + delay
            while victim in running and time.monotonic() < deadline:
                for i in [i for i, proc in running.items() if proc.poll() is not None]:
                    if running.pop(i).returncode != 0:
                        raise SystemExit(f"{projects[i]}: a run failed; see {logs[i]}")
                    print(f"{stamp()} shared/pair{n}: campaign {'ab'[i]} ended", flush=True)
                time.sleep(0.2)
            if victim not in running:
                continue
            if not kill_after(running[victim], 0, projects[victim], profile):
                running.pop(victim)  # it ended in that instant
                continue
            running[victim] = start(projects[victim], profile, logs[victim])
            landed_here += 1
            tally.kills += 1
            print(f"{stamp()} shared/pair{n}: campaign {'ab'[victim]} killed after {delay:.1f} s "
                  f"({len(running) - 1} other running)", flush=True)  # fmt: skip
        for i, proc in running.items():  # the goal is met: the runs under way go on to their end
            if proc.wait(timeout=timeout_s) != 0:
                raise SystemExit(f"{projects[i]}: a run failed; see {logs[i]}")
        for project, log in zip(projects, logs, strict=True):
            finish(project, profile, log, timeout_s)
        for project in projects:
            compare(f"shared/pair{n}/{project.name}", project, reference, tally)


def stamp() -> str:
    return time.strftime("%H:%M:%S")


def slurm_up() -> bool:
    try:
        out = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and bool({"idle", "mixed"} & set(out.stdout.split()))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--scenarios",
        default="workstation,slurm,shared",
        help="comma-separated scenarios, each optionally with its kills: workstation:11,slurm:9",
    )
    parser.add_argument("--kills", type=int, default=10, help="kills of a scenario without :N")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--campaign",
        choices=CAMPAIGNS,
        default="tiny",
        help="the campaign soaked: the tiny classification one, or a generation campaign "
        "trained by the TRL example through train.command",
    )
    parser.add_argument("--work", type=Path, default=Path("/tmp/campaign-kill-soak"))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per recovery run")
    parser.add_argument(
        "--reference",
        type=Path,
        help="a finished uninterrupted run of --campaign on this code (default: run one first)",
    )
    parser.add_argument(
        "--span",
        type=float,
        help="kills are drawn over [--min-delay, --span] seconds after a start (default: the "
        "reference run's duration; 300 with --reference)",
    )
    parser.add_argument("--min-delay", type=float, default=1.0)
    args = parser.parse_args(argv)
    args.plan = parse_plan(args.scenarios, args.kills)
    if args.span is not None and not args.min_delay < args.span:
        parser.error(f"--span {args.span} must be above --min-delay {args.min_delay}")
    return args


def main(argv: list[str] | None = None) -> int:
    global CAMPAIGN
    args = parse_args(argv)
    CAMPAIGN = args.campaign
    rng = random.Random(args.seed)
    args.work.mkdir(parents=True, exist_ok=True)

    if args.reference:
        reference, span_s = args.reference, 300.0
    else:
        reference = copy_project(args.work / "reference" / "project")
        t0 = time.monotonic()
        finish(reference, PROFILES["workstation"], args.work / "reference.log", 3600)
        span_s = time.monotonic() - t0
    delays = (args.min_delay, args.span or span_s)
    ref_hashes = result_hashes(reference, timed=False)
    print(f"reference: {reference}, kills drawn over {delays[0]:.0f}-{delays[1]:.0f} s, "
          f"{len(ref_hashes)} files", flush=True)  # fmt: skip

    tallies, skipped = [], []
    for scenario, kills in args.plan.items():
        tally = Tally(scenario)
        if scenario == "slurm" and not slurm_up():
            skipped.append("slurm (no cluster answers: bash scripts/slurm-cluster.sh start)")
            continue
        tallies.append(tally)
        if scenario == "shared":
            soak_shared(args.work, ref_hashes, delays, kills, rng, tally, args.timeout)
        else:
            profile = SLURM_PROFILE if scenario == "slurm" else PROFILES[scenario]
            soak_single(scenario, profile, args.work, ref_hashes, delays, kills, rng, tally,
                        args.timeout)  # fmt: skip

    print()
    print("\n".join(render(tallies, skipped)))
    return 1 if any(t.differing for t in tallies) else 0


if __name__ == "__main__":
    sys.exit(main())
