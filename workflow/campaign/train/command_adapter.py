"""A peft adapter a command (train.command) wrote to its output folder, made the campaign's own
adapter folder (models.save_adapter's layout) so that every reader scores it merged into the run's
base. Every parameter of the model scored (a classifier's head above all) must come from the
adapter or from the base's own weights, as transformers reports loading the base: any in neither
is drawn afresh when a reader merges the adapter, and the model scored is not the one the command
trained.
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
    base), and every parameter the scored model needs is in it or in that base (check_weights).
    The task is the run spec's (the adapter's task_type is the script's say, not the campaign's).
    Returns the adapter's config, or None when the folder holds no adapter."""
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
    check_weights(folder, base, labels, config, task)
    return config


def adopt_adapter(folder: Path, base: Path | None, labels: list[str], task: str) -> None:
    """A peft adapter the command wrote (checked by check_adapter), made a campaign adapter
    folder: its base is the run spec's model source, named by content hash in BASE_FILE, which
    every reader (scoring, quantize, evaluate) checks before merging; the path the adapter names
    is cleared so the folder holds no machine's path."""
    from campaign.core.hashing import hash_tree
    from campaign.core.tasks import module_of
    from campaign.train.models import ADAPTER_CONFIG, BASE_FILE, head_task

    config = check_adapter(folder, base, labels, task)
    if config is None:
        return
    kind = head_task(module_of(task).lora_task_type())
    config["base_model_name_or_path"] = None  # the base is named by its hash, not a path
    info = {"base_hash": hash_tree(base), "base_quantization": None, "labels": list(labels),
            "task": kind}  # fmt: skip
    atomic_write_text(folder / ADAPTER_CONFIG, json.dumps(config, indent=2, sort_keys=True) + "\n")
    atomic_write_text(folder / BASE_FILE, json.dumps(info, indent=2, sort_keys=True) + "\n")


@dataclass(frozen=True)
class Reader:
    """The model a reader merges the adapter into (models._pretrained's own from_pretrained of
    the run's base, made on the meta device: nothing stays in memory, though transformers reads
    a safetensors base's tensors from disk once on the way there): its parameters, its
    modules, and the parameters the base's weights do not give it, as transformers itself reports
    them on loading (missing, or of another shape): those it draws afresh. transformers' own
    report covers what a name-by-name match cannot: legacy and fused tensor names it renames on
    load, tied weights, a bare-encoder checkpoint without the model's prefix."""

    prefix: str  # base_model_prefix: "bert." for BERT, "model." for Llama
    shapes: dict[str, tuple[int, ...]]  # every parameter, name -> shape, in the model's order
    modules: tuple[str, ...]  # every module's name (what peft's modules_to_save is matched on)
    fresh: frozenset[str]  # the parameters the base does not give: drawn afresh on loading
    linear: frozenset[str] = frozenset()  # nn.Linear modules: weight [out, in]
    embedding: frozenset[str] = frozenset()  # nn.Embedding modules: weight [count, dim]

    def module_of(self, name: str) -> str:
        """The module under the encoder or the model that holds a parameter (pooler for
        bert.pooler.dense.weight, classifier for classifier.weight): what modules_to_save names
        (peft matches a module name's suffix, so "pooler" finds bert.pooler)."""
        return name.removeprefix(self.prefix).split(".")[0]

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


