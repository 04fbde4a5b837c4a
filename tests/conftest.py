"""Shared fixtures: a throwaway copy of the project to run Snakemake, DVC and the CLI in."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FIXTURES = REPO / "tests" / "fixtures"


def project_files() -> list[str]:
    """Tracked files plus new, not-ignored ones: what a clone (plus this change) would hold."""
    out = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split("\n")
    return [f for f in out if f and (REPO / f).is_file()]


def copy_project(dest: Path, params: Path | None = FIXTURES / "tiny_params.yaml") -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for rel in project_files():
        if rel.startswith(("tests/", "results/", "benchmarks/")):
            continue  # a project starts without results; a checkout may hold some
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, target)
    if params is not None:
        shutil.copy(params, dest / "params.yaml")
    return dest


def env() -> dict:
    e = dict(os.environ)
    e["PATH"] = f"{BIN}{os.pathsep}{e.get('PATH', '')}"
    return e


def run(cmd: list[str], cwd: Path, timeout: float = 300, check: bool = True):
    proc = subprocess.run(cmd, cwd=cwd, env=env(), capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(map(str, cmd))} exited {proc.returncode}\n--- stdout\n{proc.stdout[-4000:]}"
            f"\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


def snakemake(project: Path, *args: str, timeout: float = 300, check: bool = True):
    return run(
        [str(BIN / "snakemake"), "--profile", "profiles/default", "--cores", "2", *args],
        project,
        timeout=timeout,
        check=check,
    )


def campaign(project: Path, *args: str, check: bool = True, timeout: float = 120):
    """`python -m campaign` in a project copy, with that copy's package (as its rules run it)."""
    e = env()
    e["PYTHONPATH"] = str(project / "workflow")
    proc = subprocess.run(
        [sys.executable, "-m", "campaign", *args],
        cwd=project,
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"campaign {' '.join(args)} exited {proc.returncode}\n--- stdout\n"
            f"{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}"
        )
    return proc


_JOB = re.compile(r"^(?:local)?rule (\w+):\s*$")
_OUTPUT = re.compile(r"^\s+output: (.*)$")


NOTHING_TO_DO = "Nothing to be done"


