"""A peft adapter a command (train.command) wrote to its output folder, made the campaign's own
adapter folder (models.save_adapter's layout) so that every reader scores it merged into the run's
base. A classifier's head must come from the adapter or from the base's own weights: any module
of it in neither is drawn afresh when a reader merges the adapter, and the model scored is not the
one the command trained.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Held:
    """A base's weights, read from their headers: tensor name -> shape, and the top modules
    (under the encoder, or the model's own) that hold any of them."""

    shapes: dict[str, tuple[int, ...]]
    modules: frozenset[str]


@dataclass(frozen=True)
class Classifier:
    """The sequence classifier a reader puts on the run's base for its labels, made on the meta
    device from the base's config alone (no weight is read): what each of its parameters must be
    loaded from when an adapter is merged into it."""

    prefix: str  # base_model_prefix: "bert." for BERT; a bare-encoder checkpoint lacks it
    shapes: dict[str, tuple[int, ...]]  # every parameter, name -> shape, in the model's order
    modules: tuple[str, ...]  # every module's name (what peft's modules_to_save is matched on)

    def module_of(self, name: str) -> str:
        """The module under the encoder or the model that holds a parameter (pooler for
        bert.pooler.dense.weight, classifier for classifier.weight): what modules_to_save names
        (peft matches a module name's suffix, so "pooler" finds bert.pooler)."""
        return name.removeprefix(self.prefix).split(".")[0]

    def held(self, weights: dict[str, tuple[int, ...]]) -> Held:
        """What the base's weights (name -> shape) give this classifier."""
        return Held(weights, frozenset(self.module_of(name) for name in weights))

    def in_base(self, name: str, held: Held) -> bool:
        """Whether the base's weights hold this parameter: the head's (outside the encoder)
        under its own name with its shape; the encoder's under its name or (a bare-encoder
        checkpoint, as a hub's is) without the encoder's prefix, or else its module at all.
        transformers renames or fuses some checkpoints' encoder tensors when it loads them
        (a legacy LayerNorm.gamma, a mixture's per-expert weights), so those cannot be matched
        name by name; a module saved not at all (a masked LM's pooler) is what it draws
        afresh."""
        shape = self.shapes[name]
        if held.shapes.get(name) == shape:
            return True
        if not name.startswith(self.prefix):
            return False
        return (
            held.shapes.get(name.removeprefix(self.prefix)) == shape
            or self.module_of(name) in held.modules
        )

    def wrapped(self, modules_to_save: list[str]) -> list[str]:
        """The parameters peft's modules_to_save wraps (the outermost modules whose name ends
        with one of its entries, as peft matches them): peft loads these from the adapter's
        weights file alone, whatever the base holds."""
        keys = [k for k in modules_to_save if k]
        tops: list[str] = []
        for module in self.modules:
            if module and any(module.endswith(k) for k in keys):
                if not any(module.startswith(f"{top}.") for top in tops):
                    tops.append(module)
        return [n for n in self.shapes if any(n.startswith(f"{top}.") for top in tops)]


def classifier(base: Path, labels: list[str]) -> Classifier:
    """The sequence classifier for `labels` on `base` (classifier.* for BERT, score.* for a
    decoder, pre_classifier.* too for DistilBERT, pooler.* too for DeBERTa and BERT), made on the
    meta device: its parameters' names and shapes without a weight drawn or read."""
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
    return Classifier(
        prefix=f"{model.base_model_prefix}.",
        shapes={name: tuple(p.shape) for name, p in model.named_parameters()},
        modules=tuple(name for name, _ in model.named_modules()),
    )


def adapter_shapes(folder: Path) -> dict[str, tuple[int, ...]]:
    """The tensors an adapter's weights file holds, name (less peft's prefix) -> shape: the
    safetensors header, else the .bin (an adapter is small: loaded whole)."""
    path = folder / ADAPTER_WEIGHTS[0]
    if path.is_file():
        from campaign.train.models import safetensors_header

        header = safetensors_header(path)
        shapes = {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    else:
        import torch

        state = torch.load(folder / ADAPTER_WEIGHTS[1], map_location="cpu", weights_only=True)
        shapes = {k: tuple(v.shape) for k, v in state.items()}
    return {name.removeprefix(PEFT_PREFIX): shape for name, shape in shapes.items()}


def modules_to_save(config: dict) -> list[str]:
    """What peft wraps and loads from the adapter file alone: the config's modules_to_save, and
    for task_type SEQ_CLS the classifier and score peft's sequence classifier adds itself."""
    listed = list(config.get("modules_to_save") or [])
    if config.get("task_type") == "SEQ_CLS":
        listed += [m for m in ("classifier", "score") if m not in listed]
    return listed


def check_head(folder: Path, base: Path, labels: list[str], config: dict) -> None:
    """Every parameter of the classifier a reader scores must come from the adapter or from the
    base's own weights, or it is freshly drawn when the adapter is merged and the scored model is
    not the one the command trained. The adapter's copy must have the shape the run's labels
    need (else scoring crashes after the whole run), and a module modules_to_save wraps must be
    in the adapter's file whatever the base holds (peft reads it from there alone). Each refused
    in one line naming the tensors or modules and what to set."""
    from campaign.train.models import weight_shapes

    model = classifier(base, labels)
    saved = adapter_shapes(folder)
    # The head's (outside the encoder: what the labels size): an encoder tensor the command
    # resized (embeddings for added tokens) is the reader's to resize, not refused here.
    for name, want in model.shapes.items():
        shape = saved.get(name)
        if shape is not None and shape != want and not name.startswith(model.prefix):
            raise CampaignError(
                f"train.command: the peft adapter in {folder} holds {name} of shape "
                f"{list(shape)}, but the run's {len(labels)} labels need {list(want)}; train "
                f"it with num_labels={len(labels)}"
            )
    held = model.held(weight_shapes(base) or {})
    wrapped = set(model.wrapped(modules_to_save(config)))
    lacking = [n for n in model.shapes
               if n not in saved and (n in wrapped or not model.in_base(n, held))]  # fmt: skip
    if not lacking:
        return
    listed = config.get("modules_to_save") or "empty"
    modules = ", ".join(dict.fromkeys(map(model.module_of, lacking)))
    if all(model.in_base(n, held) for n in lacking):
        raise CampaignError(
            f"train.command: the peft adapter in {folder} names {modules} in modules_to_save "
            f"{listed} (or task_type SEQ_CLS does) but its weights file lacks them; peft loads "
            "them from that file alone (a KeyError, or the base's untrained copy scored), so "
            "save the adapter with PeftModel.save_pretrained, or save the merged model"
        )
    needed = list(dict.fromkeys(model.module_of(n) for n in model.shapes
                                if n in wrapped or not model.in_base(n, held)))  # fmt: skip
    raise CampaignError(
        f"train.command: the peft adapter in {folder} lacks the classification head's "
        f"{modules} (modules_to_save {listed}), and the base {base} holds no trained one for "
        f"{len(labels)} labels, so it would be scored with a freshly drawn one; set "
        f"modules_to_save={json.dumps(needed)} in its LoraConfig, or save the merged model"
    )
