"""Does the train stage learn as well as a plain transformers + peft loop on the same recipe?

Two loops, the same split files, recipe and seeds, per recipe:
  pipeline  campaign.train.stage.run_training, the train stage's body, on the run spec the plan
            gives the baseline at that seed (campaign.plan.planner.plan_runs): the stage's
            tokenization, data order, length grouping, loss, schedule, LoRA wrapping, the model
            it saves and scores.
  plain     a loop written the way the transformers and peft documentation show it:
            AutoTokenizer, AutoModelForSequenceClassification + peft get_peft_model
            (TaskType.SEQ_CLS), a shuffled DataLoader whose batches are tokenized with
            padding=True, truncation=True, torch AdamW over model.parameters(),
            get_linear_schedule_with_warmup, clip_grad_norm_, model.train() (the base's dropout
            on), transformers.set_seed(seed); validation accuracy and loss in eval mode.
Variants (--loops) for finding a difference: pipeline-nogroup (train.group_by_length false),
pipeline-nodropout (train.base_dropout false), plain-nodropout (the plain loop with the base in
eval mode).

Recipes (--recipes):
  demo      params.yaml as it is: data/raw/fortunes.jsonl (five fortune files), its split, MiniLM
            from models/all-MiniLM-L6-v2, LoRA r 8 on query/value, its train section.
  fortunes8 eight other fortune files of Debian's `fortunes` package (love, literature, food,
            sports, law, education, humorists, wisdom; scripts/corpora/install.sh installs it),
            grouped by author, split by the split stage (assign auto), the recipe of issue 35
            (lr 2e-3, warmup 10, linear decay, 120 steps of 16), everything else as the
            demo's.

Split files come from the split stage itself (campaign.data.split.stage). Every (recipe, loop,
seed) runs in its own process with one torch thread (--jobs at a time); each result is appended
to --results as one JSON line, so an interrupted measurement resumes where it stopped, and the
tables of what is finished are rewritten to --table-file after every run.

Printed per recipe: each seed's final validation accuracy and loss for each loop, the mean of
each loop with its t interval over seeds (--confidence), the paired difference pipeline - plain
(per seed) with its t interval, and the goal: the pipeline's mean accuracy within the plain
loop's interval, or within 2 points of its mean; MISSED where not. Each pipeline variant is
also paired with the pipeline itself: that row is the ablation (pipeline-nodropout - pipeline
is train.base_dropout false - true), with no goal.

    .venv/bin/python benchmarks/bench_learning.py --seeds 1 2 3 4 5 --jobs 2
    .venv/bin/python benchmarks/bench_learning.py --recipes demo \
        --loops pipeline pipeline-nodropout          # the base_dropout ablation alone
    .venv/bin/python benchmarks/bench_learning.py --recipes demo --seeds 1 --steps 4   # smoke
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "workflow"))

LOOPS = ("pipeline", "plain", "pipeline-nogroup", "pipeline-nodropout", "plain-nodropout")
RECIPES = ("demo", "fortunes8")
FORTUNES8 = ("love", "literature", "food", "sports", "law", "education", "humorists", "wisdom")
ABLATIONS = {
    "pipeline-nogroup": "train.group_by_length false - true",
    "pipeline-nodropout": "train.base_dropout false - true",
}
GOAL_POINTS = 0.02  # within 2 points of the plain loop's mean accuracy also meets the goal


# ------------------------------------------------------------------ recipes and split files
def recipe_params(name: str, work: Path) -> dict:
    """The validated params of a recipe; fortunes8 writes its corpus into `work`."""
    from campaign.core.params import load_params, validate

    params = load_params(REPO / "params.yaml")
    if name == "demo":
        params["data"]["sources"][0]["path"] = str(REPO / params["data"]["sources"][0]["path"])
    else:
        sys.path.insert(0, str(REPO / "scripts" / "corpora"))
        import fortunes_demo

        fortunes_demo.FILES = FORTUNES8
        rows = fortunes_demo.records(Path("/usr/share/games/fortunes"))
        path = work / "fortunes8.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        params["data"]["sources"] = [
            {
                "path": str(path),
                "format": "jsonl",
                "licence": "BSD-3-Clause",
                "origin": "fortune-mod fortune files, Debian package fortunes",
            }
        ]
        params["split"].update(salt="learn-8", assign="auto")
        params["split"]["solve"]["max_units"] = 5000  # ~1,400 authors: all placed by the solver
        params["train"].update(lr=2.0e-3, warmup_steps=10, max_steps=120, eval_every=120)
    params["model"]["source"] = str(REPO / params["model"]["source"])
    return validate(params, f"recipe {name}")


def write_splits(params: dict, folder: Path) -> dict[str, Path]:
    """train/validation/test.parquet of the split stage on the params' sources."""
    from campaign.core.registry import get_stage
    from campaign.data.split import derive_inputs, stage

    spec = get_stage("split").spec(params)
    folder.mkdir(parents=True, exist_ok=True)
    outputs = {n: folder / f"{n}.parquet" for n in ("train", "validation", "test")} | {
        n: folder / f"{n}.out" for n in ("audit", "audit_table", "privacy")
    }
    inputs = derive_inputs(spec, Path("/"))
    ctx = SimpleNamespace(spec=spec, inputs=inputs, outputs=outputs, root=Path("/"))
    with open(os.devnull, "w") as sink, _stdout_to(sink):
        stage(ctx)
    return {n: outputs[n] for n in ("train", "validation", "test")}