def planned_jobs(dry_run: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    """(rule, first output) for every job a finished `snakemake -n` lists.

    The listing must also agree with Snakemake's own verdict: no job parsed only with its
    "Nothing to be done" line, and never that line next to parsed jobs. So a change in the
    dry-run format (the job regex then matching nothing) fails here instead of reading as
    "nothing to rerun". It takes the process, not its text, so that no caller can skip that.
    """
    jobs, rule = [], None
    for line in dry_run.stdout.splitlines():
        if m := _JOB.match(line):
            rule = m.group(1)
            if rule == "all":
                jobs.append(("all", ""))
                rule = None
        elif rule and (m := _OUTPUT.match(line)):
            jobs.append((rule, m.group(1).split(",")[0].strip()))
            rule = None
    said = NOTHING_TO_DO in dry_run.stdout + dry_run.stderr
    assert said == (not jobs), (
        f"dry run lists {len(jobs)} jobs but Snakemake "
        f"{'says' if said else 'does not say'} {NOTHING_TO_DO!r}\n--- stdout\n"
        f"{dry_run.stdout[-3000:]}\n--- stderr\n{dry_run.stderr[-3000:]}"
    )
    return sorted(jobs)


def events(project: Path) -> list[dict]:
    import json

    path = project / ".campaign" / "events.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# Outputs that record wall-clock timings or machine state (throughput, seconds, free disk) — the
# stages' volatile outputs — and the plan table, whose projected hours come from them: two
# separately computed campaigns differ here. Everything else (models, metrics, predictions,
# splits, run manifests, the preflight's verdicts) is bit for bit.
TIMED_OUTPUTS = (
    *("timings.json", "measurements.json", "report.txt", "runs.tsv", "variants.parquet"),
    "index.parquet",  # the experiment index: each run's measured hours and cost
    "mlflow.db",  # the tracking store: run ids and wall times
    "floor_timings.json",  # the floor stage's fit and predict seconds
)
# every budget table is computed from wall times; the report shows them (and the quantized
# variants' latency)
TIMED_FOLDERS = ("budget", "report", "tracking", "tensorboard", "mlartifacts")


def result_hashes(project: Path, timed: bool = True) -> dict[str, str]:
    """Content hash of every file under results/ (without the timed outputs if timed=False)."""
    from campaign.core.hashing import hash_file

    root = project / "results"
    return {
        p.relative_to(root).as_posix(): hash_file(p)
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.name != ".gitignore"
        and (
            timed
            or (p.name not in TIMED_OUTPUTS and p.relative_to(root).parts[0] not in TIMED_FOLDERS)
        )
    }


def minutes(item) -> float:
    """A test's own estimate of its minutes (`@pytest.mark.slow(minutes=N)`), 0 without one."""
    marker = item.get_closest_marker("slow")
    return float(marker.kwargs.get("minutes", 0)) if marker else 0.0


def pytest_collection_modifyitems(config, items) -> None:
    """Under pytest-xdist (`--dist loadgroup`, as scripts/test.sh runs it), the tests that share
    the one SLURM cluster are meant to run on one worker, one after the other (xdist_group);
    with this pytest and xdist the group does not reach the scheduler (checked: tests marked
    xdist_group ran on both workers), so they also take the `slurm_lock` fixture, which
    serialises them.

    The tests that say how many minutes they take start first, longest first, and the rest keep
    their order: xdist hands tests out in this order, so a ten-minute test collected last (the
    workflow folder sorts last) would start when the other worker has nothing left to do and
    set the suite's wall time alone. Longest first leaves short tests to even out the end.
    """
    for item in items:
        if item.get_closest_marker("slurm"):
            item.add_marker(pytest.mark.xdist_group("slurm"))
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-minutes(item), order[id(item)]))


