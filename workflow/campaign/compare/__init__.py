"""`campaign compare`: the campaign's decisions on per-item results produced elsewhere
(lm-evaluation-harness output folders, Inspect logs, a plain per-item table).

Importers (lm_eval_logs, inspect_logs, table.read_plain) produce one scored-items table and
decide nothing; decisions.decide runs the evaluate stage's own comparisons, decisions and typed
records on it; outputs writes what the stage writes (summary.txt verdict first, decisions.json)
plus a report and the advice. Not a phase of the DAG: a command over files a user already has.
"""

from __future__ import annotations

from pathlib import Path

from campaign.core.errors import CampaignError

DESCRIPTION = """\
Decide between models on per-item results you already have: paired over the same items, seeds
of one model as runs of one cell (seed and item variance crossed), Holm across questions and
tasks, non-inferiority for variants, a floor -- the evaluate stage's own decisions.

Each SOURCE is [NAME=]PATH: an lm-evaluation-harness output folder written with --log_samples,
an Inspect log (.eval/.json) or a folder of them, or a per-item table (.csv, .parquet, .jsonl
with columns model, task, item, score in [0, 1]; optional seed, split, metric, prediction).
NAME names the model (default: the model the file records); give one NAME to several PATHs to
make them runs (seeds, or fine-tunes of one recipe) of one model. Writes summary.txt (verdict
first), decisions.json, advice.csv, comparisons/metrics/changes .parquet and report.md/.html
into --out; refuses, in one line naming the file, items that do not match across models, a
metric that is not per item, a score outside [0, 1], mixed task versions or few-shot settings.
"""


