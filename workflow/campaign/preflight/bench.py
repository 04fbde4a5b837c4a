"""What every preflight check shares: the sample, a scratch folder, fresh Trainers, the seams
through which tests break one piece on purpose, and small measuring and formatting helpers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign.core.defaults import train_key
from campaign.core.diskspace import free_disk_bytes
from campaign.core.fsutil import remove_tree
from campaign.memory import format_bytes
from campaign.train import (
    IGNORE,
    Data,
    Recipe,
    Split,
    Trainer,
    accumulated_gradients,
    collate,
    label_names,
    save_checkpoint,
    select_device,
)

_SAMPLE_STREAM = 0x9F1  # the sample's draw: a stream apart from the run's other seeded draws


def _environment_report() -> dict:
    from campaign.preflight import envreport

    return envreport.environment_report()


@dataclass(frozen=True)
class Hooks:
    """Seams through which a test breaks one piece on purpose; the defaults are the real ones.

    accumulated_gradients  the accumulation under test (accumulated_gradients)
    save_checkpoint        the checkpoint writer under test (save_checkpoint)
    transform_examples     applied to each Trainer's encoded train examples (a broken formatter)
    free_bytes             free disk bytes at a path
    environment_report     versions and device facts (envreport.environment_report)
    device                 the torch.device to run on (None: select_device())
    """

    accumulated_gradients: Callable[..., dict] = accumulated_gradients
    save_checkpoint: Callable[[Path, dict, int], Path] = save_checkpoint
    transform_examples: Callable[[list[dict]], list[dict]] | None = None
    free_bytes: Callable[[Path], int] = free_disk_bytes
    environment_report: Callable[[], dict] = _environment_report
    device: Any = None


def sample_split(split: Split, n: int, rng: np.random.Generator) -> Split:
    """`n` records drawn without replacement (all when fewer), kept in file order."""
    if len(split) <= n:
        return split
    keep = np.sort(rng.choice(len(split), size=n, replace=False))
    return Split(
        ids=[split.ids[i] for i in keep],
        texts=[split.texts[i] for i in keep],
        labels=[split.labels[i] for i in keep],
        messages=None if split.messages is None else [split.messages[i] for i in keep],
        sources=None if split.sources is None else [split.sources[i] for i in keep],
    )


def sample_data(data: Data, train_n: int, validation_n: int, seed: int) -> Data:
    """The preflight sample: train and validation drawn with a Generator seeded by `seed`.

    The test split is left out (empty): no check needs it, and it stays unseen.
    """
    rng = np.random.default_rng([seed, _SAMPLE_STREAM])
    return Data(
        train=sample_split(data.train, train_n, rng),
        validation=sample_split(data.validation, validation_n, rng),
        test=Split([], [], []),
    )


@dataclass
class Result:
    passed: bool
    summary: str
    details: dict = field(default_factory=dict)

    @classmethod
    def of(cls, problems: list[str], details: dict, summary: Callable[[], str]) -> Result:
        """A check's result from its problems: failed with every problem in one line ("; "
        between them), else passed with summary() (computed only then)."""
        if problems:
            return cls(False, "; ".join(problems), details)
        return cls(True, summary(), details)


class Bench:
    """What every check shares: the spec, the sample, a scratch folder, fresh Trainers."""

    def __init__(
        self,
        spec: dict,
        data: Data,
        cfg: dict,
        work_dir: Path,
        root: Path,
        base_model: Path | None,
        hooks: Hooks,
        stream,
        builtin_generates: bool = False,
    ):
        self.spec, self.full, self.cfg = spec, data, cfg
        # a built-in run is planned beside a command baseline (campaign.preflight: the spec's)
        self.builtin_generates = builtin_generates
        self.recipe = Recipe.from_spec(spec["train"])
        self.task = spec["model"]["task"]
        self.work_dir, self.root = Path(work_dir), Path(root)
        self.base_model, self.hooks, self.stream = base_model, hooks, stream
        self.device = hooks.device if hooks.device is not None else select_device()
        self.sample = sample_data(
            data,
            cfg["sample"]["train_examples"],
            cfg["sample"]["validation_examples"],
            spec["seed"],
        )

    def scratch(self, name: str) -> Path:
        folder = self.work_dir / "preflight" / name
        if folder.exists():
            remove_tree(folder)
        folder.mkdir(parents=True)
        return folder

    def trainer(self, work_dir: Path | None = None, **train_overrides) -> Trainer:
        """A fresh Trainer on the sample (the recipe, with `train_overrides` applied)."""
        train = {**self.spec["train"], **train_overrides}
        # One process here: train.devices' micro-batches accumulated in it (the same effective
        # batch, run id and gradients: tests/train/test_distributed.py).
        devices = int(train_key(train, "devices"))
        if devices > 1:
            train["devices"] = 1
            if "grad_accum" not in train_overrides:
                train["grad_accum"] = train["grad_accum"] * devices
        spec = {**self.spec, "train": train}
        trainer = Trainer(
            spec,
            self.sample,
            work_dir if work_dir is not None else self.scratch("trainer"),
            root=self.root,
            base_model=self.base_model,
            device=self.device,
            stream=self.stream,
        )
        if self.hooks.transform_examples is not None:
            trainer.examples["train"] = self.hooks.transform_examples(trainer.examples["train"])
        return trainer

    def label_names(self) -> list[str]:
        return label_names(self.full.train.labels)


def padded_batch(examples: Sequence[dict], n: int, length: int, pad_id: int) -> dict:
    """n examples (cycled when fewer), each right-padded to `length` tokens: the memory
    estimate's premise (every example padded to max_length)."""
    rows, mask = [], []
    for i in range(n):
        e = examples[i % len(examples)]
        real, extra = len(e["input_ids"]), length - len(e["input_ids"])
        row = {"input_ids": e["input_ids"] + [pad_id] * extra}
        if "labels" in e:
            row["labels"] = e["labels"] + [IGNORE] * extra
        else:
            row["label"] = e["label"]
        rows.append(row)
        mask.append([1] * real + [0] * extra)
    batch = collate(rows, pad_id)
    batch["attention_mask"] = torch.tensor(mask, dtype=torch.long)
    return batch


def tree_bytes(path: Path) -> int:
    path = Path(path)
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def model_config(trainer: Trainer) -> dict:
    """The built model's geometry as the memory estimate reads it (HF config dict)."""
    return {"task": trainer.task, "config": trainer.model.config.to_dict()}


def configured_model(bench: Bench, trainer: Trainer) -> dict:
    """The model section as a full run builds it: the configured vocabulary size (a sample's
    tokenizer may hold fewer tokens), else the pretrained config."""
    spec = bench.spec["model"]
    if spec["source"] == "from_config":
        return spec
    return model_config(trainer)


def sync(device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def fmt_bytes(n: float) -> str:
    return format_bytes(n)


def fmt_seconds(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return f"{s:.2f} s"


def evaluations_per_run(max_steps: int, eval_every: int) -> int:
    """How often Trainer.run evaluates: every eval_every steps, and at the last step."""
    return max_steps // eval_every + (1 if max_steps % eval_every else 0)