def reader(base: Path, labels: list[str], task: str) -> Reader:
    """The model a reader makes of `base` for the task (its model_class; a sequence classifier
    for `labels`, a causal LM), loaded as models._pretrained loads it but on the meta device,
    with transformers' loading report."""
    import torch
    import transformers as tf

    from campaign.core.tasks import module_of
    from campaign.train.models import pretrained_options

    auto = module_of(task).model_class()
    extra = pretrained_options(task, labels)
    verbosity, bars = tf.logging.get_verbosity(), tf.logging.is_progress_bar_enabled()
    tf.logging.set_verbosity_error()  # its loading report is ours to word, not the log's
    tf.logging.disable_progress_bar()
    try:
        model, info = auto.from_pretrained(str(base), dtype=torch.float32, device_map="meta",
                                           output_loading_info=True, **extra)  # fmt: skip
    except Exception as e:  # whatever transformers says of a base it cannot make this model of
        raise CampaignError(
            f"train.command: the run's base {base} makes no {module_of(task).model_noun} "
            f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
        ) from None
    finally:
        tf.logging.set_verbosity(verbosity)
        if bars:
            tf.logging.enable_progress_bar()
    # Every name a tied parameter has (a tied lm_head is a module modules_to_save may wrap).
    shapes = {name: tuple(p.shape) for name, p in model.named_parameters(remove_duplicate=False)}
    kinds = {name: type(m) for name, m in model.named_modules()}
    drawn = set(info.get("missing_keys") or ()) | {
        entry[0] for entry in info.get("mismatched_keys") or ()
    }
    return Reader(
        prefix=f"{model.base_model_prefix}.",
        shapes=shapes,
        modules=tuple(kinds),
        fresh=frozenset(drawn & set(shapes)),
        linear=frozenset(n for n, k in kinds.items() if issubclass(k, torch.nn.Linear)),
        embedding=frozenset(n for n, k in kinds.items() if issubclass(k, torch.nn.Embedding)),
    )


def adapter_shapes(folder: Path) -> tuple[Path, dict[str, tuple[int, ...]]]:
    """The adapter's weights file and the tensors it holds, name -> shape, as saved (with peft's
    prefix): the safetensors header, else the .bin (an adapter is small: loaded whole)."""
    path = folder / ADAPTER_WEIGHTS[0]
    if path.is_file():
        from campaign.train.models import safetensors_header

        header = safetensors_header(path)
        return path, {k: tuple(v["shape"]) for k, v in header.items() if k != "__metadata__"}
    import torch

    path = folder / ADAPTER_WEIGHTS[1]
    state = torch.load(path, map_location="cpu", weights_only=True)
    return path, {k: tuple(v.shape) for k, v in state.items()}


def modules_to_save(config: dict) -> list[str]:
    """What peft wraps and loads from the adapter file alone: the config's modules_to_save, and
    for task_type SEQ_CLS the classifier and score peft's sequence classifier adds itself."""
    listed = list(config.get("modules_to_save") or [])
    if config.get("task_type") == "SEQ_CLS":
        listed += [m for m in ("classifier", "score") if m not in listed]
    return listed


# peft types that learn prompts, not weights: their files hold the prompt and, for a classifier,
# the head under base_model. (no model. below it), and no tensor under peft's usual prefix.
PROMPT_LEARNING = ("PROMPT_TUNING", "P_TUNING", "PREFIX_TUNING", "MULTITASK_PROMPT_TUNING", "CPT")


def saved_names(path: Path, raw: dict[str, tuple[int, ...]], config: dict) -> dict:
    """The adapter file's tensors under the scored model's names (peft's prefix and a wrapped
    layer's base_layer taken out), after refusing names peft would load nothing from (it only
    warns) and a LoRA file with no LoRA tensor (it would score the base)."""
    kind = str(config.get("peft_type", "LORA")).upper()
    if kind in PROMPT_LEARNING:
        return {name.removeprefix("base_model."): shape for name, shape in raw.items()}
    stray = [name for name in raw if not name.startswith(PEFT_PREFIX)]
    if stray:
        raise CampaignError(
            f"train.command: {path} holds {stray[0]}"
            f"{f' and {len(stray) - 1} more tensors' if len(stray) > 1 else ''} outside "
            f"peft's {PEFT_PREFIX!r} names, which PeftModel.from_pretrained loads nothing "
            "from; save the adapter with PeftModel.save_pretrained, or the merged model"
        )
    if kind == "LORA" and not any(".lora_" in name for name in raw):
        raise CampaignError(
            f"train.command: {path} holds no LoRA tensor (lora_A/lora_B) though its "
            "adapter_config.json says peft_type LORA; save the adapter with "
            "PeftModel.save_pretrained, or the merged model"
        )
    return {
        name.removeprefix(PEFT_PREFIX).replace(".base_layer.", "."): shape
        for name, shape in raw.items()
    }