class _stdout_to:
    def __init__(self, stream):
        self.stream = stream

    def __enter__(self):
        self.saved, sys.stdout = sys.stdout, self.stream

    def __exit__(self, *exc):
        sys.stdout = self.saved


def run_specs(params: dict, seeds: list[int]) -> dict[int, dict]:
    """The baseline's run spec at each seed, as the plan gives it to the train stage."""
    from campaign.plan.planner import plan_runs

    params = copy.deepcopy(params)
    params["ablation"]["seeds"] = list(seeds)
    return {r.seed: r.spec for r in plan_runs(params) if not r.moved}


# ------------------------------------------------------------------ the two loops
def pipeline(spec: dict, splits: dict[str, Path], work: Path) -> dict:
    """The train stage's body on `spec`; final validation accuracy/loss of the saved model."""
    import pandas as pd

    from campaign.train.stage import run_training

    outputs = {
        "model": work / "model",
        "metrics": work / "metrics.parquet",
        "predictions_validation": work / "pv.parquet",
        "predictions_test": work / "pt.parquet",
        "run_manifest": work / "run.json",
    }
    inputs = {name: [path] for name, path in splits.items()}
    inputs["base_model"] = [Path(spec["model"]["source"])]
    with open(os.devnull, "w") as sink:
        run_training(spec, inputs, outputs, work / "work", root=REPO, stream=sink)
    final = json.loads(outputs["run_manifest"].read_text())["final_validation"]
    metrics = pd.read_parquet(outputs["metrics"])
    train = metrics[metrics["split"] == "train"]["loss"].tolist()
    return {"accuracy": final["accuracy"], "loss": final["loss"], "train_loss": train}


