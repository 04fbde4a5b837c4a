"""The floor stage of the generation task: the floors of floor.py and few_shot.py generated on
validation and test, each into floor/<name>/predictions_<split>.parquet with the runs' columns
(the evaluation scores them), or floor/<name>/SKIPPED.txt with the reason it cannot run.

The prompted floors (zero_shot, few_shot) generate with the pretrained base as the runs hold it:
loaded in fp32, its linear weights as train.base_quantization gives the runs' frozen base, on the
device a training job selects (its card leased the same way, the device type in the job's key),
prompted with the runs' template (model.chat_template resolved on the base's tokenizer, which
every run is scored with: a train.command run that saves another is refused when it is scored)
and decoded by the runs' engine and settings.

transformers and torch are imported inside the functions that need them.
"""

from __future__ import annotations

from pathlib import Path

from campaign.core.defaults import special_tokens_policy
from campaign.data import check_special_tokens
from campaign.tasks.generation import floor as floors
from campaign.tasks.generation.chat import eos_token_ids, prompt_ids, read_conversations, setup
from campaign.tasks.generation.few_shot import FewShot, few_shot_floor
from campaign.tasks.generation.floor import BaseModel, runs_base

# Why a prompted floor cannot run, written to floor/<name>/SKIPPED.txt and listed with the skipped
# variants: the evaluation weighs only floors that ran.
FROM_CONFIG_SKIPPED = (
    "model.source is from_config: the untrained model is random weights, no floor to beat"
)


# model.generation keys the training loop reads and no floor does: the judged subsample, and the
# metric it is scored with (in a run's id only when eval_items is set).
TRAIN_ONLY = ("eval_items", "metric")


def floor_spec(params: dict) -> dict:
    """The generation floors' part of the floor spec: the zero-shot base model prompted with the
    runs' template and settings (the evaluation scores every floor by the runs' metric), the
    base as the runs hold theirs (train.base_quantization) and the few-shot floor's examples
    (campaign.seed for a seeded draw)."""
    from campaign.plan import generating_keys, with_special_tokens

    model = with_special_tokens(params["model"], params)
    keys = generating_keys(model)
    if keys.get("generation"):  # what only training reads (the judged curve) is no floor's
        keys["generation"] = {k: v for k, v in keys["generation"].items() if k not in TRAIN_ONLY}
        if not keys["generation"]:
            del keys["generation"]
    out = {"model": {"task": model["task"], "source": model["source"], **keys}}
    named = params["evaluation"]["floor"]
    method = params["train"].get("base_quantization")
    if method is not None and set(floors.PROMPTED) & set(named):
        out["base_quantization"] = method
    if "few_shot" in named:
        few_shot = dict(params["evaluation"].get("few_shot") or {})
        if few_shot.get("choose") == "seeded":
            few_shot["seed"] = params["campaign"]["seed"]
        out["few_shot"] = few_shot
    return out


def floor_stage(spec: dict, inputs: dict, folder: Path, root: Path, timings) -> None:
    """The floors of a generation campaign (evaluation.floor: retrieval, zero_shot, few_shot;
    floor.py and few_shot.py), each generated on validation and test into
    folder/<floor>/predictions_<split>.parquet with the runs' columns (the evaluation scores
    them). The prompted floors use the pretrained base as the runs hold it (base_model),
    prompted with the runs' template and decoded by the runs' engine and settings."""
    talks = read_conversations(inputs["train"], "train")
    train = floors.EvalSet(talks.ids, talks.messages)
    evals = {}
    for split in ("validation", "test"):
        talks = read_conversations(inputs[split], split)
        evals[split] = floors.EvalSet(talks.ids, talks.messages)
    prompted = [f for f in floors.PROMPTED if f in spec["floors"]]
    base, skipped = None, {}
    if prompted and not inputs.get("base_model"):
        skipped = dict.fromkeys(prompted, FROM_CONFIG_SKIPPED)
    elif prompted:
        base = base_model(spec, Path(inputs["base_model"][0]), root)
        shown = {**evals, "train": train} if "few_shot" in prompted else evals
        _check_control_tokens(base, spec["model"], shown)
    zero_shot = base if "zero_shot" in prompted else None
    frames = floors.generation_floors(train.conversations, evals, zero_shot, timings)
    if base is not None and "few_shot" in prompted:
        frames["few_shot"] = few_shot_floor(
            base, train, evals, FewShot.of(spec["few_shot"]), timings
        )
    frames = {name: f for name, f in frames.items() if name in spec["floors"]}
    record_tokens(timings, frames, base)
    outputs = {}
    for name in frames:
        (folder / name).mkdir(parents=True)
        for split in evals:
            outputs[f"{name}_{split}"] = folder / name / f"predictions_{split}.parquet"
    floors.write_floors(frames, outputs)
    for name, reason in skipped.items():
        (folder / name).mkdir(parents=True)
        (folder / name / "SKIPPED.txt").write_text(reason + "\n", encoding="utf-8")


def record_tokens(timings, frames: dict, base) -> None:
    """Each prompted floor's tokens beside its timings (floor_timings.json), what a request
    costs to serve: per split, `prompt_tokens` and `new_tokens` (the sums over its items, from
    its frame's columns), and the floor's `device` (the base model's, where the timings were
    measured). A floor without those columns (retrieval: a lookup, no model) gets none."""
    for name, by_split in frames.items():
        timed = timings.floors.get(f"floor/{name}")
        if timed is None:
            continue
        for split, frame in by_split.items():
            if {"prompt_tokens", "new_tokens"} <= set(frame.columns) and split in timed["predict"]:
                timed["predict"][split] |= {
                    "prompt_tokens": int(frame["prompt_tokens"].sum()),
                    "new_tokens": int(frame["new_tokens"].sum()),
                }
        if base is not None and any("new_tokens" in p for p in timed["predict"].values()):
            timed["device"] = str(next(base.model.parameters()).device.type)


def _check_control_tokens(base, model_spec: dict, splits: dict) -> None:
    """The prompts the base model sees spell no control token (data.special_tokens: refuse),
    as the runs' training and scoring refuse them."""
    for name, e in splits.items():
        where = [f"{name} record {i}" for i in e.ids]
        talks = list(zip(where, e.conversations, strict=True))
        check_special_tokens(base.tokenizer, talks, special_tokens_policy(model_spec))


def base_model(spec: dict, source: Path, root: Path):
    """The untuned pretrained model as the runs hold their base before training (a
    floor.BaseModel): fp32, with the linear weights train.base_quantization gives the runs'
    frozen base (spec["base_quantization"]), on the device the runs' jobs select
    (campaign.train.select_device, after a card is leased as a training job leases one); with
    the runs' template and generation settings."""
    import torch
    import transformers as tf

    from campaign.train import lease_from_env, load_tokenizer, select_device

    lease_from_env()  # a card by lock, like a training job; before anything touches CUDA
    device = select_device()
    tok = load_tokenizer(source, "generation")
    run = setup(spec["model"], tok, root)
    model = tf.AutoModelForCausalLM.from_pretrained(str(source), dtype=torch.float32)
    model = runs_base(model, spec.get("base_quantization"), device.type).to(device).eval()
    return BaseModel(
        model=model,
        tokenizer=tok,
        prompt_ids=lambda talk: prompt_ids(tok, run.template, talk, run.escape),
        max_new_tokens=run.max_new_tokens,
        batch_size=run.batch_size,
        eos_token_ids=eos_token_ids(tok, model),
        max_positions=getattr(model.config, "max_position_embeddings", None),
    )