def lora_fits(name: str, shape: tuple[int, ...], model: Reader) -> tuple[str, tuple] | None:
    """A LoRA tensor's shape against the base module it adapts (embeddings: lora_embedding_A
    [r, count], lora_embedding_B [dim, r]; a Linear: lora_A [r, in], lora_B [out, r]): None when
    it fits, else the module's weight name and shape (a module resized for added tokens)."""
    module, _, part = name.partition(".lora_")
    weight = f"{module}.weight"
    want = model.shapes.get(weight)
    if want is None or len(want) != 2 or len(shape) != 2:
        return None
    if module in model.embedding:
        axes = {"embedding_A": (1, 0), "embedding_B": (0, 1)}
    elif module in model.linear:
        axes = {"A.weight": (1, 1), "B.weight": (0, 0)}
    else:
        return None
    mine, theirs = axes.get(part, (None, None))
    if mine is None or shape[mine] == want[theirs]:
        return None
    return weight, want


def check_shapes(path: Path, saved: dict, model: Reader, labels: list[str], task: str) -> None:
    """Each tensor of the adapter file of the scored model's shape (a head for other labels, or
    embeddings resized for added tokens, would crash scoring after the whole run)."""
    from campaign.core.tasks import module_of

    label_head = module_of(task).label_head
    for name, want in model.shapes.items():
        shape = saved.get(name)
        if shape is None or shape == want:
            continue
        if label_head and not name.startswith(model.prefix):
            raise CampaignError(  # the head: what the labels size
                f"train.command: {path} holds {name} of shape {list(shape)}, but the run's "
                f"{len(labels)} labels need {list(want)}; train it with num_labels={len(labels)}"
            )
        raise CampaignError(
            f"train.command: {path} holds {name} of shape {list(shape)}, but the run's base "
            f"has {list(want)} (embeddings resized for added tokens?); the campaign merges the "
            "adapter into the base as it is, so save the merged model with its tokenizer"
        )
    for name, shape in saved.items():
        misfit = lora_fits(name, shape, model) if ".lora_" in name else None
        if misfit is not None:
            raise CampaignError(
                f"train.command: {path} holds {name} of shape {list(shape)}, which does not fit "
                f"the run's base's {misfit[0]} of shape {list(misfit[1])} (resized for added "
                "tokens?); the campaign merges the adapter into the base as it is, so save the "
                "merged model with its tokenizer"
            )


def check_weights(folder: Path, base: Path, labels: list[str], config: dict, task: str) -> None:
    """Every parameter of the model a reader scores must come from the adapter or from the base's
    own weights, or it is freshly drawn when the adapter is merged and the scored model is not the
    one the command trained. The adapter file's names must be ones peft loads (saved_names), its
    tensors of the scored model's shapes (check_shapes), and a module modules_to_save wraps in
    that file whatever the base holds (peft reads it from there alone). Each refused in one line
    naming the file and the tensors or modules, and what to do."""
    path, raw = adapter_shapes(folder)
    saved = saved_names(path, raw, config)
    model = reader(base, labels, task)
    check_shapes(path, saved, model, labels, task)
    wrapped = set(model.wrapped(modules_to_save(config)))
    lacking = [n for n in model.shapes if n not in saved and (n in wrapped or n in model.fresh)]
    if not lacking:
        return
    listed = config.get("modules_to_save") or "empty"
    modules = ", ".join(dict.fromkeys(map(model.module_of, lacking)))
    if not any(n in model.fresh for n in lacking):
        also = " (or task_type SEQ_CLS does)" if config.get("task_type") == "SEQ_CLS" else ""
        raise CampaignError(
            f"train.command: the peft adapter in {folder} names {modules} in modules_to_save "
            f"{listed}{also} but {path.name} lacks them; peft loads "
            "them from that file alone (a KeyError, or the base's untrained copy scored), so "
            "save the adapter with PeftModel.save_pretrained, or save the merged model"
        )
    needed = list(dict.fromkeys(model.module_of(n) for n in model.shapes
                                if n in wrapped or n in model.fresh))  # fmt: skip
    from campaign.core.tasks import module_of

    head = module_of(task).label_head and not any(n.startswith(model.prefix) for n in lacking)
    what = f"the classification head's {modules}" if head else modules
    raise CampaignError(
        f"train.command: the peft adapter in {folder} lacks {what} (modules_to_save {listed}), "
        f"and the base {base} holds no trained one"
        f"{f' for {len(labels)} labels' if head else ''}, so it would be scored with a "
        f"freshly drawn one; set modules_to_save={json.dumps(needed)} in its LoraConfig, or "
        "save the merged model"
    )