def plain(spec: dict, splits: dict[str, Path], dropout: bool) -> dict:
    """The recipe as the transformers/peft docs write a loop, on the same split files."""
    import pandas as pd
    import torch
    import transformers
    from peft import LoraConfig, TaskType, get_peft_model
    from torch.utils.data import DataLoader

    t, source = spec["train"], spec["model"]["source"]
    train = pd.read_parquet(splits["train"])
    validation = pd.read_parquet(splits["validation"])
    labels = sorted(set(train["label"]))
    label2id = {name: i for i, name in enumerate(labels)}
    transformers.set_seed(spec["seed"])
    tokenizer = transformers.AutoTokenizer.from_pretrained(source)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(
        source, num_labels=len(labels), id2label=dict(enumerate(labels)), label2id=label2id
    )
    lora = t["lora"]
    model = get_peft_model(
        model,
        LoraConfig(
            task_type=TaskType.SEQ_CLS,
            r=lora["r"],
            lora_alpha=lora["alpha"],
            lora_dropout=lora["dropout"],
            target_modules=list(lora["target_modules"]),
        ),
    )

    def collate(rows):
        texts, ys = zip(*rows, strict=True)
        batch = tokenizer(
            list(texts),
            padding=True,
            truncation=True,
            max_length=t["max_length"],
            return_tensors="pt",
        )
        batch["labels"] = torch.tensor(ys)
        return batch

    rows = list(zip(train["text"], [label2id[v] for v in train["label"]], strict=True))
    loader = DataLoader(
        rows,
        batch_size=t["micro_batch"],
        shuffle=True,
        collate_fn=collate,
        generator=torch.Generator().manual_seed(spec["seed"]),
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=t["lr"], weight_decay=t["weight_decay"])
    scheduler = transformers.get_linear_schedule_with_warmup(
        optimizer, t["warmup_steps"], t["max_steps"]
    )
    model.train(dropout)
    losses: list[float] = []
    while len(losses) < t["max_steps"]:
        for batch in loader:
            loss = model(**batch).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), t["max_grad_norm"])
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            losses.append(float(loss))
            if len(losses) == t["max_steps"]:
                break
    model.eval()
    # A label train lacks is never right (-100: cross-entropy skips it), as in the pipeline.
    truth = [label2id.get(v, -100) for v in validation["label"]]
    vrows = list(zip(validation["text"], truth, strict=True))
    correct, loss_sum = 0, 0.0
    with torch.no_grad():
        for batch in DataLoader(vrows, batch_size=64, collate_fn=collate):
            logits = model(**batch).logits
            y = batch["labels"]
            loss_sum += float(torch.nn.functional.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(-1) == y).sum())
    n = len(vrows)
    return {"accuracy": correct / n, "loss": loss_sum / n, "train_loss": losses}


def worker(job: dict) -> dict:
    """One (recipe, loop, seed) in this process, with one torch thread."""
    import torch

    torch.set_num_threads(1)
    spec = job["spec"]
    splits = {k: Path(v) for k, v in job["splits"].items()}
    started = time.perf_counter()
    loop = job["loop"]
    if loop.startswith("plain"):
        result = plain(spec, splits, dropout=loop != "plain-nodropout")
    else:
        if loop == "pipeline-nogroup":
            spec["train"]["group_by_length"] = False
        elif loop == "pipeline-nodropout":
            spec["train"]["base_dropout"] = False
        with tempfile.TemporaryDirectory(prefix="bench-learning-") as tmp:
            result = pipeline(spec, splits, Path(tmp))
    result["seconds"] = time.perf_counter() - started
    return result


# ------------------------------------------------------------------ statistics and the table
def t_interval(values: list[float], confidence: float) -> tuple[float, float, float]:
    """(mean, low, high): Student's t interval of the mean over seeds."""
    from scipy import stats

    n = len(values)
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan"), float("nan")
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = stats.t.ppf(0.5 + confidence / 2, n - 1) * sd / math.sqrt(n)
    return mean, mean - half, mean + half


def goal(pipe: list[float], base: list[float], confidence: float) -> tuple[bool, str]:
    """The pipeline's mean accuracy within the plain loop's interval, or within 2 points."""
    mean, low, high = t_interval(base, confidence)
    p = sum(pipe) / len(pipe)
    inside = low <= p <= high if not math.isnan(low) else False
    close = abs(p - mean) <= GOAL_POINTS + 1e-12
    return inside or close, (
        f"pipeline mean {p:.1%}, plain {mean:.1%} [{low:.1%}, {high:.1%}]"
        + (" (inside)" if inside else "")
        + (" (within 2 points)" if close else "")
    )


