"""The `campaign` command: one subcommand per stage (what the rules run) plus the user tools.

Stage subcommands take their params subset either from a params file (`--params`, for a person)
or as JSON (`--spec`, what the Snakemake rules pass so that Snakemake's params trigger sees it),
inputs as `--in NAME=PATH` and outputs as `--out NAME=PATH`. Paths are always arguments.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.exiting import exit_without_teardown


def _pairs(values: list | None, flag: str, many: bool = False) -> dict[str, list[Path]]:
    """{name: [paths]} from `--in NAME=PATH [PATH ...]` (many) or `--out NAME=PATH`. `NAME=` with
    no path names an input that is empty (a pretrained model folder the params do not name)."""
    out: dict[str, list[Path]] = {}
    for group in values or []:
        first, *more = group if isinstance(group, list) else [group]
        name, sep, path = first.partition("=")
        if not sep or not name or (not path and not many) or (not many and more):
            raise CampaignError(f"{flag} {' '.join([first, *more])!r}: expected NAME=PATH")
        paths = out.setdefault(name, [])
        paths += [Path(p) for p in ([path] if path else []) + more if p]
    return out


def _load(args) -> dict:
    from campaign.core.params import load_params

    return load_params(args.params)


def _state_dir(args, params: dict | None = None) -> Path:
    """The state folder (`--state-dir`, else params campaign.state_dir), refused in one line when
    it is `/`, the home folder, a file or a folder of something else (core.store)."""
    from campaign.core.store import check_state_dir

    if getattr(args, "state_dir", None):
        return check_state_dir(args.state_dir, "--state-dir")
    params = _load(args) if params is None else params
    return check_state_dir(params["campaign"]["state_dir"])


def _store(args):
    from campaign.core.store import Store

    return Store(_state_dir(args))


# ------------------------------------------------------------------ stage commands
def _no_constant(name: str):
    """Python's json reads NaN and Infinity, which JSON does not have; params refuse them in
    every numeric key, and a hand-written --spec is refused the same way."""
    raise CampaignError(f"--spec: expected a finite number; got {name}")


def cmd_stage(args) -> int:
    from campaign.core.registry import get_stage
    from campaign.core.runner import run_stage

    stage = get_stage(args.stage)
    if args.spec is not None:
        try:
            spec = json.loads(args.spec, parse_constant=_no_constant)
        except json.JSONDecodeError as e:
            raise CampaignError(f"--spec: not valid JSON ({e.msg} at char {e.pos})") from None
        if args.state_dir is None:
            raise CampaignError("--state-dir is required with --spec")
        state_dir = _state_dir(args)
    else:
        params = _load(args)
        wildcards = {"run": args.run} if args.run else {}
        spec = stage.spec(params, **wildcards)
        state_dir = _state_dir(args, params)
    outputs = {name: paths[0] for name, paths in _pairs(args.out, "--out").items()}
    missing = [n for n in stage.outputs if n not in outputs]
    if missing:
        raise CampaignError(f"{args.command}: missing --out for {', '.join(missing)}")
    inputs = _pairs(args.inputs, "--in", many=True)
    from campaign.core.store import Store

    # Where this job writes, named by a full disk's line when the OSError names no file.
    args.writes = [str(state_dir), *sorted({str(Path(p).parent) for p in outputs.values()})]
    run_stage(stage.name, spec, inputs, outputs, Store(state_dir), Path("."), threads=args.threads)
    return 0


# ------------------------------------------------------------------ user tools
def cmd_validate(args) -> int:
    from campaign.core.tasks import check_template_file
    from campaign.data import expand_sources
    from campaign.evaluate import check_metric
    from campaign.guards import check_guard_files
    from campaign.plan import plan_index
    from campaign.preflight import check_model_folder

    params = _load(args)
    try:
        files = expand_sources(params["data"]["sources"], Path("."))
        check_model_folder(params["model"], Path("."))
        check_template_file(params["model"], Path("."))
        check_metric(params, Path("."))
        check_guard_files(params, Path("."))
        _state_dir(args, params)
    except CampaignError as e:
        raise CampaignError(f"{args.params}: {e}") from None
    print(f"{args.params}: ok ({len(files)} data file(s), {len(plan_index(params))} planned runs)")
    return 0


def cmd_plan(args) -> int:
    from campaign.plan import plan_report

    params = _load(args)
    rows, lines = plan_report(params, Path(args.preflight_report), Path(args.measurements))
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    else:
        print("\n".join(lines))
    return 0


def cmd_verify(args) -> int:
    from campaign.tools.verify import verify_store

    store = _store(args)
    bad = verify_store(store, remove=args.remove)
    return 1 if bad else 0


def _dag(args) -> dict:
    """What a command registered with _with_snakefile passes its tool: the params file, the
    store and the Snakefile."""
    return {"params_path": args.params, "store": _store(args), "snakefile": args.snakefile}


def cmd_gc(args) -> int:
    from campaign.tools.status import garbage_collect

    flags = {"dry_run": args.dry_run, "force": args.force, "retention": args.retention}
    return garbage_collect(**_dag(args), **flags)


def cmd_status(args) -> int:
    from campaign.tools.status import print_status

    return print_status(**_dag(args), plan_table=args.plan_table, forecast=args.forecast)


def cmd_findings(args) -> int:
    from campaign.tools.findings import findings_block

    print(findings_block(Path(args.root)), flush=True)
    return 0


def _within_tolerance(row: dict) -> bool:
    from campaign.core.closeness import REPRODUCE_ATOL

    diff = row.get("max_abs_diff")
    return diff is not None and diff <= REPRODUCE_ATOL


def _reproduce_verdict(row: dict) -> str:
    if row["equal"] is None:
        return "recorded (volatile, not compared)"
    if row["equal"]:
        return "same"
    if _within_tolerance(row):
        return f"within tolerance (max |difference| {row['max_abs_diff']:.2g}), not bit for bit"
    diff = row.get("max_abs_diff")
    return "DIFFERENT" if diff is None else f"DIFFERENT (max |difference| {diff:.3g})"


def cmd_reproduce(args) -> int:
    import tempfile

    from campaign.core.closeness import REPRODUCE_ATOL
    from campaign.core.runner import reproduce

    store = _store(args)
    with tempfile.TemporaryDirectory(prefix="campaign-reproduce-") as scratch:
        rows = reproduce(store, args.key, Path(scratch))
    width = max(len(r["output"]) for r in rows)
    for r in rows:
        print(
            f"{r['output'].ljust(width)}  stored {r['stored'][:16]}  recomputed "
            f"{r['recomputed'][:16]}  {_reproduce_verdict(r)}"
        )
    differ = [r["output"] for r in rows if r["equal"] is False]
    compared = [r for r in rows if r["equal"] is not None]
    close = [r["output"] for r in rows if r["equal"] is False and _within_tolerance(r)]
    if differ and len(close) == len(differ):
        print(
            f"reproduce: NOT bit for bit: {', '.join(close)} came back only within tolerance "
            f"(numbers within {REPRODUCE_ATOL:g}, everything else equal)"
        )
        return 1
    if differ:
        print(f"reproduce: {len(differ)} output(s) differ: {', '.join(differ)}")
        return 1
    volatile = len(rows) - len(compared)
    if not compared:
        print(
            f"reproduce: nothing to compare: all {volatile} output(s) of this stage are volatile "
            "(recorded, not compared); reproduce the stages that consume them instead"
        )
        return 1
    tail = f"; {volatile} volatile output(s) recorded, not compared" if volatile else ""
    print(f"reproduce: all {len(compared)} compared output(s) reproduced bit for bit{tail}")
    return 0


def cmd_split_salt(args) -> int:
    from campaign.data import find_salt, load_records

    params = _load(args)
    records = load_records(params["data"]["sources"], params["data"]["fields"], Path("."))
    split = params["split"]
    choice = find_salt(records, split, seed=params["campaign"]["seed"], tries=args.tries)
    numbers = (
        f"max label deviation {choice.label_deviation:.4f} (tolerance "
        f"{split['stratify_tolerance']}), max size deviation {choice.size_deviation:.4f} "
        f"(tolerance {split['size_tolerance']})"
    )
    if choice.kept:
        print(f"the current salt {choice.salt} passes: {numbers}; keep it")
        return 0
    print(f"current salt {split['salt']} fails; best of {choice.tried - 1} salts: {choice.salt}")
    print(f"  {numbers}")
    print(f"put it in {args.params}:  split: {{salt: {choice.salt}}}")
    return 0


def _keyed(args, params: dict) -> tuple:
    """What a command registered with _with_key reads: (the age identity of --key-file, the
    store folder)."""
    from campaign.tools.backup import load_identity

    return load_identity(args.key_file), Path(_state_dir(args, params))


def cmd_backup(args) -> int:
    from campaign.tools.backup import backup, new_identity

    params = _load(args)
    if args.new_key:
        if not args.key_file:
            raise CampaignError("--new-key: also pass --key-file FILE (where the key goes)")
        new_identity(Path(args.key_file))
        print(f"wrote a new key to {args.key_file}: keep a copy apart from the backups")
    identity, state_dir = _keyed(args, params)
    out, n_files = backup(Path("."), state_dir, Path(args.to), identity)
    print(f"backup: {n_files} files (results, logs, store, snakemake metadata) -> {out}")
    return 0


def cmd_restore(args) -> int:
    from campaign.tools.backup import restore

    identity, state_dir = _keyed(args, _load(args))
    n_files = restore(Path(args.archive), Path("."), state_dir, identity)
    print(f"restore: {n_files} files checked against the manifest and put in place")
    return 0


def cmd_scan_artifacts(args) -> int:
    from campaign.core.fsutil import atomic_write_bytes
    from campaign.tools.artifacts import scan_artifacts

    out = Path(args.out)
    report = scan_artifacts([Path(p) for p in args.paths], skip={out.resolve()})
    atomic_write_bytes(out, (json.dumps(report, indent=2, sort_keys=True) + "\n").encode())
    kinds = ", ".join(f"{k}: {n}" for k, n in report["findings_by_kind"].items()) or "none"
    print(
        f"scan-artifacts: {report['flagged']} of {report['scanned']} artifacts hold findings "
        f"({kinds}) -> {out}"
    )
    return 1 if report["flagged"] and args.fail else 0


def cmd_demo_data(args) -> int:
    from campaign.tools.demo_data import DEFAULT_N_RECORDS, write_corpus

    n_records = DEFAULT_N_RECORDS if args.n is None else args.n
    if n_records < 1:
        raise CampaignError(f"--n: expected a positive number of records; got {n_records}")
    try:
        write_corpus(args.out, seed=args.seed, n_records=n_records)
    except ValueError as e:
        raise CampaignError(f"demo-data: {e}") from None
    print(f"wrote {args.out}")
    return 0


# ------------------------------------------------------------------ parser
# Each command registers its own parser (and its func); build_parser calls them in the order
# `campaign --help` lists the commands.
STATE_DIR_HELP = "store folder (default: campaign.state_dir)"
KEY_HELP = (
    "age identity file (AGE-SECRET-KEY-1...); default: the environment variable CAMPAIGN_BACKUP_KEY"
)


def _with_params(p):
    p.add_argument(
        "--params",
        default=os.environ.get("CAMPAIGN_PARAMS", "params.yaml"),
        help="params file (default: $CAMPAIGN_PARAMS, else params.yaml; Snakemake reads the "
        "same variable)",
    )
    return p


def _command(sub, name: str, text: str, params: bool = True, description: bool = True):
    """A subcommand's parser, with --params unless `params` is False; its --help repeats the
    one-line help as its description unless `description` is False."""
    p = sub.add_parser(name, help=text, **({"description": text} if description else {}))
    return _with_params(p) if params else p


def _add_stages(sub) -> None:
    """One subcommand per declared stage (what the rules run), in DAG order."""
    from campaign.core.registry import stages

    for stage in stages().values():
        p = _command(sub, stage.command, f"stage: {stage.help}")
        p.add_argument("--spec", help="the stage's params subset as JSON (instead of --params)")
        p.add_argument("--run", help="run id (run-spec and train with --params)")
        p.add_argument(
            "--in",
            dest="inputs",
            action="append",
            nargs="+",
            metavar="NAME=PATH",
            help="an input by name, one or more paths (`--in sources=a.csv b.csv`)",
        )
        p.add_argument("--out", action="append", metavar="NAME=PATH")
        p.add_argument("--state-dir", help=STATE_DIR_HELP)
        p.add_argument(
            "--threads",
            type=int,
            default=1,
            help="compute threads of a stage that trains or predicts (part of its key; rules "
            "pass their `threads:`)",
        )
        p.add_argument("--log", help="write the stage's output here; errors also go to stderr")
        p.set_defaults(func=cmd_stage, stage=stage.name)


def _add_user_tools(sub) -> None:
    """`campaign init` (a params file for your own data and model) and `campaign compare`
    (decisions on per-item results from lm-eval, Inspect or a table)."""
    from campaign.compare import add_parser as add_compare
    from campaign.tools.init import add_parser as add_init

    add_init(sub)
    add_compare(sub)


def _add_validate(sub) -> None:
    p = _command(sub, "validate", "check a params file against the schema", description=False)
    p.set_defaults(func=cmd_validate)


def _add_plan(sub) -> None:
    text = (
        "print the planned runs in order (projected hours and the budget cut once the preflight "
        "has measured) and what the plan can estimate"
    )
    p = _command(sub, "plan", text)
    p.add_argument("--format", choices=["table", "json"], default="table")
    p.add_argument(
        "--preflight-report",
        default="results/preflight/report.json",
        help="the preflight's report (default: %(default)s)",
    )
    p.add_argument(
        "--measurements",
        default="results/preflight/measurements.json",
        help="the preflight's measurements, for projected hours (default: %(default)s)",
    )
    p.set_defaults(func=cmd_plan)


def _with_snakefile(p):
    """--state-dir and --snakefile: where the store and the DAG are."""
    p.add_argument("--state-dir", help=STATE_DIR_HELP)
    p.add_argument("--snakefile", default="Snakefile")
    return p


def _add_status(sub) -> None:
    text = "which planned jobs are done, running, missing or failed"
    p = _with_snakefile(_command(sub, "status", text))
    p.add_argument(
        "--plan-table",
        default="results/plan/runs.tsv",
        help="the plan's runs with projected hours (default: %(default)s)",
    )
    p.add_argument(
        "--forecast",
        default="results/budget/forecast.parquet",
        help="the budget's calibrated forecast (default: %(default)s)",
    )
    p.set_defaults(func=cmd_status)


def _add_gc(sub) -> None:
    text = "drop store entries and leftovers the current plan does not reference"
    p = _with_snakefile(_command(sub, "gc", text))
    p.add_argument("--dry-run", "-n", action="store_true", help="only list what would go")
    p.add_argument(
        "--force",
        action="store_true",
        help="collect even when some planned outputs have no file and no job record",
    )
    p.add_argument(
        "--retention",
        action="store_true",
        help="keep what is inside the params `retention` windows (checkpoints of "
        "completed runs, unreferenced entries); raw-data copies go once unreferenced",
    )
    p.set_defaults(func=cmd_gc)


def _add_verify(sub) -> None:
    text = "re-hash every store entry; report corrupt ones"
    p = _command(sub, "verify", text, description=False)
    p.add_argument("--state-dir", help=STATE_DIR_HELP)
    p.add_argument(
        "--remove",
        action="store_true",
        help="move corrupt entries out of the store (skipping keys a running job holds)",
    )
    p.set_defaults(func=cmd_verify)


def _add_reproduce(sub) -> None:
    p = _command(sub, "reproduce", "recompute a store entry; compare hashes", description=False)
    p.add_argument("key", help="store key (or a unique prefix)")
    p.add_argument("--state-dir", help=STATE_DIR_HELP)
    p.set_defaults(func=cmd_reproduce)


def _add_split_salt(sub) -> None:
    text = (
        "keep split.salt if its split passes the audit's balance checks, else find the "
        "best <split.salt>-N (label shares and split sizes within tolerance)"
    )
    p = _command(sub, "split-salt", text, description=False)
    p.add_argument("--tries", type=int, default=2000)
    p.set_defaults(func=cmd_split_salt)


def _with_key(p):
    """--key-file and --state-dir: the archive's key and the store it holds (read by _keyed)."""
    p.add_argument("--key-file", help=KEY_HELP)
    p.add_argument("--state-dir", help=STATE_DIR_HELP)
    return p


