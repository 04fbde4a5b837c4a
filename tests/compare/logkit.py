"""Real lm-evaluation-harness and Inspect logs for the compare tests and benchmarks: tiny
from-config Llama models (tests/genkit.py) saved with their tokenizer, local tasks (a
multiple-choice task scored by acc, a generate_until task by exact_match, a
loglikelihood_rolling task by perplexity) over local JSON Lines, run by lm-eval's own
`simple_evaluate` with samples logged and saved by its EvaluationTracker (what `lm_eval
--log_samples --output_path` writes), and an Inspect task run by `inspect_ai.eval` on the `hf/`
provider over the same model folders."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

MC_ITEMS, GEN_ITEMS = 60, 30
COLORS = ["red", "blue", "green", "one"]


def write_tasks(folder: Path) -> Path:
    """The local task YAMLs and their JSON Lines (answers drawn with a fixed seed)."""
    from genkit import WORDS

    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    with (folder / "mc.jsonl").open("w") as f:
        for _ in range(MC_ITEMS):
            q = " ".join(rng.choice(WORDS) for _ in range(4))
            f.write(
                json.dumps({"question": q, "choices": COLORS, "answer": rng.randrange(4)}) + "\n"
            )
    with (folder / "gen.jsonl").open("w") as f:
        for _ in range(GEN_ITEMS):
            q = " ".join(rng.choice(WORDS) for _ in range(3))
            f.write(json.dumps({"question": q, "answer": rng.choice(WORDS[:8])}) + "\n")
    data = "dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {}\ntest_split: test\n"
    metric = "metric_list:\n  - metric: {}\n    aggregation: mean\n    higher_is_better: true\n"
    (folder / "mc.yaml").write_text(
        "task: tiny_mc\n" + data.format(folder / "mc.jsonl") + "output_type: multiple_choice\n"
        'doc_to_text: "{{question}} answer"\ndoc_to_choice: "{{choices}}"\n'
        "doc_to_target: answer\n" + metric.format("acc") + "metadata:\n  version: 1.0\n"
    )
    (folder / "gen.yaml").write_text(
        "task: tiny_gen\n" + data.format(folder / "gen.jsonl") + "output_type: generate_until\n"
        'doc_to_text: "{{question}}"\ndoc_to_target: answer\n'
        'generation_kwargs:\n  until: ["</s>"]\n  max_gen_toks: 1\n  do_sample: false\n'
        + metric.format("exact_match")
        + "metadata:\n  version: 1.0\n"
    )
    (folder / "ppl.yaml").write_text(
        "task: tiny_ppl\n" + data.format(folder / "gen.jsonl") + "output_type: "
        'loglikelihood_rolling\ndoc_to_text: "{{question}}"\ndoc_to_target: "{{question}}"\n'
        "metric_list:\n  - metric: word_perplexity\n  - metric: byte_perplexity\n"
        "metadata:\n  version: 1.0\n"
    )
    return folder


def save_model(folder: Path, seed: int, sharpen: float = 8.0) -> Path:
    """A tiny Llama (genkit.tiny_llama at `seed`) and its tokenizer, saved as a model folder."""
    from genkit import tiny_llama, tiny_tokenizer

    model = tiny_llama(seed)
    if sharpen != 8.0:
        import torch

        with torch.no_grad():
            model.lm_head.weight.mul_(sharpen / 8.0)
    model.save_pretrained(folder)
    tiny_tokenizer().save_pretrained(folder)
    return folder


def run_lm_eval(
    model: Path, tasks_dir: Path, tasks: list[str], out: Path, shots: int | None = None
):
    """lm-eval on `model` with samples logged into `out` (<out>/<model name>/results_*.json,
    samples_<task>_*.jsonl), as `lm_eval --log_samples --output_path out` writes them."""
    import lm_eval
    from lm_eval.loggers import EvaluationTracker
    from lm_eval.tasks import TaskManager

    tracker = EvaluationTracker(output_path=str(out))
    results = lm_eval.simple_evaluate(
        model="hf",
        model_args=f"pretrained={model},dtype=float32",
        tasks=tasks,
        num_fewshot=shots,
        task_manager=TaskManager(include_path=str(tasks_dir)),
        log_samples=True,
        evaluation_tracker=tracker,
        device="cpu",
        batch_size=16,
    )
    tracker.save_results_aggregated(results=results, samples=results["samples"])
    for task in results["configs"]:
        tracker.save_results_samples(task_name=task, samples=results["samples"][task])
    return out


def run_inspect(models: list[Path], tasks_dir: Path, logs: Path) -> list[Path]:
    """One Inspect evaluation per model folder (the hf provider, greedy, one token) of a local
    dataset scored by exact match; the .eval logs it wrote."""
    from inspect_ai import Task, eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import exact
    from inspect_ai.solver import generate

    rows = [json.loads(line) for line in (tasks_dir / "gen.jsonl").read_text().splitlines()]
    samples = [
        Sample(input=r["question"], target=r["answer"], id=f"g{i}") for i, r in enumerate(rows)
    ]
    task = Task(dataset=samples, solver=generate(), scorer=exact(), name="tiny_inspect")
    written = []
    for m in models:
        got = eval(
            task,
            model="hf/local",
            model_args={
                "model_path": str(m),
                "device": "cpu",
                "use_chat_template": False,
                "do_sample": False,
            },  # fmt: skip
            max_tokens=1,
            log_dir=str(logs / m.name),
            display="none",
            log_format="eval",
        )
        written.append(Path(got[0].location))
    return written


def layout(root: Path) -> dict:
    """build's folders under `root`, by name."""
    inspect = {m: next((root / "inspect" / m).glob("*.eval")) for m in ("a0", "b0")}
    return {
        "root": root,
        "lm_eval": {k: root / "lm_eval" / k for k in ("a0", "a1", "b0", "b1")},
        "ppl": {k: root / "ppl" / k for k in ("a0", "b0")},
        "oneshot": root / "oneshot",
        "inspect": inspect,
    }


def build(root: Path) -> dict:
    """Every log the tests read: lm-eval folders of model a (2 runs) and b (2 runs) on the
    multiple-choice and generation tasks; a perplexity task and a 1-shot run beside them; Inspect
    logs of a and b's first runs."""
    tasks = write_tasks(root / "tasks")
    models = {f"{m}{i}": save_model(root / "models" / f"{m}{i}", seed, sharpen)
              for m, sharpen, seeds in (("a", 8.0, (0, 1)), ("b", 3.0, (2, 3)))
              for i, seed in enumerate(seeds)}  # fmt: skip
    lm = {k: run_lm_eval(p, tasks, ["tiny_mc", "tiny_gen"], root / "lm_eval" / k)
          for k, p in models.items()}  # fmt: skip
    ppl = {k: run_lm_eval(models[k], tasks, ["tiny_ppl"], root / "ppl" / k) for k in ("a0", "b0")}
    shot = run_lm_eval(models["b0"], tasks, ["tiny_mc"], root / "oneshot", shots=1)
    inspect = run_inspect([models["a0"], models["b0"]], tasks, root / "inspect")
    return {"tasks": tasks, "models": models, "lm_eval": lm, "ppl": ppl, "oneshot": shot,
            "inspect": inspect}  # fmt: skip