def _pair(text: str, flag: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name or not value:
        raise CampaignError(f"{flag} {text!r}: expected NAME=VALUE")
    return name, value


def add_parser(sub) -> None:
    """Register `campaign compare` on the CLI's subparsers."""
    import argparse

    p = sub.add_parser(
        "compare",
        help="decisions on per-item results from lm-eval, Inspect or a table",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sources", nargs="+", metavar="SOURCE", help="[NAME=]PATH (see above)")
    p.add_argument(
        "--out", required=True, help="the folder to write (replaced if compare wrote it)"
    )
    p.add_argument("--control", metavar="NAME", help="the model the others are compared with")
    p.add_argument(
        "--floor",
        action="append",
        default=[],
        metavar="NAME",
        help="a reference floor (one run, e.g. the base model): every model must be "
        "shown above it; repeatable, the best floor counts",
    )
    p.add_argument(
        "--variant",
        action="append",
        default=[],
        metavar="NAME=SOURCE",
        help="model NAME is a quantized or merged variant of model SOURCE: compared "
        "run by run by non-inferiority within --margin; repeatable",
    )
    p.add_argument(
        "--margin",
        type=float,
        default=0.01,
        help="the loss a variant may have, as a share (0.01 = 1 point; default 0.01)",
    )
    p.add_argument(
        "--useful",
        type=float,
        default=0.0,
        help="the smallest gain over the control worth adopting, as a share (default 0)",
    )
    p.add_argument(
        "--metric",
        help="the per-item metric: lm-eval NAME or NAME,FILTER; an "
        "Inspect scorer's name (default: the only one)",
    )
    p.add_argument("--split", help="only the items of this split (a table with several)")
    p.add_argument(
        "--pool",
        choices=["items"],
        help="also decide on all tasks together, each item one weight (without it, "
        "each task is decided alone, Holm across the tasks)",
    )
    p.add_argument("--confidence", type=float, default=0.95, help="default 0.95")
    p.add_argument(
        "--power",
        type=float,
        default=0.8,
        help="the power the advice sizes seeds and items for (default 0.8)",
    )
    p.add_argument(
        "--resamples",
        type=int,
        default=1000,
        help="item resamples for each run's bootstrap interval (default 1000)",
    )
    p.add_argument("--seed", type=int, default=0, help="the resampling seed (default 0)")
    p.set_defaults(func=cmd_compare)


def _sources(texts: list[str]) -> list[tuple[str | None, Path]]:
    out = []
    for text in texts:
        name, sep, path = text.partition("=")
        if not sep or Path(text).exists():
            name, path = None, text
        p = Path(path)
        if not p.exists():
            raise CampaignError(f"{p}: no such file or folder")
        out.append((name or None, p))
    return out


def read_sources(sources: list[tuple[str | None, Path]], metric: str | None):
    """The scored-items table of every source, each read by its tool's reader; the sources'
    identities (lm-eval's task versions and model arguments); and what reading assumed, in
    words (Inspect's epochs averaged)."""
    import pandas as pd

    from campaign.compare import inspect_logs, lm_eval_logs
    from campaign.compare.table import read_plain

    lm, insp, plain = [], [], []
    for name, path in sources:
        if lm_eval_logs.is_lm_eval(path):
            lm.append((name, path))
        elif inspect_logs.is_inspect(path):
            insp.append((name, path))
        elif path.is_file():
            plain.append((name, path))
        else:
            raise CampaignError(
                f"{path}: neither an lm-eval output folder (results_*.json), an Inspect log nor "
                "a table"
            )
    frames, identities, notes = [], [], []
    if lm:
        table, identities = lm_eval_logs.read(lm, metric)
        frames.append(table)
    if insp:
        table, notes = inspect_logs.read(insp, metric)
        frames.append(table)
    frames += [read_plain(path, name) for name, path in plain]
    return pd.concat(frames, ignore_index=True), identities, notes


def compare(sources, out: Path, design, split: str | None = None, metric: str | None = None):
    """Read, check, decide and write: the library entry `campaign compare` calls."""
    from campaign.compare.decisions import POOLED, decide
    from campaign.compare.outputs import write_all
    from campaign.compare.table import CELL, SOURCE, SPLIT, VARIANT, check_table

    table, identities, notes = read_sources(sources, metric)
    if split is not None:
        if split not in set(table[SPLIT]):
            raise CampaignError(f"--split {split}: the inputs hold {', '.join(set(table[SPLIT]))}")
        table = table[table[SPLIT] == split]
    check_table(table)
    scopes, assumed = decide(table, design)
    assumed = [*notes, *assumed]
    names = [s.name for s in scopes]
    primary = POOLED if POOLED in names else (names[0] if len(names) == 1 else None)
    files = table.groupby(VARIANT)[SOURCE].agg(lambda x: sorted(set(x)))
    cells = table.groupby(VARIANT)[CELL].first()
    meta = {
        "runs": [
            {"name": run, "model": cells[run], "source": ", ".join(files[run])}
            for run in sorted(files.index)
        ],  # fmt: skip
        "primary": primary,
        "control": design.control,
        "floors": list(design.floors),
        "variants": dict(design.variants),
        "pool": design.pool,
        "assumed": assumed,
        "identities": [{"run": run, **ident} for run, ident in identities],
    }
    write_all(out, scopes, primary, assumed, meta)
    return scopes


def cmd_compare(args) -> int:
    from campaign.compare.decisions import Design

    for flag, value in (("--margin", args.margin), ("--useful", args.useful)):
        if not 0 <= value < 1:
            raise CampaignError(f"{flag} {value}: expected a share in [0, 1) (0.01 = 1 point)")
    if not 0.5 < args.confidence < 1:
        raise CampaignError(f"--confidence {args.confidence}: expected a level in (0.5, 1)")
    design = Design(
        control=args.control,
        floors=tuple(args.floor),
        variants=dict(_pair(v, "--variant") for v in args.variant),
        margin=args.margin,
        useful=args.useful,
        confidence=args.confidence,
        power=args.power,
        resamples=args.resamples,
        seed=args.seed,
        pool=args.pool,
    )
    scopes = compare(_sources(args.sources), Path(args.out), design, args.split, args.metric)
    first = (Path(args.out) / "summary.txt").read_text().splitlines()
    print("\n".join(first[:2]))
    print(f"wrote {args.out}/ ({len(scopes)} scope(s): summary.txt, decisions.json, report.md)")
    return 0
