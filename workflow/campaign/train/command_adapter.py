"""A peft adapter a command (train.command) wrote to its output folder, made the campaign's own
adapter folder (models.save_adapter's layout) so that every reader scores it merged into the run's
base. A classifier's head must come from the adapter or from the base's own weights: any module
of it in neither is drawn afresh when a reader merges the adapter, and the model scored is not the
one the command trained.
"""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.fsutil import atomic_write_text

# What save_pretrained of a PeftModel writes as the adapter's weights.
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
# The prefix of every tensor name in a saved adapter (peft's PeftModel.base_model.model).
PEFT_PREFIX = "base_model.model."


def is_adapter(folder: Path) -> bool:
    """A peft adapter folder (save_pretrained of a PeftModel): its config and weights."""
    from campaign.train.models import ADAPTER_CONFIG

    return (folder / ADAPTER_CONFIG).is_file() and any(
        (folder / name).is_file() for name in ADAPTER_WEIGHTS
    )


def check_adapter(folder: Path, base: Path | None, labels: list[str], task: str) -> dict | None:
    """What a training job checks of a peft adapter the command wrote, before adopting it (the
    preflight's command check calls it too, so a broken adapter fails there by name): its base
    (base_model_name_or_path) is the run spec's model source or absent (the campaign has no other
    base), and a classifier's head is in it or in that base (check_head). The task is the run
    spec's (the adapter's task_type is the script's say, not the campaign's). Returns the
    adapter's config, or None when the folder holds no adapter."""
    from campaign.train.models import ADAPTER_CONFIG

    if not is_adapter(folder):
        return None
    if base is None:
        raise CampaignError(
            "train.command: output_dir holds a peft adapter over a from_config model, which "
            "has no base folder to score it on; save the merged model (merge_and_unload)"
        )
    try:
        config = json.loads((folder / ADAPTER_CONFIG).read_text(encoding="utf-8"))
    except ValueError as e:
        raise CampaignError(
            f"train.command: output_dir's {ADAPTER_CONFIG} is not JSON ({e})"
        ) from None
    named = config.get("base_model_name_or_path")
    if named and Path(named).resolve() != Path(base).resolve():
        raise CampaignError(
            f"train.command: the peft adapter in output_dir names base {named!r}, not the run "
            f"spec's model source {str(Path(base).resolve())!r}; train the adapter on that"
        )
    if task == "sequence_classification":
        check_head(folder, base, labels, config)
    return config


def adopt_adapter(folder: Path, base: Path | None, labels: list[str], task: str) -> None:
    """A peft adapter the command wrote (checked by check_adapter), made a campaign adapter
    folder: its base is the run spec's model source, named by content hash in BASE_FILE, which
    every reader (scoring, quantize, evaluate) checks before merging; the path the adapter names
    is cleared so the folder holds no machine's path."""
    from campaign.core.hashing import hash_tree
    from campaign.train.models import ADAPTER_CONFIG, BASE_FILE

    config = check_adapter(folder, base, labels, task)
    if config is None:
        return
    kind = "sequence_classification" if task == "sequence_classification" else "causal_lm"
    config["base_model_name_or_path"] = None  # the base is named by its hash, not a path
    info = {"base_hash": hash_tree(base), "base_quantization": None, "labels": list(labels),
            "task": kind}  # fmt: skip
    atomic_write_text(folder / ADAPTER_CONFIG, json.dumps(config, indent=2, sort_keys=True) + "\n")
    atomic_write_text(folder / BASE_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")


def head_shapes(base: Path, labels: list[str]) -> dict[str, tuple[int, ...]]:
    """The tensors of the classification head a reader puts on `base` for `labels`, name ->
    shape: the sequence classifier's parameters outside its encoder (base_model_prefix), made on
    the meta device from the base's config alone (classifier.* for BERT, score.* for a decoder,
    pre_classifier.* too for DistilBERT, pooler.* too for DeBERTa), in the model's order."""
    import torch
    import transformers as tf

    try:
        config = tf.AutoConfig.from_pretrained(str(base), num_labels=len(labels))
        with torch.device("meta"):
            model = tf.AutoModelForSequenceClassification.from_config(config)
    except Exception as e:  # whatever transformers says of a base it cannot make a classifier of
        raise CampaignError(
            f"train.command: the run's base {base} makes no sequence classifier "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    encoder = f"{model.base_model_prefix}."
    return {
        name: tuple(p.shape) for name, p in model.named_parameters() if not name.startswith(encoder)
    }


def adapter_tensors(folder: Path) -> set[str]:
    """The tensor names an adapter's weights file holds, less peft's prefix."""
    path = folder / ADAPTER_WEIGHTS[0]
    if path.is_file():
        from campaign.train.models import safetensors_header

        names = set(safetensors_header(path)) - {"__metadata__"}
    else:
        import torch

        names = set(torch.load(folder / ADAPTER_WEIGHTS[1], map_location="cpu", weights_only=True))
    return {n.removeprefix(PEFT_PREFIX) for n in names}


def _modules(names) -> list[str]:
    """The head's top modules that hold `names` (pooler for pooler.dense.weight), in order:
    what peft's modules_to_save names."""
    return list(dict.fromkeys(name.split(".")[0] for name in names))


def check_head(folder: Path, base: Path, labels: list[str], config: dict) -> None:
    """Every tensor of a classifier's head must come from the adapter or from the base's own
    weights (a base saved with a trained head for as many labels); any other is freshly drawn
    when the adapter is merged into the base for scoring, so the scored model is not the one the
    command trained: refused in one line naming the modules and the modules_to_save to set."""
    from campaign.train.models import weight_shapes

    head = head_shapes(base, labels)
    held = weight_shapes(base) or {}
    from_base = {name for name, shape in head.items() if held.get(name) == shape}
    saved = adapter_tensors(folder)
    missing = [name for name in head if name not in saved and name not in from_base]
    if not missing:
        return
    needed = _modules(name for name in head if name not in from_base)
    listed = config.get("modules_to_save") or "empty"
    raise CampaignError(
        f"train.command: the peft adapter in {folder} lacks the classification head's "
        f"{', '.join(_modules(missing))} (modules_to_save {listed}), and the base {base} holds "
        f"no trained one for {len(labels)} labels, so it would be scored with a freshly drawn "
        f"one; set modules_to_save={json.dumps(needed)} in its LoraConfig, or save the merged "
        "model"
    )
