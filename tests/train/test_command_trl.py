"""The TRL SFTTrainer example (examples/trl_sft_generation.py) keeps the trainer contract on the
generation task: on a tiny from-config Llama, through the train stage's command path (the run
spec, the command run with the job's signals passed on, the contract's outputs checked), it is
signalled mid-run, exits 75, resumes from its checkpoint in the stage run again, which scores
its model per item as a built-in generation run's, and it ends with the weights of an
uninterrupted run."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import pandas as pd
import pytest
from trainkit import REPO, context, tiny_spec

from campaign.core.errors import CampaignError, Preempted
from campaign.data import conversations as conv
from campaign.tasks.generation import chat as gen
from campaign.train.command import (
    PROGRESS_LINES,
    Command,
    check_outputs,
    prepare,
    read_progress_lines,
    run_command,
    stage,
)
from campaign.train.contract import HOLD_ENV

EXAMPLE = "examples/trl_sft_generation.py"
# The signal goes in at step 3 (the contract helper holds there for it: HOLD_ENV), so the run
# stops at step 4 however loaded the cores; steps after it for the resume to train.
STEPS = 8
# Prompt -> response pairs over a small vocabulary (the tokenizer is trained on the train split).
PAIRS = [(f"what is {a} {b}", f"{a} {b} answer") for a in ("one", "two", "three")
         for b in ("cat", "dog", "mat", "rug")]  # fmt: skip


def _write(folder: Path, name: str, pairs) -> list[Path]:
    talks = [conv.from_prompt_response(q, a) for q, a in pairs]
    path = folder / f"{name}.parquet"
    pd.DataFrame(
        {
            "id": [f"{name}{i}" for i in range(len(talks))],
            "text": [conv.dedup_text(t) for t in talks],
            "label": [conv.UNSTRATIFIED] * len(talks),
            "messages": [conv.dump_messages(t) for t in talks],
        }
    ).to_parquet(path)
    return [path]


@pytest.fixture(scope="module")
def splits(tmp_path_factory) -> dict[str, list[Path]]:
    folder = tmp_path_factory.mktemp("splits")
    return {"train": _write(folder, "train", PAIRS),
            "validation": _write(folder, "validation", PAIRS[:4]),
            "test": _write(folder, "test", PAIRS[4:8])}  # fmt: skip


# A `trl sft` config file as a team has one: its SFTConfig keys apply, the recipe's win, the
# model and the dataset are the run spec's.
SFT_CONFIG = """
model_name_or_path: HuggingFaceTB/SmolLM2-135M-Instruct
dataset_name: trl-lib/Capybara
learning_rate: 0.5
dataset_num_proc: 1
"""


def _spec(config: Path) -> dict:
    spec = tiny_spec("generation", "llama", hidden=32, layers=2, max_steps=STEPS,
                     checkpoint_every=2, micro_batch=4, grad_accum=1, warmup_steps=0,
                     max_length=64, lr=3e-3,
                     command={"argv": ["python", EXAMPLE, str(config)],
                              "files": [EXAMPLE]})  # fmt: skip
    spec["model"]["config"].update(num_attention_heads=4, num_key_value_heads=2, dropout=0.0,
                                   max_position_embeddings=128)  # fmt: skip
    spec["model"]["tokenizer"].update(vocab_size=300, min_frequency=1, lowercase=False)
    spec["model"]["chat_template"] = "none"
    spec["model"]["generation"] = {"metric": "token_f1", "max_new_tokens": 6, "batch_size": 4}
    return spec


def _signal_at(work: Path, step: int) -> None:
    """SIGUSR1 to this process (the job) once the command has logged `step`."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        rows = read_progress_lines(work / PROGRESS_LINES)
        if rows and rows[-1]["step"] >= step:
            signal.raise_signal(signal.SIGUSR1)
            return
        time.sleep(0.05)


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


