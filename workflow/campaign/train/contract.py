"""The trainer contract (docs/trainer-contract.md) for a script built on transformers' Trainer,
TRL's SFTTrainer included: the run spec, the recipe as Trainer arguments, the progress lines,
the stop on a signal with a checkpoint and exit 75, the resume and the model saved where the
campaign scores it. A user's script imports it; the campaign that runs a command puts its own
package first on the command's PYTHONPATH, so the script gets this very file, which is in the
code version (and so the store key) of every training run.

    from campaign.train.contract import Contract

    contract = Contract.from_env()
    trainer = SFTTrainer(model, args=SFTConfig(**contract.trainer_args(), ...),
                         callbacks=[contract], ...)
    trainer.train(resume_from_checkpoint=contract.resume)
    sys.exit(contract.finish(trainer, tokenizer))
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from types import MappingProxyType

import torch
import transformers as tf

from campaign.core.defaults import TRAIN_DEFAULTS
from campaign.core.errors import PREEMPTED_EXIT

# The environment variable naming the run spec's JSON file.
SPEC_ENV = "CAMPAIGN_RUN_SPEC"
# train.schedule -> the Trainer's lr_scheduler_type (constant: the built-in loop's warmup too).
SCHEDULES = {"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}
# Recipe keys trainer_args does not pass on (a script that applies one names it in `handled`),
# with the value its arguments do train with: the train defaults, and for train.lora (required
# in params, so without a default) null, the full fine-tune a Trainer runs on the model it gets.
_DEFAULTED = ("optimizer", "gradient_checkpointing", "group_by_length", "packing",
              "base_dropout", "base_quantization", "select")  # fmt: skip
UNMAPPED = MappingProxyType({**{k: TRAIN_DEFAULTS[k] for k in _DEFAULTED}, "lora": None})


# Where a launcher announces how many processes it started: torchrun/accelerate/deepspeed, and
# mpirun (Open MPI's; MPICH's and Intel MPI's PMI; MVAPICH's: the variables accelerate reads).
# Not SLURM's step variables: a job step the executor itself started (one task) would be read
# as the command's; the Trainer's own world size is checked when training begins.
WORLD_SIZES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")


# Tests only, off unless set: a step number. Having written that step's progress line, the
# process writing them waits for a signal (at most HOLD_SECONDS), so a test that signals on
# seeing the line gets it in at that step (the stop then comes at the next step's end), however
# slow the test's watcher or fast the steps on a loaded machine. A campaign never sets it.
HOLD_ENV = "CAMPAIGN_TEST_HOLD_STEP"
HOLD_SECONDS = 60.0


class Contract(tf.TrainerCallback):
    """The contract as a Trainer callback: a progress line per optimizer step; on SIGTERM or
    SIGUSR1, stop at the step's end with a checkpoint; `finish` then exits 75 or saves."""

    def __init__(self, spec: dict):
        self.spec = spec
        # The processes a launcher started (WORLD_SIZE, or mpirun's own variable)
        # against the ones the plan, budget and key count: a count written into a launcher's
        # config file, or an allocation of another size, escapes the argv check. None set:
        # one process without a launcher, which the campaign's argv check allows.
        name, world = next(
            ((v, int(os.environ[v])) for v in WORLD_SIZES if os.environ.get(v, "").isdigit()),
            ("WORLD_SIZE", 0),
        )
        devices = int(spec.get("devices", 1))
        if world and world != devices:
            raise SystemExit(
                f"{SPEC_ENV}: {name} {world} (the processes the launcher started) is not "
                f"train.devices {devices}; give the launcher in train.command's argv "
                '"{devices}" as its process count, and no count in its config'
            )
        # None announced on several devices: one process training alone (accelerate launch
        # --cpu without mpirun starts one whatever its --num_processes). srun announces its
        # tasks in SLURM's variables only, which a job step's single task has too: trusted.
        if not world and devices > 1 and "SLURM_PROCID" not in os.environ:
            raise SystemExit(
                f"{SPEC_ENV}: train.devices {devices}, but no launcher announced a process "
                f"count ({' or '.join(WORLD_SIZES)}): this process would train alone; start "
                f"{devices} processes with the launcher (accelerate launch --cpu starts one "
                "without mpirun: on a machine without CUDA use --multi_gpu)"
            )
        self.signalled: int | None = None
        self.tokens_before = 0
        # Resumed from a checkpoint at max_steps (a job killed after the command's last
        # checkpoint, before the campaign committed): that checkpoint's weights are the model.
        # The Trainer still trains one step past max_steps when max_steps is not a whole number
        # of epochs (it checks the stop only after a step); finish() puts them back.
        self.final_checkpoint: str | None = None
        # A handler that only notes: the Trainer stops at the step's end (on_step_end), saving
        # a checkpoint a rerun resumes from, instead of dying mid-step.
        for sig in (signal.SIGTERM, signal.SIGUSR1):
            signal.signal(sig, self.note)

    @classmethod
    def from_env(cls) -> Contract:
        """The run spec the campaign names in CAMPAIGN_RUN_SPEC."""
        return cls(json.loads(Path(os.environ[SPEC_ENV]).read_text(encoding="utf-8")))

    @property
    def resume(self) -> bool | None:
        """Trainer.train's resume_from_checkpoint: the newest checkpoint a signalled (or
        killed) job left in checkpoint_dir, or None for a fresh start."""
        return True if any(Path(self.spec["checkpoint_dir"]).glob("checkpoint-*")) else None

    def trainer_args(self, handled: tuple[str, ...] = ()) -> dict:
        """TrainingArguments (or SFTConfig) keywords the campaign decides: the recipe, the seed,
        checkpoints in checkpoint_dir, and a log line each step. Put them last, so they win
        over a config file's.

        A recipe key these keywords do not carry (UNMAPPED) at a value other than its default
        stops the run in one line, unless the script names it in `handled` (it applies the key
        itself): a cell labelled train.optimizer adafactor must not train with AdamW, nor one
        labelled with a train.lora every weight."""
        recipe = self.spec["recipe"]
        moved = [
            f"train.{k} {recipe[k]!r}"
            for k, carried in UNMAPPED.items()
            if k not in handled and k in recipe and recipe[k] != carried
        ]
        if moved:
            raise SystemExit(
                f"{SPEC_ENV}: {', '.join(moved)}: not passed to the Trainer by the contract "
                "helper; apply it in the script and name it in trainer_args(handled=...), or "
                "leave it at its default"
            )
        return dict(
            output_dir=self.spec["checkpoint_dir"],
            max_steps=recipe["max_steps"],
            per_device_train_batch_size=recipe["micro_batch"],
            gradient_accumulation_steps=recipe["grad_accum"],
            learning_rate=recipe["lr"],
            weight_decay=recipe["weight_decay"],
            warmup_steps=recipe["warmup_steps"],
            lr_scheduler_type=SCHEDULES[recipe["schedule"]],
            max_grad_norm=recipe["max_grad_norm"] or 0.0,
            seed=self.spec["seed"],
            data_seed=self.spec["seed"],
            save_strategy="steps",
            save_steps=recipe["checkpoint_every"],
            save_total_limit=recipe["keep_checkpoints"],
            logging_steps=1,  # a progress line per step
            include_num_input_tokens_seen="non_padding",
            report_to="none",
            disable_tqdm=True,
            use_cpu=not torch.cuda.is_available(),
            bf16=recipe["precision"] == "bf16",
            fp16=recipe["precision"] == "fp16",
        )

    def note(self, signum, _frame) -> None:
        self.signalled = signum

    def on_train_begin(self, args, state, control, **kwargs):
        # The processes training together, as the Trainer sees them: the truth the variables
        # above only announce. srun's tasks without a launcher (SLURM's variables alone) are
        # independent trainings of one output folder, each a world of 1.
        devices = int(self.spec.get("devices", 1))
        if args.world_size != devices:
            raise SystemExit(
                f"{SPEC_ENV}: the Trainer trains in a world of {args.world_size} process(es), "
                f"not train.devices {devices}; start {devices} processes with a launcher that "
                'sets up torch.distributed (torchrun, accelerate launch), "{devices}" as its '
                "count"
            )
        # Resumed: the count restored from the checkpoint, so the next line has its step's tokens.
        self.tokens_before = int(state.num_input_tokens_seen)
        if state.global_step >= self.spec["recipe"]["max_steps"]:
            # the checkpoint it resumed from, by name (no checkpoint past max_steps is saved)
            self.final_checkpoint = str(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    def on_step_end(self, args, state, control, **kwargs):
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            # Under a launcher each process stops at the step any of them was signalled by:
            # one stopping a step before the others would leave them waiting in an all-reduce.
            flag = torch.tensor([0.0 if self.signalled is None else 1.0], device=args.device)
            torch.distributed.all_reduce(flag, op=torch.distributed.ReduceOp.MAX)
            if flag.item() > 0 and self.signalled is None:
                self.signalled = signal.SIGTERM
        if self.signalled is not None:
            control.should_save = True
            control.should_training_stop = True
        if state.global_step > self.spec["recipe"]["max_steps"]:
            # The step a resume at max_steps takes past it: no checkpoint of it (saving one
            # would rotate out the checkpoint finish() restores), and training stops.
            control.should_save = False
            control.should_training_stop = True
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not logs or "loss" not in logs or not state.is_world_process_zero:
            return
        if state.global_step > self.spec["recipe"]["max_steps"]:
            return  # the step a resume at max_steps trains past it: undone in finish()
        seen = int(state.num_input_tokens_seen)
        line = {
            "step": state.global_step,
            "loss": logs["loss"],
            "lr": logs.get("learning_rate"),
            "grad_norm": logs.get("grad_norm"),
            "tokens": seen - self.tokens_before,
        }
        self.tokens_before = seen
        with open(self.spec["progress_file"], "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")
        if os.environ.get(HOLD_ENV) == str(state.global_step):
            deadline = time.monotonic() + HOLD_SECONDS
            while self.signalled is None and time.monotonic() < deadline:
                time.sleep(0.01)

    def finish(self, trainer, tokenizer) -> int:
        """After trainer.train(): the exit status. Signalled before max_steps: 75 (the
        checkpoint is saved). Otherwise the model and its tokenizer go to output_dir with
        save_pretrained (a peft model on a pretrained base saves its adapter, which names
        that base), and 0. trainer.save_model would add
        training_args.bin, which holds this job's paths and so differs on every rerun."""
        step = trainer.state.global_step
        if self.signalled is not None and step < self.spec["recipe"]["max_steps"]:
            print(f"signal {self.signalled}: checkpointed step {step}")
            if "preempted_file" in self.spec and trainer.is_world_process_zero():
                # A launcher's exit status is its own (torchrun exits 1 after passing SIGTERM
                # on): this note tells the campaign its processes checkpointed and stopped.
                Path(self.spec["preempted_file"]).write_text(
                    json.dumps({"signal": int(self.signalled), "step": step}), encoding="utf-8"
                )
            return PREEMPTED_EXIT
        if self.final_checkpoint is not None:
            # The model is the checkpoint at max_steps, not the step the Trainer took past it.
            trainer._load_from_checkpoint(self.final_checkpoint)
        if trainer.is_world_process_zero():
            model = trainer.model
            if self.spec["model"]["source"] == "from_config" and hasattr(model, "peft_config"):
                # No base folder for the adapter to name: the merged model, as the built-in
                # loop saves a from_config LoRA run.
                model = model.merge_and_unload()
            model.save_pretrained(self.spec["output_dir"])
            tokenizer.save_pretrained(self.spec["output_dir"])
        return 0