def table(
    recipe: str, results: dict, loops: list[str], seeds: list[int], conf: float
) -> bool | None:
    """Print one recipe's table; returns whether its goal is met (None: not judged, no plain)."""
    print(
        f"\n## {recipe}: final validation accuracy / loss per seed "
        "(mean train loss of the last 10 steps)"
    )
    done = {lp: [s for s in seeds if (recipe, lp, s) in results] for lp in loops}
    print("| seed | " + " | ".join(loops) + " |")
    print("|---" * (len(loops) + 1) + "|")
    for s in seeds:
        cells = []
        for lp in loops:
            r = results.get((recipe, lp, s))
            cells.append(
                "—"
                if r is None
                else f"{r['accuracy']:.1%} / {r['loss']:.3f} ({_tail(r['train_loss']):.2f})"
            )
        print(f"| {s} | " + " | ".join(cells) + " |")
    for lp in loops:
        acc = [results[(recipe, lp, s)]["accuracy"] for s in done[lp]]
        if acc:
            m, lo, hi = t_interval(acc, conf)
            print(f"{lp}: mean {m:.1%} [{lo:.1%}, {hi:.1%}] over {len(acc)} seeds")
    for lp in loops:  # ablation rows: a pipeline variant against the pipeline, per seed
        if lp.startswith("pipeline-"):
            _paired(recipe, results, seeds, lp, "pipeline", conf, f" ({ABLATIONS[lp]})")
    if "plain" not in loops or "pipeline" not in loops:
        print(f"goal ({recipe}): not judged (it needs both the pipeline and the plain loop)")
        return None
    for lp in loops:
        if lp != "plain":
            _paired(recipe, results, seeds, lp, "plain", conf)
    paired = [s for s in seeds if {(recipe, "pipeline", s), (recipe, "plain", s)} <= results.keys()]
    if not paired:
        print(f"goal ({recipe}): MISSED: no seed has both the pipeline and the plain loop")
        return False
    a = [results[(recipe, "pipeline", s)]["accuracy"] for s in paired]
    b = [results[(recipe, "plain", s)]["accuracy"] for s in paired]
    ok, how = goal(a, b, conf)
    if len(paired) < len(seeds):  # a goal on fewer seeds than asked is not judged
        ok, how = False, f"only {len(paired)} of {len(seeds)} seeds paired; {how}"
    print(f"goal ({recipe}): {'met' if ok else 'MISSED'}: {how}")
    return ok


def _paired(recipe, results, seeds, lp: str, base: str, conf: float, note: str = "") -> None:
    """Print lp - base, paired by seed, with its t interval (the seeds both have)."""
    paired = [s for s in seeds if {(recipe, lp, s), (recipe, base, s)} <= results.keys()]
    if paired:
        a = [results[(recipe, lp, s)]["accuracy"] for s in paired]
        b = [results[(recipe, base, s)]["accuracy"] for s in paired]
        m, lo, hi = t_interval([x - y for x, y in zip(a, b, strict=True)], conf)
        print(
            f"{lp} - {base}{note}, paired by seed ({len(paired)}): {m:+.1%} [{lo:+.1%}, {hi:+.1%}]"
        )


def _tail(losses: list[float], n: int = 10) -> float:
    """Mean of the last n training losses: one step's loss is one batch's noise."""
    return sum(losses[-n:]) / len(losses[-n:])