@pytest.mark.slow(minutes=3)
def test_the_trl_example_is_signalled_resumes_and_ends_with_an_uninterrupted_runs_weights(
    splits, tmp_path, capfd, monkeypatch
):
    config = tmp_path / "sft.yaml"
    config.write_text(SFT_CONFIG)
    spec = _spec(config)
    command = Command.of(spec["train"])
    ctx = context(spec, splits, tmp_path / "signalled")
    path, _, _ = prepare(ctx.spec, ctx.inputs, ctx.outputs, ctx.work_dir, REPO)
    run_spec = json.loads(path.read_text())
    # The template the campaign formats and scores generation with, handed to the command.
    assert "Assistant:" in run_spec["chat_template"] and run_spec["labels"] == []

    monkeypatch.setenv(HOLD_ENV, "3")  # the command waits at step 3 for the signal
    threading.Thread(target=_signal_at, args=(ctx.work_dir, 3), daemon=True).start()
    with pytest.raises(Preempted) as stopped:
        run_command(command, path, ctx.work_dir, REPO, spec)
    monkeypatch.delenv(HOLD_ENV)
    assert stopped.value.step == 4, stopped.value.step  # the step after the one held
    assert list((ctx.work_dir / "checkpoints").glob("checkpoint-*")), "no checkpoint to resume"
    stage(ctx)  # the job started again: resumed, checked, and scored by the campaign
    resumed_from = json.loads(ctx.outputs["timings"].read_text())["resumed_from_step"]
    # It restarted from its newest checkpoint (every 2 steps), not from step 0.
    assert 2 <= resumed_from <= stopped.value.step, resumed_from
    progress = read_progress_lines(ctx.work_dir / PROGRESS_LINES)
    # Generated and scored per item by the generation task, as a built-in run is.
    for split, pairs in (("validation", PAIRS[:4]), ("test", PAIRS[4:8])):
        frame = pd.read_parquet(ctx.outputs[f"predictions_{split}"])
        assert tuple(frame.columns) == gen.RUN_PREDICTION_COLUMNS
        assert list(frame["reference"]) == [a for _, a in pairs]
        assert frame["prediction"].map(type).eq(str).all()  # scored by the evaluation
    losses = {r["step"]: r["loss"] for r in progress}
    assert losses[STEPS] < losses[1]  # it learned
    assert progress[0]["lr"] == spec["train"]["lr"]  # the recipe's, not the config file's
    assert "not SFTConfig keys, the run spec decides them: dataset_name, model_name_or_path" in (
        capfd.readouterr().out
    )

    plain = context(spec, splits, tmp_path / "uninterrupted")
    path, _, _ = prepare(plain.spec, plain.inputs, plain.outputs, plain.work_dir, REPO)
    assert run_command(command, path, plain.work_dir, REPO, spec) == 0
    check_outputs(plain.outputs["model"], read_progress_lines(plain.work_dir / PROGRESS_LINES),
                  STEPS)  # fmt: skip
    ours, theirs = _weights(ctx.outputs["model"]), _weights(plain.outputs["model"])
    assert ours.keys() == theirs.keys()
    differ = [name for name in ours if not ours[name].equal(theirs[name])]
    assert not differ, f"resumed weights differ from an uninterrupted run's in {differ}"


LORA = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}


def _base(spec: dict, splits: dict, folder: Path) -> Path:
    """A tiny "pretrained" Llama folder (model and tokenizer), as model.source names one."""
    from campaign.train import models
    from campaign.train.loop import read_data

    texts = read_data(splits).train.texts
    tokenizer = models.make_tokenizer(spec["model"], texts, None)
    model = models.build_model(spec["model"], tokenizer, [], 0, None)
    models.save_model(model, tokenizer, folder)
    return folder


@pytest.mark.slow(minutes=1)
def test_a_peft_adapter_the_trl_example_writes_is_scored_over_its_base(splits, tmp_path):
    """train.lora on a pretrained base: the example saves peft's adapter (naming its base by
    path), the campaign makes it its own adapter folder (the base named by content hash, no
    path) and scores it merged into that base, as a built-in LoRA run's."""
    from campaign.train.command import adopt_adapter
    from campaign.train.models import BASE_FILE, adapter_info, load_run_model

    config = tmp_path / "sft.yaml"
    config.write_text("")
    spec = _spec(config)
    base = _base(spec, splits, tmp_path / "base")
    spec["model"]["source"] = str(base)
    spec["train"].update(lora=LORA, max_steps=4)
    ctx = context(spec, {**splits, "base_model": [base]}, tmp_path / "run")
    stage(ctx)
    folder = ctx.outputs["model"]
    assert not list(folder.glob("model*.safetensors"))  # an adapter, not a merged model
    adapter = json.loads((folder / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] is None  # no machine path in the run's model
    assert adapter_info(folder)["task"] == "causal_lm"
    frame = pd.read_parquet(ctx.outputs["predictions_validation"])
    assert list(frame["reference"]) == [a for _, a in PAIRS[:4]]
    assert frame["prediction"].map(type).eq(str).all()  # scored by the evaluation
    # The adapter changed the base: the merged model is not the base's weights.
    merged = load_run_model(folder, "generation", base)
    plain = load_run_model(base, "generation")
    name = next(n for n, _ in merged.named_parameters() if "q_proj" in n)
    assert not dict(merged.named_parameters())[name].equal(dict(plain.named_parameters())[name])

    # An adapter naming another base, or over a from_config model: one line each.
    other = tmp_path / "other"
    other.mkdir()
    (other / "adapter_config.json").write_text(
        json.dumps(
            {"base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M", "task_type": "CAUSAL_LM"}
        )  # fmt: skip
    )
    (other / "adapter_model.safetensors").write_bytes(b"")
    with pytest.raises(CampaignError, match="names base 'HuggingFaceTB/SmolLM2-135M', not the"):
        adopt_adapter(other, base, [], "generation")
    with pytest.raises(CampaignError, match="adapter over a from_config model"):
        adopt_adapter(other, None, [], "generation")
    assert not (other / BASE_FILE).exists()