@pytest.fixture()
def slurm_lock(tmp_path_factory):
    """Held, while the test runs, on a lock file every xdist worker of the session shares: the
    single-node cluster runs one test's jobs at a time (a second test's jobs would queue behind
    them, or its job-state checks see the other's jobs). List it after the fixtures that take
    long to set up (finished_campaign), so that it is not held while they build."""
    import fcntl

    root = tmp_path_factory.getbasetemp()
    root = root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root
    with open(root / "slurm.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def one_thread():
    """torch on one thread for a module of tiny models (`pytestmark =
    pytest.mark.usefixtures("one_thread")`): their small matrices are fastest on one, and on a
    shared, loaded machine two threads that wait on each other made 80 steps of the tiny Llama
    100x slower (134 s against ~1.5 s). Tensor bytes do not depend on it."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture()
def tiny_project(tmp_path: Path) -> Path:
    return copy_project(tmp_path / "project")


def copy_finished(source: Path, dest: Path) -> Path:
    """A finished project copied whole: results, logs, Snakemake's metadata and the store.

    The store is ``campaign.state_dir`` (relative in the tiny params), so the copy's stages hit
    and commit in the copy's own store, and nothing the copy does reaches the source. Two records
    name the project's absolute folder, and are rewritten to the copy's as if it had run there:
    Snakemake's metadata (the rules' ``campaign`` param holds the package path, so a moved
    project would look param-changed) and the store's job records (``project``: gc keeps what
    another checkout's jobs made, so a copy would keep everything). Mtimes and modes are kept
    (copy2); inodes and ctimes are new, so the stat cache of file hashes hashes afresh.
    """
    import yaml

    shutil.copytree(source, dest, symlinks=True)
    old, new = str(source.resolve()), str(dest.resolve())
    state_dir = yaml.safe_load((dest / "params.yaml").read_text())["campaign"]["state_dir"]
    for folder in (dest / ".snakemake" / "metadata", dest / state_dir / "jobs"):
        for path in folder.glob("*"):
            text = path.read_text(encoding="utf-8")
            if old in text:
                stat = path.stat()
                path.write_text(text.replace(old, new), encoding="utf-8")
                os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    # A job record's file is named by (checkout, outputs) (Store.job_id): renamed to the copy's
    # name, so the copy's next run of that job replaces it instead of leaving the old key named
    # by a second record of the same outputs (gc would then keep an entry no job can hit).
    from campaign.core.hashing import hash_value

    for path in (dest / state_dir / "jobs").glob("*.json"):
        outputs = sorted(json.loads(path.read_text(encoding="utf-8")).get("outputs", []))
        if path.stem == hash_value([old, outputs])[:24]:
            path.rename(path.with_name(hash_value([new, outputs])[:24] + ".json"))
    return dest


def session_project(tmp_path_factory, name: str, build) -> Path:
    """A project built once per session under `name` and shared by every test (and, under
    pytest-xdist, by every worker: the first to ask builds it, the others wait on a lock).
    `build(project)` makes it and returns the text its `done` file keeps; a project a failed
    build left half-made is removed and built again."""
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the folder all workers of this session share
    project = shared / name / "project"
    with FileLock(str(shared / f"{name}.lock")):
        done = project.parent / "done"
        if not done.exists():
            if project.exists():
                shutil.rmtree(project)  # a run that failed half-way in another worker
            done_text = build(project)
            done.write_text(done_text)
    return project


@pytest.fixture(scope="session")
def finished_campaign(tmp_path_factory) -> Path:
    """The tiny campaign run to its end once per session: read it, never change it (a test that
    changes it takes ``finished_project``, its own copy). Shared as session_project says."""

    def build(project: Path) -> str:
        copy_project(project)
        snakemake(project, timeout=1500)
        return "finished\n"

    return session_project(tmp_path_factory, "finished_campaign", build)


def warm_store(
    project: Path,
    finished: Path,
    cold: frozenset[str] = frozenset(),
    cold_keys: frozenset[str] = frozenset(),
) -> int:
    """Copy the finished campaign's store entries, but those of the ``cold`` stages and the
    ``cold_keys``, into the project's store, as two campaigns sharing one store would hold them;
    return how many.

    The project still starts without results: Snakemake plans and runs every job, and a job
    whose key the finished campaign computed is a store hit (its outputs copied from the entry,
    verified on use) instead of minutes of preflight or training. A job whose params, code or
    inputs differ has another key and computes as before, so a warm store changes what a test
    costs, never what it shows, except in the store's own events (hits where misses were).
    """
    import yaml

    state_dir = yaml.safe_load((project / "params.yaml").read_text())["campaign"]["state_dir"]
    source = finished / state_dir / "store"
    dest = project / state_dir / "store"
    for folder in (dest.parent, dest):
        folder.mkdir(exist_ok=True, mode=0o700)  # owner-only, as the store makes its own
    copied = 0
    for entry in sorted(source.iterdir()):
        stage = json.loads((entry / "entry.json").read_text(encoding="utf-8"))["stage"]
        if stage not in cold and entry.name not in cold_keys:
            shutil.copytree(entry, dest / entry.name, symlinks=True)
            copied += 1
    return copied


def stage_keys(project: Path, stage: str) -> list[str]:
    """The keys of a project's store entries of one stage, sorted."""
    store = project / ".campaign" / "store"
    return sorted(
        p.name
        for p in store.iterdir()
        if json.loads((p / "entry.json").read_text(encoding="utf-8"))["stage"] == stage
    )


@pytest.fixture()
def finished_project(finished_campaign: Path, tmp_path: Path) -> Path:
    """This test's own copy of the finished tiny campaign, to edit and rerun."""
    return copy_finished(finished_campaign, tmp_path / "project")


