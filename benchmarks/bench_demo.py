"""Measures where the demo campaign's training jobs and preflight spend their time, and the
cuts that bring the demo toward 5 minutes on 2 cores, each against its baseline in the same
process:

  scoring   campaign.train.scoring.classifier_scores (batches of similar length, rows put back
            in item order) against the same model scoring in file order (the former code: each
            batch of 16 pads to its longest quotation, nearly always max_length). Same
            predictions (argmax), same probabilities to 1e-5. Goal: sorted / file order <= 0.6.
  steps     train.group_by_length true (each window of 50 micro-batches sorted by length,
            longest first) against false: the demo recipe's first 50 steps (one whole window,
            in segments of 10 alternating between the two; a part of a window would hold
            longer or shorter examples than the plain order). Goal: grouped / plain <= 0.75.
  final     a job's end, from its last step to its prediction tables (the stage's
            run(final_evaluation=False), save_model, final_scores) against the former end
            (the last step's validation scored in the loop on the unmerged LoRA model, then
            validation and test again on the saved one). Same predictions. Goal: <= 0.7.
  levers    the preflight's lever costs (campaign.memory.costs.lever_costs, fresh trainers on
            the preflight's 256 + 64 sample) timing one step per configuration against two
            (the former TIMED_STEPS; the two counted steps are the same). Goal: <= 0.85.
  preflight the whole preflight (campaign.preflight.report.run_preflight on the demo's recipe,
            its 256 + 64 sample) with workers 2 (two checks at a time: this process and a
            spawned one; throughput alone after them) against workers 1 (the former path: one
            after another). Wall seconds (the cut uses the idle core: CPU does not shrink; its
            CPU, this process's and its children's, is in the note). Same report bytes.
            Goal: <= 0.65 (wall; two free cores needed: on a loaded machine it shows the load).
  exit      a stage job's end: a child process that imports what a training job imports (torch,
            the transformers model class, peft, campaign.train) ends by
            campaign.cli.exit_without_teardown (what `python -m campaign` does) against
            sys.exit (the former end: the interpreter's teardown). CPU seconds from the child's
            last statement to its end (its total CPU, RUSAGE_CHILDREN, less what it reported
            just before ending). Goal: <= 0.2.
  scan      the artifact scan (campaign.data.artifacts.scan_artifacts) over what the demo's
            artifact_scan stage reads most of: four runs' tokenizer files (vocab.txt and
            tokenizer.json of the pretrained model, as each run's model folder copies them)
            and four prediction tables, one scan sharing a line's findings (the cut) against
            the former scan (scan_text on every line of every file), after one untimed call
            (the detectors' imports). Same report, same count of findings. Goal: <= 0.4.

All on the demo's data (data/raw/fortunes.jsonl: 3,221 quotations, median 25 tokens, 11 %
longer than max_length 64) and model (all-MiniLM-L6-v2 with params.yaml's LoRA), one torch
thread, as a training job runs (2 jobs at a time on 2 cores). Times are process CPU seconds
(steady on a loaded machine, where wall seconds are not); rounds alternate baseline and
candidate (scoring after an untimed warm-up; final and levers build fresh trainers each round),
and the ratio is the median over rounds.

    .venv/bin/python benchmarks/bench_demo.py            # ~3 min of CPU
    .venv/bin/python benchmarks/bench_demo.py --rounds 5 --eval-items 400
    .venv/bin/python benchmarks/bench_demo.py --only final --only levers --rounds 2
    .venv/bin/python benchmarks/bench_demo.py --only preflight --rounds 1   # ~2 min of CPU
    .venv/bin/python benchmarks/bench_demo.py --only exit --only scan        # ~1 min
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "workflow"))

GOALS = {
    "scoring": 0.6,
    "steps": 0.75,
    "final": 0.7,
    "levers": 0.85,
    "preflight": 0.65,
    "exit": 0.2,
    "scan": 0.4,
}


def load(n_train: int, n_eval: int, n_test: int = 0):
    from campaign.train import Data, Split

    rows = [json.loads(x) for x in (ROOT / "data/raw/fortunes.jsonl").read_text().splitlines()]
    # Every 4th quotation to the evaluation set: a spread over the five files, as a split has.
    ev = [r for i, r in enumerate(rows) if i % 4 == 0][:n_eval]
    rest = [r for i, r in enumerate(rows) if i % 4 != 0]
    tr, te = rest[:n_train], rest[n_train : n_train + n_test]

    def split(rs):
        return Split([r["id"] for r in rs], [r["text"] for r in rs], [r["label"] for r in rs])

    return Data(train=split(tr), validation=split(ev), test=split(te))


def trainer(params: dict, data, work: Path, **train):
    from campaign.train import Trainer

    spec = {
        "model": params["model"],
        "train": {**params["train"], **train},
        "seed": params["ablation"]["seeds"][0],
    }
    return Trainer(spec, data, work, root=ROOT, stream=open("/dev/null", "w"))


def file_order_scores(model, examples, batch_size, pad_id, device):
    """The former classifier_scores: batches in file order."""
    import numpy as np
    import torch

    from campaign.train import collate
    from campaign.train.steps import logits_of

    probs = []
    with torch.no_grad():
        for j in range(0, len(examples), batch_size):
            batch = {
                k: v.to(device) for k, v in collate(examples[j : j + batch_size], pad_id).items()
            }
            probs.append(torch.softmax(logits_of(model, batch).float(), -1).double().numpy())
    return np.concatenate(probs)


def cpu(fn) -> tuple[float, object]:
    t = time.process_time()
    out = fn()
    return time.process_time() - t, out


def bench_scoring(params, data, rounds: int) -> dict:
    import numpy as np
    import torch

    from campaign.train.scoring import classifier_scores

    with tempfile.TemporaryDirectory() as work:
        tr = trainer(params, data, Path(work))
        tr.model.eval()
        ex = tr.examples["validation"]
        b, pad, dev = tr.recipe.micro_batch, tr.pad_id, tr.device
        with torch.no_grad():

            def sorted_():
                return classifier_scores(tr.model, ex, b, pad, dev)[0]

            def plain():
                return file_order_scores(tr.model, ex, b, pad, dev)

            sorted_(), plain()  # warm-up
            base, cand = [], []
            for _ in range(rounds):
                t, p_plain = cpu(plain)
                base.append(t)
                t, p_sorted = cpu(sorted_)
                cand.append(t)
    assert (p_plain.argmax(1) == p_sorted.argmax(1)).all(), "sorted scoring changed a prediction"
    assert np.abs(p_plain - p_sorted).max() < 1e-5
    widths = [min(len(e["input_ids"]), tr.recipe.max_length) for e in ex]
    return {
        "what": f"score {len(ex)} items, batch {b}",
        "base": base,
        "cand": cand,
        "note": f"mean tokens {statistics.mean(widths):.1f} of max_length {tr.recipe.max_length}",
    }


def bench_steps(params, data, segments: int, steps: int) -> dict:
    """`segments` segments of `steps` steps per side, alternating; the ratio is of the sums."""
    base, cand = [], []
    with tempfile.TemporaryDirectory() as work:
        runs = {
            flag: trainer(
                params,
                data,
                Path(work) / str(flag),
                group_by_length=flag,
                max_steps=10_000,
                checkpoint_every=10_000,
                eval_every=10_000,
            )
            for flag in (False, True)
        }
        tokens = {False: 0, True: 0}
        for _ in range(segments):
            for flag, out in ((False, base), (True, cand)):
                tr = runs[flag]
                t = time.process_time()
                for _ in range(steps):
                    tokens[flag] += tr.train_step()["tokens"]
                out.append(time.process_time() - t)
    n = segments * steps
    return {
        "what": f"train step, {params['train']['micro_batch']} x <= "
        f"{params['train']['max_length']} tokens",
        "base": [sum(base) / n],
        "cand": [sum(cand) / n],
        "note": f"{n} steps each; real tokens per step {tokens[False] / n:.0f} vs "
        f"{tokens[True] / n:.0f}",
    }


def bench_final(params, data, rounds: int) -> dict:
    """The end of a two-step job, former (base) and now (cand), alternating: each side trains
    its own fresh run's first step untimed, then its last step (the same on both sides), its
    last checkpoint, the model folder and the two prediction tables are timed."""
    import pandas as pd

    def end(work: Path, former: bool) -> tuple[float, dict]:
        tr = trainer(
            params, data, work, max_steps=2, warmup_steps=1, eval_every=2, checkpoint_every=2
        )
        tr.run(stop_after=1)
        t = time.process_time()
        tr.run(final_evaluation=former)
        tr.save_model(work / "model")
        scores = {} if former else tr.final_scores()
        frames = {s: tr.predictions(s, scores.get(s)) for s in ("validation", "test")}
        return time.process_time() - t, frames

    base, cand = [], []
    with tempfile.TemporaryDirectory() as work:
        for i in range(rounds):
            t, old = end(Path(work) / f"b{i}", True)
            base.append(t)
            t, new = end(Path(work) / f"c{i}", False)
            cand.append(t)
    for split in old:
        pd.testing.assert_frame_equal(old[split], new[split])
    n_val, n_test = len(data.validation), len(data.test)
    return {
        "what": f"job end: {n_val} validation + {n_test} test",
        "base": base,
        "cand": cand,
        "note": "validation scored twice before, once now; same prediction tables",
    }


def bench_levers(params, rounds: int) -> dict:
    """lever_costs with TIMED_STEPS 2 (base) and 1 (cand), alternating; same levers measured."""
    from campaign.memory import costs

    sample = load(n_train=256, n_eval=64)  # the preflight's sample sizes (params.yaml)
    base, cand, rows = [], [], {}
    with tempfile.TemporaryDirectory() as work:

        def make(**overrides):
            return trainer(params, sample, Path(work), **overrides)

        for _ in range(rounds):
            for steps, out in ((2, base), (1, cand)):
                costs.measure_steps.__defaults__ = (steps, costs.COUNTED_STEPS)
                t = time.process_time()
                rows[steps] = costs.lever_costs(
                    make, params["train"], "cpu", task=params["model"]["task"]
                )
                out.append(time.process_time() - t)
    costs.measure_steps.__defaults__ = (costs.TIMED_STEPS, costs.COUNTED_STEPS)
    measured = [r["lever"] for r in rows[1] if r["peak_bytes"] is not None]
    # The counted steps are the same: the same bytes (only the step times differ).
    assert [(r["peak_bytes"], r["saves_bytes"]) for r in rows[1]] == [
        (r["peak_bytes"], r["saves_bytes"]) for r in rows[2]
    ], "a lever's bytes changed"
    return {
        "what": f"lever costs, {len(measured)} levers measured",
        "base": base,
        "cand": cand,
        "note": "one untimed step, 2 counted, then 2 (base) or 1 (cand) timed; same bytes",
    }


def write_splits(data, folder: Path) -> dict[str, list[Path]]:
    """The Data as the split stage writes it (Parquet: id, text, label, group), for the stages
    that read split files."""
    import pandas as pd

    paths = {}
    for name in ("train", "validation", "test"):
        split = getattr(data, name)
        path = folder / f"{name}.parquet"
        frame = {"id": split.ids, "text": split.texts, "label": split.labels}
        pd.DataFrame({**frame, "group": split.ids}).to_parquet(path)
        paths[name] = [path]
    return paths


def bench_preflight(params, data, rounds: int) -> dict:
    """run_preflight with workers 1 (base) and 2 (cand), alternating; wall seconds, CPU in the
    note; the stable report (split_report) must be the same bytes."""
    import resource

    from campaign.preflight import _preflight_spec, execution
    from campaign.preflight.report import run_preflight, split_report

    spec = _preflight_spec(params)
    settings = execution.settings(1)
    base, cand, cpus, reports = [], [], {1: [], 2: []}, {}
    with tempfile.TemporaryDirectory() as work:
        inputs = write_splits(data, Path(work))
        inputs["base_model"] = [ROOT / params["model"]["source"]]

        def children_cpu() -> float:
            r = resource.getrusage(resource.RUSAGE_CHILDREN)
            return r.ru_utime + r.ru_stime

        for i in range(rounds):
            for workers, out in ((1, base), (2, cand)):
                wall, t, c = time.perf_counter(), time.process_time(), children_cpu()
                report = run_preflight(
                    spec["run"], inputs, spec["preflight"], Path(work) / f"w{i}{workers}", ROOT,
                    workers=workers, execution=settings,
                )  # fmt: skip
                out.append(time.perf_counter() - wall)
                cpus[workers].append(time.process_time() - t + children_cpu() - c)
                reports[workers] = json.dumps(split_report(report)[0], sort_keys=True)
                checks = {k: v for k, v in report.items() if k != "passed"}
                print(
                    f"workers {workers}: "
                    + ", ".join(
                        f"{k} {v['seconds']:.1f} s {v['cpu_seconds']:.1f} CPU s ({v['process']})"
                        for k, v in checks.items()
                    ),
                    flush=True,
                )
    assert reports[1] == reports[2], "two checks at a time changed the report"
    return {
        "what": "preflight, 8 checks (wall s)",
        "base": base,
        "cand": cand,
        "note": f"CPU s {statistics.median(cpus[1]):.1f} vs {statistics.median(cpus[2]):.1f} "
        "(this process + the spawned one); same report bytes",
    }


# A training job's imports, then its end either way; the child prints its CPU seconds so far.
EXIT_CHILD = """
import sys, time
sys.path.insert(0, {workflow!r})
import torch, peft, transformers
from transformers import AutoModelForSequenceClassification
import campaign.train
from campaign.cli import exit_without_teardown
print(time.process_time(), flush=True)
exit_without_teardown(0) if {fast} else sys.exit(0)
"""


def bench_exit(rounds: int) -> dict:
    """Children ending by sys.exit (base) and exit_without_teardown (cand), alternating."""
    import resource
    import subprocess

    def children_cpu() -> float:
        r = resource.getrusage(resource.RUSAGE_CHILDREN)
        return r.ru_utime + r.ru_stime

    def end_cpu(fast: bool) -> float:
        code = EXIT_CHILD.format(workflow=str(ROOT / "workflow"), fast=fast)
        before = children_cpu()
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        reported = float(out.stdout.split()[-1])
        return children_cpu() - before - reported

    base, cand = [], []
    for _ in range(rounds):
        base.append(end_cpu(False))
        cand.append(end_cpu(True))
    return {
        "what": "a training job's end (CPU s)",
        "base": base,
        "cand": cand,
        "note": "torch, transformers, peft, campaign.train imported; exit handlers run both ways",
    }


def bench_scan(params, data, rounds: int) -> dict:
    """scan_artifacts over four runs' copies of the pretrained tokenizer files and prediction
    tables: one scan (cand) against one scan_artifact per file, nothing shared (base)."""
    import shutil

    import pandas as pd

    from campaign.data.artifacts import _lines, scan_artifact, scan_artifacts
    from campaign.data.privacy import scan_text

    source = ROOT / params["model"]["source"]
    with tempfile.TemporaryDirectory() as work:
        root = Path(work)
        labels = sorted(set(data.validation.labels))
        for run in range(4):
            folder = root / f"run-{run}"
            folder.mkdir()
            for name in ("vocab.txt", "tokenizer.json"):
                shutil.copy(source / name, folder / name)
            n = len(data.validation.ids)
            predicted = [labels[(i + run) % len(labels)] for i in range(n)]
            frame = pd.DataFrame(
                {
                    "id": data.validation.ids,
                    "label": data.validation.labels,
                    "prediction": predicted,
                }
            )
            frame.to_parquet(folder / "predictions_validation.parquet")
        files = sorted(p for p in root.rglob("*") if p.is_file())

        def every_line() -> list[list]:  # the former scan: scan_text on every line of every file
            return [[list(scan_text(x)) for x in _lines(p)[1]] for p in files]

        scan_text("warm-up: the detectors' imports")
        base, cand = [], []
        for _ in range(rounds):
            t, lines = cpu(every_line)
            base.append(t)
            t, report = cpu(lambda: scan_artifacts([root]))
            cand.append(t)
        rows = [scan_artifact(p, {}) for p in files]
        flagged = [r for r in rows if r["findings"]]
        assert report["artifacts"] == flagged, "sharing findings changed the report"
        assert sum(map(len, (f for file in lines for f in file))) == sum(
            sum(r["findings"].values()) for r in rows
        ), "sharing findings changed the count"
        assert report["scanned"] == len(files)
    return {
        "what": f"scan {len(files)} artifacts, 4 runs",
        "base": base,
        "cand": cand,
        "note": f"{len(flagged)} flagged either way",
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--eval-items", type=int, default=805)  # the demo's validation split
    parser.add_argument("--segments", type=int, default=5, help="train segments per side")
    parser.add_argument("--steps", type=int, default=10, help="train steps per segment")
    parser.add_argument("--test-items", type=int, default=483)  # the demo's test split
    parser.add_argument("--only", choices=sorted(GOALS), action="append", help="run only these")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a goal is MISSED")
    args = parser.parse_args(argv)

    import yaml

    from campaign.train import execution

    execution.pin(execution.settings(1))  # as the runner pins a training job
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    data = load(n_train=2000, n_eval=args.eval_items, n_test=args.test_items)
    benches = {
        "scoring": lambda: bench_scoring(params, data, args.rounds),
        "steps": lambda: bench_steps(params, data, args.segments, args.steps),
        "final": lambda: bench_final(params, data, args.rounds),
        "levers": lambda: bench_levers(params, args.rounds),
        "preflight": lambda: bench_preflight(params, data, args.rounds),
        "exit": lambda: bench_exit(args.rounds),
        "scan": lambda: bench_scan(params, data, args.rounds),
    }
    results = {name: run() for name, run in benches.items() if name in (args.only or benches)}
    print(f"{'cut':<8}  {'what':<36}  {'baseline s':>10}  {'cut s':>8}  {'ratio':>6}  goal")
    oks = []
    for name, r in results.items():
        ratio = statistics.median(c / b for b, c in zip(r["base"], r["cand"], strict=True))
        ok = ratio <= GOALS[name]
        oks.append(ok)
        print(
            f"{name:<8}  {r['what']:<36}  {statistics.median(r['base']):>10.3f}  "
            f"{statistics.median(r['cand']):>8.3f}  {ratio:>6.2f}  <= {GOALS[name]} "
            f"{'met' if ok else 'MISSED'}  ({r['note']})"
        )
    print(
        "(process CPU seconds: scoring, final, levers, exit and scan, the median over rounds; "
        "steps, per step over the run; preflight: wall seconds)"
    )
    return 1 if args.strict and not all(oks) else 0


if __name__ == "__main__":
    sys.exit(main())
