"""A peft adapter a command (train.command) wrote to its output folder, made the campaign's own
adapter folder (models.save_adapter's layout) so that every reader scores it merged into the run's
base. A classifier's adapter must carry its trained head: the base has none for the run's labels,
so a reader would draw a fresh one and score random predictions as the run's.
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


def adopt_adapter(folder: Path, base: Path | None, labels: list[str], task: str) -> None:
    """A peft adapter the command wrote, made a campaign adapter folder: its base is the run
    spec's model source, named by content hash in BASE_FILE, which every reader (scoring,
    quantize, evaluate) checks before merging. The base the adapter names
    (base_model_name_or_path) must be that folder or absent: the campaign has no other base, and
    the path is cleared so the folder holds no machine's path. The model class is the run spec's
    task's (the adapter's task_type is the script's say, not the campaign's)."""
    from campaign.core.hashing import hash_tree
    from campaign.train.models import ADAPTER_CONFIG, BASE_FILE

    if not is_adapter(folder):
        return
    if base is None:
        raise CampaignError(
            "train.command: output_dir holds a peft adapter over a from_config model, which "
            "has no base folder to score it on; save the merged model (merge_and_unload)"
        )
    path = folder / ADAPTER_CONFIG
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
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
    kind = "sequence_classification" if task == "sequence_classification" else "causal_lm"
    if kind == "sequence_classification":
        check_head(folder, base, labels, config)
    config["base_model_name_or_path"] = None  # the base is named by its hash, not a path
    info = {"base_hash": hash_tree(base), "base_quantization": None, "labels": list(labels),
            "task": kind}  # fmt: skip
    atomic_write_text(path, json.dumps(config, indent=2, sort_keys=True) + "\n")
    atomic_write_text(folder / BASE_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")


def head_parameters(base: Path, labels: list[str]) -> list[str]:
    """The parameter names of the classification head a reader adds to `base` for `labels`:
    those of the sequence classifier outside its encoder (base_model_prefix), found on the meta
    device from the base's config alone (classifier.* for BERT, score.* for a decoder,
    pre_classifier.* too for DistilBERT)."""
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
    return [name for name, _ in model.named_parameters() if not name.startswith(encoder)]


def adapter_tensors(folder: Path) -> set[str]:
    """The tensor names an adapter's weights file holds, less peft's prefix."""
    path = folder / ADAPTER_WEIGHTS[0]
    if path.is_file():
        from safetensors import safe_open

        with safe_open(str(path), "pt") as f:
            names = set(f.keys())
    else:
        import torch

        names = set(torch.load(folder / ADAPTER_WEIGHTS[1], map_location="cpu", weights_only=True))
    return {n.removeprefix(PEFT_PREFIX) for n in names}


def check_head(folder: Path, base: Path, labels: list[str], config: dict) -> None:
    """A classifier's adapter must hold every tensor of its head, or be refused in one line:
    merged into the base, a headless adapter scores with a freshly drawn head."""
    missing = sorted(set(head_parameters(base, labels)) - adapter_tensors(folder))
    if missing:
        saved = config.get("modules_to_save") or "empty"
        raise CampaignError(
            f"train.command: the peft adapter in {folder} holds no trained classification head "
            f"(modules_to_save {saved}; missing {', '.join(missing)}), so it would be scored "
            "with a freshly drawn one; train it with peft's task_type SEQ_CLS or "
            'modules_to_save=["classifier"] (["score"] for a decoder), or save the merged model'
        )