def _add_backup(sub) -> None:
    text = "write an encrypted archive (age) of results, logs, the store and snakemake metadata"
    p = _command(sub, "backup", text)
    p.add_argument("--to", required=True, help="folder for the archive")
    _with_key(p).add_argument(
        "--new-key", action="store_true", help="create --key-file first (must not exist)"
    )
    p.set_defaults(func=cmd_backup)


def _add_restore(sub) -> None:
    text = "restore a `campaign backup` archive, checked file by file, replacing what is there"
    p = _with_key(_command(sub, "restore", text))
    p.add_argument("archive", help="the .tar.age archive")
    p.set_defaults(func=cmd_restore)


def _add_findings(sub) -> None:
    text = (
        "what a user must act on (privacy findings, preflight failures and warnings, leakage "
        "audit problems, evaluation flags), from the phases' reports; the end of every "
        "snakemake run prints it"
    )
    p = _command(sub, "findings", text, params=False)
    p.add_argument("--root", default=".", help="the project folder (default: %(default)s)")
    p.set_defaults(func=cmd_findings)


def _add_scan_artifacts(sub) -> None:
    text = (
        "privacy scan of produced artifacts (tokenizer vocabularies, predictions, logs, "
        "reports): findings by kind and artifact path, never the secrets"
    )
    p = _command(sub, "scan-artifacts", text, params=False)
    p.add_argument("paths", nargs="*", default=["results", "logs"])
    p.add_argument("--out", default="results/privacy_artifacts.json")
    p.add_argument("--fail", action="store_true", help="exit 1 when any artifact holds findings")
    p.set_defaults(func=cmd_scan_artifacts)


