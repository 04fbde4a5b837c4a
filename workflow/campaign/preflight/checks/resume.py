"""resume: save -> resume -> continue equals the uninterrupted run bitwise; the saved model
reloads and predicts (and, a task with resume_generations, generates) exactly as in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign.core.fsutil import remove_tree
from campaign.core.tasks import module_of
from campaign.preflight.bench import Bench, Result, tree_bytes
from campaign.train import Trainer

ORDER = 60  # place in the report


def _weights(trainer: Trainer) -> dict[str, torch.Tensor]:
    # A quantized base's weights (train.base_quantization) compare by their dequantized values.
    return {
        k: (v.dequantize() if hasattr(v, "__tensor_flatten__") else v).detach().clone().cpu()
        for k, v in trainer.model.state_dict().items()
    }


def _load_saved(folder: Path, task: str, device, base: Path | None):
    from transformers import AutoTokenizer

    from campaign.train import load_run_model

    # As every reader of a run's model folder loads it (an adapter merged into its base).
    model = load_run_model(folder, task, base).to(device).eval()
    return model, AutoTokenizer.from_pretrained(str(folder))


def _scores(frame) -> np.ndarray:
    """The predictions' scores: a probability per label (score_<label>), or for a generation
    task each item's summed answer-token loss (nll; its generated text is compared as the
    prediction, and the evaluation scores it)."""
    return frame[[c for c in frame.columns if c == "nll" or c.startswith("score_")]].to_numpy()


def run(bench: Bench) -> Result:
    cfg = bench.cfg["resume"]
    before, after = cfg["steps_before"], cfg["steps_after"]
    folder = bench.scratch("resume")
    details: dict[str, Any] = {"steps_before": before, "steps_after": after}
    a, failed = _resume(bench, folder / "checkpoints", before, after, details)
    if failed is not None:
        return Result(False, failed, details)
    n, generates = _reload(bench, a, folder, details)
    remove_tree(folder)
    problems = []
    if not details["tokenizer_reloads_identically"]:
        problems.append("the reloaded tokenizer encodes differently")
    if not details["predictions_identical"]:
        problems.append(
            "the reloaded model's predictions differ (max |score diff| "
            f"{details['max_score_difference']:.3g})"
        )
    if details["generation_identical"] is False:
        problems.append("the reloaded model generates other tokens")
    what = "predictions" + (" and generations" if generates else "")
    return Result.of(
        problems,
        details,
        lambda: (
            f"resumed at step {before}: weights bitwise equal after {after} more steps; the "
            f"saved model reloads with identical {what} on {n} examples"
        ),
    )


def _resume(bench: Bench, ckpt_dir: Path, before: int, after: int, details: dict):
    """(the uninterrupted Trainer, None), or (it, why the resumed run is not the same run):
    train `before` steps, checkpoint, `after` more; a fresh Trainer resumes from the checkpoint
    and trains the same `after` steps, which must give the same weights bit for bit."""
    a = bench.trainer(work_dir=ckpt_dir)
    for _ in range(before):
        a.train_step()
    expected_keys = sorted(a.state_dict())
    path = bench.hooks.save_checkpoint(ckpt_dir, a.state_dict(), bench.recipe.keep_checkpoints)
    for _ in range(after):
        a.train_step()
    uninterrupted = _weights(a)

    saved = torch.load(path, map_location="cpu", weights_only=True)
    missing = [k for k in expected_keys if k not in saved]
    details.update({"checkpoint_keys": sorted(saved), "missing": missing})
    if missing:
        return a, (
            f"the checkpoint at step {before} lacks {', '.join(missing)}: a resumed run could "
            f"not continue where it stopped"
        )
    b = bench.trainer(work_dir=ckpt_dir)
    resumed_at = b.resume()
    details["resumed_from"] = resumed_at
    if resumed_at != before:
        return a, f"no usable checkpoint of step {before} was found"
    for _ in range(after):
        b.train_step()
    resumed = _weights(b)
    differing = [k for k in uninterrupted if not torch.equal(uninterrupted[k], resumed[k])]
    max_diff = max(
        (float((uninterrupted[k].double() - resumed[k].double()).abs().max()) for k in differing),
        default=0.0,
    )
    details.update({"differing_tensors": len(differing), "max_abs_difference": max_diff})
    if differing:
        return a, (
            f"resumed at step {before}, {len(differing)} of {len(uninterrupted)} weight tensors "
            f"differ from the uninterrupted run after {after} more steps (max |diff| "
            f"{max_diff:.3g}): the checkpoint does not hold the whole training state"
        )
    return a, None


def _reload(bench: Bench, a: Trainer, folder: Path, details: dict) -> tuple[int, bool]:
    """(examples predicted, whether generations were compared): the saved model folder,
    reloaded, against the model in memory: its tokenizer, its predictions and (a task with
    resume_generations) its greedy continuations."""
    task = module_of(bench.task)
    model_dir = folder / "model"
    a.save_model(model_dir)
    split = "validation" if len(bench.sample.validation) else "train"
    texts = getattr(bench.sample, split).texts
    in_memory_model = a.model
    expected = a.predictions(split)
    generated = task.resume_generations(a, in_memory_model, texts[:2])
    reloaded, reloaded_tok = _load_saved(model_dir, bench.task, a.device, a.base_source)
    same_tokens = reloaded_tok(list(texts))["input_ids"] == a.tokenizer(list(texts))["input_ids"]
    a.model = reloaded
    got = a.predictions(split)
    # max(initial=0): a task whose predictions hold no score columns (its prediction is its
    # score, compared below) has nothing more to differ.
    diffs = np.abs(_scores(got) - _scores(expected))
    score_diff = float(diffs.max(initial=0.0)) if len(got) else 0.0
    same_predictions = bool(
        (got["prediction"] == expected["prediction"]).all()
        and np.array_equal(_scores(got), _scores(expected))
    )
    same_generation = None
    if generated is not None:
        same_generation = task.resume_generations(a, reloaded, texts[:2]) == generated
    details.update(
        {
            "model_folder_bytes": tree_bytes(model_dir),
            "prediction_split": split,
            "predicted_examples": len(got),
            "tokenizer_reloads_identically": same_tokens,
            "predictions_identical": same_predictions,
            "max_score_difference": score_diff,
            "generation_identical": same_generation,
        }
    )
    return len(got), generated is not None