# Killing a Snakemake run with kill -9 while a training job is mid-run (the tests that show a
# killed campaign resumes: tests/workflow/test_e2e.py, tests/workflow/test_adaptive.py).


@dataclass(frozen=True)
class Killed:
    """The training job that was running when the campaign was killed."""

    key: str  # its store key (no entry under it: it had not finished)
    run: str  # its run id (results/runs/<run>/...)
    steps: list[int]  # the steps of the checkpoints in its work folder after the kill


def checkpoint_steps(work: Path) -> list[int]:
    """The steps of the complete checkpoints in a work folder; [] when the folder is not there
    (yet, or any more: a run that finished cleaned it up while it was listed)."""
    from campaign.train.checkpoint import checkpoint_files

    try:
        return [step for step, _ in checkpoint_files(work)]
    except FileNotFoundError:
        return []


def run_of(record: dict) -> str | None:
    """The run id a train job's record names in its outputs (results/runs/<run>/...)."""
    for out in record.get("outputs", []):
        parts = Path(out).parts
        if "runs" in parts and parts.index("runs") + 1 < len(parts):
            return parts[parts.index("runs") + 1]
    return None


def _stopped(pid: int, timeout_s: float = 10) -> bool:
    """Wait until a process is stopped (state T) or gone; True when it is stopped."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            return False
        if fields[0] in ("T", "t"):
            return True
        if fields[0] in ("Z", "X"):
            return False
        time.sleep(0.005)
    raise AssertionError(f"process {pid} did not stop within {timeout_s} s of SIGSTOP")


def _candidate(store, runs: list[str] | None, tried: set[str]) -> dict | None:
    """The record of a running train job (of one of `runs` when given) with a checkpoint in its
    work folder and no entry in `store` (a campaign.core.store.Store) yet, not tried before."""
    for record in store.job_records():
        key = record.get("key")
        if record.get("stage") != "train" or record.get("state") != "running" or not key:
            continue
        if key in tried or (runs is not None and run_of(record) not in runs):
            continue
        if checkpoint_steps(store.work_root / key) and not store.entry_path(key).exists():
            return record
    return None


def kill_9_mid_training(
    project: Path, runs: list[str] | None = None, timeout_s: float = 600
) -> Killed:
    """Start `snakemake --cores 1` in `project` and kill -9 it and every job it started as soon
    as a training job (of one of `runs` when given) has written its first checkpoint.

    The race between seeing that checkpoint and the kill (a tiny run can finish in between) is
    closed: the whole process group is stopped (SIGSTOP, and the job seen to be stopped) before
    the job is checked again, so what the check sees is what the kill leaves. A job that
    finished in between is let go (SIGCONT) and the next one is waited for; a campaign that ends
    without one running with a checkpoint fails the test, never passes it.
    """
    from campaign.core.store import Store

    store = Store(project / ".campaign")
    proc = subprocess.Popen(
        [str(BIN / "snakemake"), "--cores", "1"],
        cwd=project,
        env=env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    tried: set[str] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None and time.monotonic() < deadline:
            record = _candidate(store, runs, tried)
            if record is None:
                time.sleep(0.02)
                continue
            key = record["key"]
            tried.add(key)
            os.killpg(proc.pid, signal.SIGSTOP)
            # Frozen: nothing of the campaign moves until the kill or the SIGCONT.
            if _stopped(record["pid"]) and not store.entry_path(key).exists():
                steps = checkpoint_steps(store.work_root / key)
                if steps:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    return Killed(key=key, run=run_of(record), steps=steps)
            os.killpg(proc.pid, signal.SIGCONT)  # it finished first: wait for the next one
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    raise AssertionError(
        f"no training job{f' of {runs}' if runs else ''} was caught mid-run with a checkpoint "
        f"(snakemake exited {proc.returncode}; tried {sorted(tried) or 'none'}): the kill would "
        "not have landed mid-run"
    )
