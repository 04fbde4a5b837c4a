"""The training loop: one run's model, optimizer and data order, a step at a time, checkpointed
in its work folder, and the scores and predictions of the model on the evaluation splits.

Determinism: for a given spec and data on CPU, the weights and the predictions are the same bytes
on every run, resumed or not.
"""

from __future__ import annotations

import contextlib
import functools
import random
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from campaign.core.errors import CampaignError, Preempted
from campaign.core.hashing import hash_value
from campaign.core.progress import job_progress
from campaign.core.tasks import module_of
from campaign.plan import identity, run_id
from campaign.train import checkpoint, devices, distributed, models, optim
from campaign.train.batches import DataOrder, Split, count_targets, micro_batches, read_split
from campaign.train.judged import check_select, judged_subsample
from campaign.train.packing import check_packing
from campaign.train.processes import signals_handled
from campaign.train.recipe import GROUP_MICRO_BATCHES, Recipe, lr_factor
from campaign.train.select import chosen_step
from campaign.train.steps import accumulate, param_groups

EVAL_SPLITS = ("validation", "test")
# metrics.parquet: what a step or an evaluation computed, the same bytes on every identical run.
# generated: a validation row's mean score of greedy generations on the fixed subsample
# (model.generation.eval_items; missing when off); kept: the row of the step whose model the
# run kept (train.select), one validation row per run (none when validation is empty).
METRIC_DTYPES = {
    "step": "int64",
    "split": "string",
    "loss": "float64",
    "accuracy": "float64",
    "lr": "float64",
    "grad_norm": "float64",
    "targets": "Int64",
    "tokens": "Int64",
    "generated": "float64",
    "kept": "boolean",
}
METRIC_COLUMNS = tuple(METRIC_DTYPES)
# timings.json: how long each took (a run's volatile output: recorded, not compared).
TIMING_COLUMNS = ("step", "split", "seconds", "tokens_per_s", "samples_per_s")
# A scheduler's warning before the time limit and its cancellation: the loop finishes the step,
# checkpoints and stops (campaign.core.errors.Preempted). SIGURG is the SLURM profile's warning:
# every other process of the job ignores it by default (a SIGUSR1 to a job's steps also kills
# the Snakemake process that runs this one, and the step's end takes the trainer with it).
PREEMPT_SIGNALS = (signal.SIGUSR1, signal.SIGTERM, signal.SIGURG)


def dropout_seed(seed: int, step: int, micro_batch: int) -> int:
    """The torch seed before micro-batch `micro_batch` of optimizer step `step` (0-based): the
    dropout masks of a run do not depend on which device runs which micro-batch."""
    return int(hash_value(["dropout", seed, step, micro_batch])[:15], 16)


class _NoProgress:
    """Ranks other than 0 report nothing (rank 0's progress file is the job's)."""

    def update(self, step, **fields) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class Data:
    train: Split
    validation: Split
    test: Split