def _add_demo_data(sub) -> None:
    p = _command(
        sub, "demo-data", "regenerate the embedded demo corpus", params=False, description=False
    )
    p.add_argument("--out", default="data/raw/demo.jsonl")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--n", type=int, default=None, help="number of records (default: the demo's)")
    p.set_defaults(func=cmd_demo_data)


# In the order `campaign --help` lists them: the stages, the user's tools, then the house.
COMMANDS = (
    _add_stages,
    _add_user_tools,
    _add_validate,
    _add_plan,
    _add_status,
    _add_gc,
    _add_verify,
    _add_reproduce,
    _add_split_salt,
    _add_backup,
    _add_restore,
    _add_findings,
    _add_scan_artifacts,
    _add_demo_data,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="campaign",
        description="Run an ML compute campaign as one reproducible Snakemake DAG.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


def _redirect_to_log(path: str) -> tuple[int, int]:
    """Send this process's stdout and stderr (file descriptors, so child processes too) to the
    log file; return copies of the original descriptors (to restore, and for the error line)."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    saved = (os.dup(1), os.dup(2))
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError):  # a log on a full disk cannot take the flush
            stream.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)
    os.close(saved[0])
    os.close(saved[1])


def _tell(line: str, saved: tuple[int, int] | None) -> None:
    """The error line on the real stderr first, then in the log: the log may be on the full
    disk that caused the failure, and its write must not raise a second error over the line."""
    if saved is None:
        print(line, file=sys.stderr, flush=True)
        return
    os.write(saved[1], (line + "\n").encode())
    with contextlib.suppress(OSError):
        print(line, file=sys.stderr, flush=True)


def _on_sigterm(signum, _frame) -> None:
    from campaign.core.errors import Interrupted, note_signal

    note_signal(signum)
    raise Interrupted(signum)


def _on_sigint(signum, _frame) -> None:
    from campaign.core.errors import note_signal

    note_signal(signum)
    raise KeyboardInterrupt


def _disk_full(error: BaseException, places: list[str]) -> str | None:
    """The one-line message for a failure caused by a full disk (or quota), else None. Looked for
    along the exception's chain: a library may wrap the OSError (torch.save raises RuntimeError).
    A write to a descriptor (the log, the event log) names no file: the line then names the
    `places` the command writes to, so the user knows which disk to free."""
    import errno

    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        full = isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT)
        if full or "No space left on device" in str(error):
            where = getattr(error, "filename", None)
            named = f" (writing {where})" if where else ""
            if not where and places:
                named = f" (on the disk of one of: {', '.join(places)})"
            return (
                "error: the disk is full"
                + named
                + ": free space and run again; what was committed to the store is kept, and a "
                "training job resumes from its last checkpoint"
            )
        error = error.__cause__ or error.__context__
    return None


def main(argv: list[str] | None = None) -> int:
    import signal

    from campaign.core.errors import PREEMPTED_EXIT, Interrupted, Preempted, forget_signals

    # Everything the campaign writes (results, store, checkpoints) is owner-only.
    os.umask(0o077)
    forget_signals()
    # A scheduler cancels a job with SIGTERM: unwind like Ctrl-C, so the job is recorded as
    # interrupted and no partial output stays behind.
    signal.signal(signal.SIGTERM, _on_sigterm)
    # A scheduler's warning signal before the time limit (the SLURM profile asks for SIGUSR1):
    # outside a training loop, which checkpoints first (campaign.train.loop), it is SIGTERM.
    signal.signal(signal.SIGUSR1, _on_sigterm)
    # Ctrl-C as Python does it, noted too; a job started with SIGINT ignored (`nohup`, `cmd &` in
    # a script) keeps ignoring it.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, _on_sigint)
    args = build_parser().parse_args(argv)
    saved = _redirect_to_log(args.log) if getattr(args, "log", None) else None
    try:
        return args.func(args)
    except CampaignError as e:
        _tell(f"error: {e}", saved)
        return 2
    except KeyboardInterrupt:
        return 130
    except Preempted as e:
        print(f"{e}; exit {PREEMPTED_EXIT}: run it again to resume", file=sys.stderr, flush=True)
        return PREEMPTED_EXIT
    except Interrupted as e:
        return 128 + e.signum
    except Exception as e:
        places = [*getattr(args, "writes", []), *([args.log] if saved is not None else [])]
        if (line := _disk_full(e, places)) is not None:
            _tell(line, saved)
            return 2
        if saved is None:
            raise
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os.write(saved[1], f"error: unexpected failure; see {args.log}\n".encode())
        return 1
    finally:
        if saved is not None:
            _restore(saved)


if __name__ == "__main__":
    exit_without_teardown(main())