# ------------------------------------------------------------------ driver
def load_results(path: Path) -> dict:
    out = {}
    if path.exists():
        for line in path.read_text().splitlines():
            if line.strip():
                r = json.loads(line)
                out[(r["recipe"], r["loop"], r["seed"], r["steps"])] = r
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--recipes", nargs="+", choices=RECIPES, default=list(RECIPES))
    parser.add_argument("--loops", nargs="+", choices=LOOPS, default=["pipeline", "plain"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3, 4, 5])
    parser.add_argument("--steps", type=int, default=None, help="override max_steps (smoke)")
    parser.add_argument("--jobs", type=int, default=2, help="processes at a time")
    parser.add_argument("--confidence", type=float, default=0.95)
    parser.add_argument(
        "--results", type=Path, default=Path("results/bench_learning.jsonl"), help="JSON lines"
    )
    parser.add_argument(
        "--table-file",
        type=Path,
        default=Path("results/bench_learning.md"),
        help="the tables so far, rewritten after every finished run",
    )
    parser.add_argument(
        "--table-only", action="store_true", help="print the table of --results, run nothing"
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(Path(args.worker).read_text()))))
        return
    args.results.parent.mkdir(parents=True, exist_ok=True)
    cached = load_results(args.results)
    tmp = Path(tempfile.mkdtemp(prefix="bench-learning-"))
    jobs, recipe_steps = [], {}
    for recipe in args.recipes:
        params = recipe_params(recipe, tmp)
        if args.steps is not None:
            params["train"].update(
                max_steps=args.steps,
                eval_every=args.steps,
                checkpoint_every=args.steps,
                warmup_steps=min(params["train"]["warmup_steps"], args.steps),
            )
        steps = recipe_steps[recipe] = params["train"]["max_steps"]
        if args.table_only:
            continue
        splits = write_splits(params, tmp / recipe)
        specs = run_specs(params, args.seeds)
        # Seed by seed, every loop of a seed together: a measurement cut short still pairs.
        for seed in args.seeds:
            for loop in args.loops:
                if (recipe, loop, seed, steps) not in cached:
                    job = {"recipe": recipe, "loop": loop, "seed": seed, "steps": steps}
                    job.update(spec=specs[seed], splits={k: str(v) for k, v in splits.items()})
                    jobs.append(job)
    print(f"{len(jobs)} runs to do, {args.jobs} at a time (results: {args.results})", flush=True)

    lock = threading.Lock()  # one writer of --results and --table-file at a time

    def run(job: dict) -> None:
        path = tmp / f"job-{job['recipe']}-{job['loop']}-{job['seed']}.json"
        path.write_text(json.dumps(job))
        env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        done = subprocess.run(
            [sys.executable, __file__, "--worker", str(path)],
            capture_output=True,
            text=True,
            env=env,
        )
        if done.returncode != 0:
            where = f"{job['recipe']} {job['loop']} seed {job['seed']}"
            print(f"{where}: failed\n{done.stderr[-2000:]}", flush=True)
            return
        result = json.loads(done.stdout.strip().splitlines()[-1])
        record = {k: job[k] for k in ("recipe", "loop", "seed", "steps")} | result
        with lock:
            with args.results.open("a") as f:
                f.write(json.dumps(record) + "\n")
            report(args, recipe_steps, partial=True)
        print(
            f"{job['recipe']} {job['loop']} seed {job['seed']}: accuracy "
            f"{result['accuracy']:.1%}, loss {result['loss']:.3f}, {result['seconds']:.0f} s",
            flush=True,
        )

    try:
        with ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(run, jobs))
    finally:  # the split files and job specs; the results are in --results
        shutil.rmtree(tmp, ignore_errors=True)
    report(args, recipe_steps)


def report(args, recipe_steps: dict[str, int], partial: bool = False) -> None:
    """The tables of --results, printed; with `partial`, written to --table-file instead (after
    every finished run: a measurement cut short leaves its tables of the seeds it finished)."""
    out = io.StringIO() if partial else sys.stdout
    with contextlib.redirect_stdout(out):
        results = load_results(args.results)
        verdicts: list[bool | None] = []
        print(f"\nconfidence {args.confidence:g}; goal: pipeline mean within the plain loop's")
        print("interval or within 2 points of its mean (measured on a shared, loaded machine)")
        for recipe in args.recipes:
            steps = recipe_steps[recipe]
            view = {(r, lp, s): v for (r, lp, s, st), v in results.items() if st == steps}
            verdicts.append(table(recipe, view, args.loops, args.seeds, args.confidence))
        judged = [v for v in verdicts if v is not None]
        overall = "not judged" if not judged else "met" if all(judged) else "MISSED"
        print(f"\noverall: {overall}" + (" (partial: runs still to do)" if partial else ""))
    if partial:
        part = args.table_file.with_name(args.table_file.name + ".part")
        part.write_text(out.getvalue(), encoding="utf-8")
        part.replace(args.table_file)


if __name__ == "__main__":
    main()