class Trainer:
    """One run: model, optimizer and data order, a step at a time, checkpointed in work_dir.
    What differs per task (its examples, head, loss and scores) is its module's
    (campaign.core.tasks.module_of(model.task)): the loop calls it and never asks the name."""

    def __init__(
        self,
        spec: dict,
        data: Data,
        work_dir: Path,
        root: Path = Path("."),
        base_model: Path | None = None,
        device=None,
        stream=None,
    ):
        self._read_spec(spec, work_dir, device, stream)
        self._join_processes()
        self.data = data
        # A checkpoint belongs to the run's identity: changing checkpoint_every or
        # keep_checkpoints mid-campaign keeps every checkpoint usable.
        self.spec_hash = hash_value(identity(spec))
        train = data.train
        conversations = [] if train.messages is None else [train.messages]
        self.data_hash = hash_value([train.ids, train.texts, train.labels, *conversations])

        random.seed(self.seed)
        np.random.seed(self.seed % 2**32)
        source = models.source_path(self.model_spec, root)
        if source is not None and base_model is not None:
            source = Path(base_model)  # the rule's input: its content is part of the key
        self.base_source = source  # a LoRA run's model output names this folder by its hash
        self.tokenizer = models.make_tokenizer(self.model_spec, data.train.texts, source)
        self.labels = models.label_names(data.train.labels)
        self.label_ids = {name: i for i, name in enumerate(self.labels)}
        self._prepare_examples(data, root)
        self.pad_id = self.tokenizer.pad_token_id
        self.model = self._build_model(spec, source)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self._make_optimizer()
        self.order = DataOrder(len(self.examples["train"]), self.seed, **self._grouping())
        self.step = 0
        self.history: list[dict] = []
        self.train_seconds = 0.0
        self.resumed_from: int | None = None
        # train.select best_generated: {"step", "model"} of the best generated step so far
        # (the model's trainable state, on the CPU); checkpointed, restored by keep_chosen().
        self.best: dict | None = None
        self.saved_step: int | None = None  # the step of the newest checkpoint in work_dir
        self.stop_signal: int | None = None  # set by a PREEMPT_SIGNALS handler during run()

    # -------------------------------------------------------------- setup
    def _read_spec(self, spec: dict, work_dir: Path, device, stream) -> None:
        """The run spec's recipe and task, checked; where the run writes and computes."""
        self.spec = spec
        self.model_spec = spec["model"]
        self.task = self.model_spec["task"]
        self.recipe = Recipe.from_spec(spec["train"])
        models.check_model_spec(self.model_spec)
        self.task_module = module_of(self.task)
        self.eval_items = self.task_module.eval_items(self.model_spec)
        check_select(self.recipe.select, self.eval_items)
        self.seed = int(spec["seed"])
        self.work_dir = Path(work_dir)
        self.stream = sys.stderr if stream is None else stream
        self.device = device if device is not None else devices.select_device()
        devices.check_precision(self.device, self.recipe.precision)

    def _join_processes(self) -> None:
        """train.devices: this process's rank among the run's processes (distributed.py)."""
        self.rank, self.world = distributed.rank_and_world()
        if self.world != self.recipe.devices:
            raise CampaignError(
                f"train.devices: {self.recipe.devices}, but this process is one of {self.world} "
                f"(the train stage launches the processes; run it with `campaign train`)"
            )
        distributed.init(self.device, self.rank, self.world)

    def _build_model(self, spec: dict, source: Path | None):
        """The task's model as the recipe trains it, on the device: base dropout and length
        checked, the base quantized, packing checked, checkpointing on, LoRA wrapped."""
        model = models.build_model(self.model_spec, self.tokenizer, self.labels, self.seed, source)
        self._prepare_base(model)
        # train.base_quantization: the frozen base's linear weights quantized before LoRA.
        model = models.quantize_base(model, spec["train"], self.device.type)
        if self.recipe.packing:  # before LoRA and the device: a refusal costs no more
            check_packing(model, self.task, next(model.parameters()).device)
        if self.recipe.gradient_checkpointing:
            models.enable_gradient_checkpointing(model)
        self.quantized_base = models.has_quantized_base(model)
        if self.recipe.lora is not None:
            model = models.apply_lora(model, self.recipe.lora, self.task)
        return model.to(self.device)

    def _make_optimizer(self) -> None:
        """The optimizer over the trainable parameters, its lr schedule, the fp16 loss scaler
        and the autocast context of train.precision."""
        r = self.recipe
        self.optimizer = optim.make_optimizer(
            r.optimizer, param_groups(self.model, r.weight_decay), r.lr, self.device.type
        )
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer,
            functools.partial(
                lr_factor,
                schedule=r.schedule,
                warmup_steps=r.warmup_steps,
                max_steps=r.max_steps,
            ),
        )
        self.scaler = torch.amp.GradScaler(self.device.type, enabled=r.precision == "fp16")
        self.autocast = functools.partial(devices.autocast, self.device, r.precision)

    # -------------------------------------------------------------- data
    def _prepare_examples(self, data: Data, root: Path) -> None:
        """The task's run setup (its format, labels, template) and every split's examples."""
        self.run_setup = self.task_module.setup(
            self.model_spec,
            self.tokenizer,
            root,
            labels=self.labels,
            max_length=self.recipe.max_length,
        )
        self.examples = {
            name: self._encode(getattr(data, name)) for name in ("train", *EVAL_SPLITS)
        }
        self.task_module.check_train_examples(self.run_setup, self.examples["train"])
        # model.generation.eval_items: the validation records generated on at each evaluation.
        self.judged = (
            judged_subsample(data.validation, self.eval_items)
            if self.eval_items is not None and len(data.validation)
            else None
        )
        # What a split's final score is called: accuracy, or for a task that generates none
        # here (the evaluation scores the generated text) the loss per target token.
        self.score_name = self.task_module.score_name

    @property
    def fmt(self):
        """The causal_lm task's prompt format (the preflight's checks read it); None for a
        task without one."""
        return getattr(self.run_setup, "fmt", None)

    def _prepare_base(self, model) -> None:
        """The base model as the recipe trains it: max_length within its positions, its own
        dropout as train.base_dropout says (before LoRA adds the adapters' dropout)."""
        self._check_length(model.config)
        models.set_base_dropout(model, self.recipe.base_dropout)

    def _check_length(self, config) -> None:
        limit = getattr(config, "max_position_embeddings", None)
        if limit is not None and self.recipe.max_length > limit:
            where = (
                "model.config.max_position_embeddings"
                if self.model_spec["source"] == "from_config"
                else f"the model's max_position_embeddings ({self.model_spec['source']})"
            )
            raise CampaignError(
                f"train.max_length: {self.recipe.max_length} exceeds {where} ({limit})"
            )

    def _encode(self, split: Split) -> list[dict]:
        if len(split) == 0:
            return []
        return self.task_module.encode_split(
            self.run_setup, self.tokenizer, split, self.recipe.max_length
        )

    def _grouping(self) -> dict:
        """DataOrder's length grouping (train.group_by_length), or none."""
        if not self.recipe.group_by_length:
            return {}
        lengths = [len(e["input_ids"]) for e in self.examples["train"]]
        # The label ids too: a window sorted by length alone makes label-homogeneous batches
        # where length and label go together (batches.label_mixed keeps each batch's mix).
        labels = [self.label_ids.get(v, -1) for v in self.data.train.labels]
        return {
            "lengths": lengths,
            "group": self.recipe.micro_batch * GROUP_MICRO_BATCHES,
            "labels": labels,
        }

    def _to_device(self, batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}

    # -------------------------------------------------------------- state
    def state_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "spec_hash": self.spec_hash,
            "data_hash": self.data_hash,
            "model": self._model_state(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict(),
            "scaler": self.scaler.state_dict(),
            "rng": checkpoint.rng_state(),
            "data_order": self.order.state_dict(),
            "history": self.history,
            "train_seconds": self.train_seconds,
            "best": self.best,
        }

    def _model_state(self) -> dict[str, Any]:
        # A frozen base (LoRA, or a quantized base) is rebuilt from the seed / base weights:
        # a checkpoint holds only the trainable tensors.
        if self.frozen_base:
            from campaign.train.basequant import trainable_state

            return trainable_state(self.model)
        return self.model.state_dict()

    @property
    def frozen_base(self) -> bool:
        return self.quantized_base or self.recipe.lora is not None

    def _load_model_state(self, model_state: dict[str, Any]) -> None:
        if self.frozen_base:
            from campaign.train.basequant import load_trainable_state

            load_trainable_state(self.model, model_state)
        else:
            self.model.load_state_dict(model_state)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self._load_model_state(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        self.scaler.load_state_dict(state["scaler"])
        self.order.load_state_dict(state["data_order"])
        checkpoint.set_rng_state(state["rng"])
        self.step = int(state["step"])
        self.history = list(state["history"])
        self.train_seconds = float(state["train_seconds"])
        self.best = state.get("best")  # absent from a checkpoint of a run that selects last

    def resume(self) -> int | None:
        """Load the newest good checkpoint from work_dir; returns its step (None: fresh start)."""
        state = checkpoint.load_latest(
            self.work_dir, {"spec_hash": self.spec_hash, "data_hash": self.data_hash}
        )
        if state is None:
            return None
        self.load_state_dict(state)
        self.resumed_from = self.saved_step = self.step
        print(f"train: resumed from step {self.step}", file=self.stream, flush=True)
        return self.step

    def save(self) -> Path:
        path = checkpoint.save_checkpoint(
            self.work_dir, self.state_dict(), self.recipe.keep_checkpoints
        )
        self.saved_step = self.step
        return path

    def _signals_deferred(self):
        """PREEMPT_SIGNALS only note themselves while the loop runs: a step is never cut."""

        def note(signum, _frame):
            self.stop_signal = signum

        return signals_handled(PREEMPT_SIGNALS, note)

    def _stop_if_signalled(self) -> None:
        """After a signal: checkpoint the finished step (unless it is saved) and stop. With
        several processes, all stop after the same step when any one was signalled."""
        if self.world > 1:
            stop = distributed.any_process(self.stop_signal is not None, self.device)
            if stop and self.stop_signal is None:
                self.stop_signal = signal.SIGTERM
        if self.stop_signal is None:
            return
        if self.step > 0 and self.saved_step != self.step and self.rank == 0:
            self.save()
        print(
            f"train: signal {self.stop_signal}: checkpointed step {self.step}, stopping",
            file=self.stream,
            flush=True,
        )
        raise Preempted(self.stop_signal, self.step)

    # -------------------------------------------------------------- steps
    def backward(self, indices: list[int]) -> tuple[torch.Tensor, int, int]:
        """Gradients of one global batch (`indices`) into .grad, summed over the processes;
        returns (loss sum, target count, token count) of the whole batch."""
        r = self.recipe
        pack = r.max_length if r.packing else None
        every = micro_batches(self.examples["train"], indices, r.micro_batch, self.pad_id, pack)
        # Micro-batch j is rank j mod N's: the loss is normalized over the whole global batch's
        # targets, and dropout is seeded by (seed, step, j), so the split does not matter.
        mine = list(range(self.rank, len(every), self.world))
        targets = sum(count_targets(b) for b in every)
        batches = [self._to_device(every[j]) for j in mine]
        tokens = sum(len(self.examples["train"][i]["input_ids"]) for i in indices)
        if not self.model.training:
            self.model.train()
        scale = self.scaler.scale if self.scaler.is_enabled() else None
        step = self.step
        loss_total, targets = accumulate(
            self.model,
            batches,
            self.task,
            autocast=self.autocast,
            scale=scale,
            total=targets,
            before=lambda i: torch.manual_seed(dropout_seed(self.seed, step, mine[i])),
        )
        if self.world > 1:
            for p in self.trainable:
                if p.grad is None:
                    p.grad = torch.zeros_like(p)
            distributed.sum_over_processes(
                [p.grad for p in self.trainable] + [loss_total], self.device
            )
        return loss_total, targets, tokens

    def train_step(self) -> dict:
        """One optimizer step over micro_batch × grad_accum examples; returns its metrics row."""
        t0 = time.perf_counter()
        r = self.recipe
        indices = self.order.take(r.batch_examples)  # the global batch, over all devices
        lr = self.scheduler.get_last_lr()[0]
        loss_total, targets, tokens = self.backward(indices)
        if self.scaler.is_enabled():
            self.scaler.unscale_(self.optimizer)
        if r.max_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(self.trainable, r.max_grad_norm)
        else:
            grad_norm = torch.nn.utils.get_total_norm(
                [p.grad for p in self.trainable if p.grad is not None]
            )
        if self.scaler.is_enabled():
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        loss = float(loss_total) / targets
        seconds = time.perf_counter() - t0
        self.train_seconds += seconds
        return {
            "step": self.step,
            "split": "train",
            "loss": loss,
            "accuracy": None,
            "lr": lr,
            "grad_norm": float(grad_norm),
            "targets": targets,
            "tokens": tokens,
            "seconds": seconds,
            "tokens_per_s": tokens / seconds,
            "samples_per_s": len(indices) / seconds,
        }

    def run(
        self,
        stop_after: int | None = None,
        after_step: Callable[[int], None] | None = None,
        final_evaluation: bool = True,
    ):
        """Train up to max_steps (or `stop_after` more steps), evaluating and checkpointing.

        after_step(step) is called after each step's checkpoint, if any (tests use it to stop a
        job at a known point). final_evaluation False: the last step's validation is left to
        final_scores(), which the train stage calls on the model it saved, so that the split is
        scored once on the model its predictions come from (the last checkpoint then holds no
        row for it, and a job resumed there scores it the same way).
        """
        r = self.recipe
        progress = (
            job_progress(
                "train", self.work_dir, r.max_steps, self.step, run_id(self.spec), self.stream
            )
            if self.rank == 0
            else _NoProgress()
        )
        done = 0
        with self._signals_deferred(), contextlib.closing(progress):
            while self.step < r.max_steps and (stop_after is None or done < stop_after):
                self._stop_if_signalled()
                row = self.train_step()
                self.history.append(row)
                done += 1
                last = self.step == r.max_steps
                fields = {"loss": row["loss"], "lr": row["lr"]}
                due = self.step % r.eval_every == 0 or last
                # best_generated judges the last step here too: the choice precedes the save.
                judge_last = final_evaluation or self.recipe.select != "last"
                if self.rank == 0 and due and (judge_last or not last):
                    result = self._validate()
                    if result is not None and result[1] is not None:
                        fields["val_acc"] = result[1]
                if self.rank == 0 and (self.step % r.checkpoint_every == 0 or last):
                    self.save()
                progress.update(self.step, **fields)
                if after_step is not None:
                    after_step(self.step)

    # -------------------------------------------------------------- evaluation
    def _validate(self, final: bool = False) -> tuple[float, float, np.ndarray] | None:
        """Score the validation split now and append its row (step, loss, accuracy, and the
        generated score of the judged subsample) to history."""
        t0 = time.perf_counter()
        result = self.evaluate("validation", final=final)
        if result is not None:
            loss, accuracy, _ = result
            generated = self.judge()
            seconds = time.perf_counter() - t0
            self.history.append(
                {
                    **dict.fromkeys(METRIC_COLUMNS + TIMING_COLUMNS),
                    "step": self.step,
                    "split": "validation",
                    "loss": loss,
                    "accuracy": accuracy,
                    "generated": generated,
                    "seconds": seconds,
                    "samples_per_s": len(self.examples["validation"]) / seconds,
                }
            )
            if generated is not None and self.recipe.select == "best_generated":
                self._keep_if_best()
        return result

    # -------------------------------------------------------------- generated scores, select
    def judge(self) -> float | None:
        """The model's mean generated score on the judged subsample now (None: eval_items off)."""
        if self.judged is None:
            return None
        score = self.task_module.generated_score(
            self.model, self.tokenizer, self.run_setup, self.judged
        )
        return float(score)

    def generated_scores(self) -> dict[int, float]:
        """{step: generated score} of the validation rows that have one."""
        return {
            int(row["step"]): float(row["generated"])
            for row in self.history
            if row["split"] == "validation" and row.get("generated") is not None
        }

    def chosen(self) -> int:
        """The step whose model the run keeps (train.select; select.chosen_step)."""
        return chosen_step(self.generated_scores(), self.recipe.select, self.step)

    def _keep_if_best(self) -> None:
        """After a judged evaluation: a copy of the model's trainable state when this step is
        the choice so far (the latest of ties)."""
        if self.chosen() == self.step:
            self.keep_current()

    def keep_current(self) -> None:
        """Keep a copy (on the host) of the model's trainable state as the chosen step's: it
        goes into every later checkpoint (the preflight's disk check sizes one with it)."""
        state = self._model_state()
        self.best = {
            "step": self.step,
            "model": {k: v.detach().to("cpu", copy=True) for k, v in state.items()},
        }

    def keep_chosen(self) -> int:
        """Before the model is saved: load the chosen step's weights (train.select) when that
        step is not the last; returns the chosen step."""
        step = self.chosen()
        if step != self.step:
            if self.best is None or self.best["step"] != step:
                raise CampaignError(
                    f"train.select: step {step} was chosen, but the run holds no copy of its model"
                )
            self._load_model_state(self.best["model"])
            print(
                f"train: kept step {step} of {self.step} (best generated score on validation)",
                file=self.stream,
                flush=True,
            )
        return step

    def final_scores(self) -> dict[str, tuple[float, float, np.ndarray] | None]:
        """{split: evaluate(split)} for EVAL_SPLITS, each scored once on the model as it is now;
        the last step's validation row comes from the same scores when run() left it here
        (final_evaluation False)."""
        scored = {row["step"] for row in self.history if row["split"] == "validation"}
        out = {}
        for split in EVAL_SPLITS:
            if split == "validation" and self.step not in scored:
                out[split] = self._validate(final=True)
            else:
                out[split] = self.evaluate(split, final=True)
        return out

    @torch.no_grad()
    def scores(self, split: str) -> tuple[np.ndarray, float, int]:
        """Class probabilities (n, n_labels) for a split, with the summed loss and target count
        (a label task's scores: for causal_lm every label's response is scored after the
        prompt, probabilities the softmax of the labels' total log-likelihoods)."""
        self.model.eval()
        return self._on_split(self.task_module.scores, split)

    def evaluate(self, split: str, final: bool = False) -> tuple[float, float, Any] | None:
        """The task's (mean loss per target, score, scored items) on a split; None when it is
        empty. A label task's: (loss, accuracy, probabilities); the generation task's: (loss,
        None, predictions frame), the frame only when `final` (the saved model; generating
        at every evaluation would cost more than training)."""
        if not self.examples[split]:
            return None
        return self._on_split(self.task_module.evaluate, split, final=final)

    def _on_split(self, method: Callable, split: str, **extra: Any) -> Any:
        """The task module's `method` (scores, evaluate) on a split: the model, its tokenizer
        and the run's setup, the split's rows and examples, and how to batch them here."""
        return method(
            self.model,
            self.tokenizer,
            self.run_setup,
            getattr(self.data, split),
            self.examples[split],
            micro_batch=self.recipe.micro_batch,
            pad_id=self.pad_id,
            device=self.device,
            autocast=self.autocast,
            **extra,
        )

    def predictions(self, split: str, result: tuple | None = None):
        """The split's predictions frame (a label task's: id, label, prediction, then
        score_<label> per class). result: the split's evaluate() on the current model, when
        the caller has it."""
        if result is None:
            result = self.evaluate(split, final=True)
        scored = result[2] if result is not None else None
        return self.task_module.predictions(self.run_setup, getattr(self.data, split), scored)

    def metrics_frame(self):

        kept = self.chosen()
        rows = [
            {
                **{k: row.get(k) for k in METRIC_COLUMNS},
                "kept": row["split"] == "validation" and row["step"] == kept,
            }
            for row in self.history
        ]
        return metrics_table(rows)

    def timing_columns(self) -> dict[str, list]:
        """Per step and evaluation: seconds and rates, column by column (JSON-able)."""
        return {k: [row.get(k) for row in self.history] for k in TIMING_COLUMNS}

    def finish(self) -> None:
        """Merge LoRA adapters into the weights: the saved and scored model is a plain one."""
        self.model = models.unwrap(self.model)

    def save_model(self, folder: Path) -> None:
        """Write the model folder (a LoRA run on a pretrained base: its adapter and the base's
        hash) and merge: the model then scored is the one a reader of the folder loads."""
        self.model = models.save_run_model(
            self.model,
            self.tokenizer,
            folder,
            self.base_source,
            self.labels,
            self.recipe.base_quantization,
        )


def metrics_table(rows: list[dict]):
    """metrics.parquet's frame: METRIC_COLUMNS of `rows` (a missing key: missing), typed."""
    import pandas as pd

    frame = pd.DataFrame([{k: row.get(k) for k in METRIC_COLUMNS} for row in rows])
    if frame.empty:
        frame = pd.DataFrame(columns=list(METRIC_COLUMNS))
    return frame.astype(METRIC_DTYPES)


def read_data(inputs: dict[str, list[Path]]) -> Data:
    for name in ("train", *EVAL_SPLITS):
        if name not in inputs:
            raise CampaignError(f"training stage: missing input '{name}'")
    return Data(**{name: read_split(inputs[name], name) for name in ("train", *EVAL_SPLITS)})
