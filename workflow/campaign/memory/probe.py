"""Memory of any architecture, measured: what a training step and an evaluation batch hold at two
micro-batch sizes, extrapolated linearly to the recipe's micro_batch.

For a model with no analytic memory model (not BERT or GPT-2: a pretrained RoBERTa, Llama,
Mistral, ...) the estimate is built from real passes on the model itself:
    weights, gradients, optimizer_state   exact tensor bytes of the model as a run builds it
                                          (`parameter_bytes`; on the meta device for the full
                                          label set, `meta_parameter_bytes`)
    activations(b)     = fixed + per_example * b, from the peak bytes of a forward + backward at
                         b = PROBE_BATCHES (`step_peak`: every tensor but the final gradients)
    evaluation(b)      the same for scoring b examples without gradients (`eval_peak`; a causal LM
                         scores n_labels sequences per example)
    kv_cache(b)        a causal LM's generation cache, measured at the same sizes
Tensor bytes are exact, so on the CPU the probe gives the same numbers on every run. Measured on
the CPU, an estimate for a CUDA card is high rather than low: CPU dropout masks are float (bool on
CUDA) and CPU attention with dropout keeps the s x s probabilities (CUDA's fused kernels do not).
"""

from __future__ import annotations

import contextlib
import copy
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.tasks import module_of
from campaign.memory.estimate import MemoryEstimate
from campaign.memory.measure import eval_peak, measure_kv_cache, parameter_bytes, step_peak
from campaign.memory.shape import head_of

PROBE_BATCHES = (2, 4)  # b = 1 can take other code paths (no padding, squeezed shapes)
# The heads a task model adds (peft trains a copy of them for sequence classification).
HEAD_NAMES = ("classifier", "score", "lm_head", "qa_outputs", "pooler")

MEASURED_ASSUMPTIONS = (
    "weights, gradients and AdamW state: exact tensor bytes of the model as a run builds it",
    "activations: the peak tensor bytes of one forward + backward (every example padded to "
    "max_length), measured at two micro-batch sizes and extrapolated linearly",
    "evaluation: the peak tensor bytes of one scoring batch without gradients, measured and "
    "extrapolated the same way",
    "kv_cache (causal_lm): the cache of one forward over micro_batch sequences, measured; "
    "for generation, over model.generation.batch_size sequences of the longest formatted "
    "prompt of validation and test plus max_new_tokens",
    "generate (model.task generation): the weights, the KV cache and the AdamW state, which "
    "the training process still holds while it generates validation and test",
    "measured on the device the preflight runs on; on the CPU an estimate for CUDA is high "
    "(float dropout masks, attention probabilities kept with dropout)",
    "not counted: CUDA context and kernels, allocator rounding and fragmentation, kernel "
    "workspaces; the fit table's margin is for those",
)


# ------------------------------------------------------------------ extrapolation
def linear_fit(sizes: Sequence[int], values: Sequence[int]) -> dict[str, int]:
    """{per_example, fixed}: the line through two measurements (bytes at two batch sizes).

    per_example is rounded up to whole bytes (and never below 0), and the line passes through
    the larger measurement, so extrapolating upwards never rounds down.
    """
    (b1, b2), (v1, v2) = sizes, values
    if not 0 < b1 < b2:
        raise CampaignError(f"probe batch sizes: expected 0 < b1 < b2, got {list(sizes)}")
    per = max(0, -(-(v2 - v1) // (b2 - b1)))
    return {"per_example": per, "fixed": v2 - per * b2}


def extrapolate(fit: dict[str, int], n: int) -> int:
    return fit["fixed"] + fit["per_example"] * n


# ------------------------------------------------------------------ the model under test
@dataclass
class Subject:
    """A real model and what the probe needs to run it as the campaign does.

    make_batch(n, length): n examples padded to `length` tokens, on the model's device.
    loss_fn(model, batch): the training loss; score_fn(model, batch): the evaluation scoring.
    autocast(precision): the forward's autocast context factory (None for fp32).
    parameters(lora): exact weight / gradient / optimizer bytes of the model a run builds (full
    label set), with LoRA `lora` applied (None: none). eval_sequences: sequences scored per
    example (n_labels for a causal LM, else 1).
    """

    model: Any
    task: str
    train_cfg: dict
    make_batch: Callable[[int, int], dict]
    loss_fn: Callable[[Any, dict], Any]
    score_fn: Callable[[Any, dict], Any]
    autocast: Callable[[str], Callable[[], contextlib.AbstractContextManager] | None]
    parameters: Callable[[dict | None], dict]
    eval_sequences: int = 1
    device: str = "cpu"
    sizes: tuple[int, int] = PROBE_BATCHES
    architecture: str = field(default="")
    # The cached positions of one generated sequence (prompt + new tokens) when the run
    # generates free text; None: max_length (a label-scoring causal LM's one forward).
    kv_length: int | None = None
    # The sequences generated together (model.generation.batch_size) when the run generates
    # free text; None: micro_batch, and no generation.
    kv_batch: int | None = None
    # Whether the run generates beside its optimizer state (campaign.train.
    # scores_beside_optimizer: the built-in loop's training process does; the campaign scoring
    # a train.command's model after the command has exited does not).
    optimizer_while_generating: bool = False


def probe_memory(subject: Subject, max_length: int, precision: str) -> dict[str, Any]:
    """Bytes at each probe batch size: training-step activations, evaluation, KV cache."""
    autocast = subject.autocast(precision)
    out: dict[str, Any] = {
        "batch_sizes": list(subject.sizes),
        "max_length": max_length,
        "precision": precision,
        "activations": [],
        "evaluation": [],
        "kv_cache": None,
    }
    for n in subject.sizes:
        batch = subject.make_batch(n, max_length)
        out["activations"].append(
            step_peak(subject.model, batch, subject.loss_fn, autocast)["activations"]
        )
        out["evaluation"].append(eval_peak(subject.model, batch, subject.score_fn, autocast))
    if head_of(subject.task) == "lm":
        cache = []
        for n in subject.sizes:
            batch = subject.make_batch(n, subject.kv_length or max_length)
            with autocast() if autocast is not None else contextlib.nullcontext():
                cache.append(
                    measure_kv_cache(subject.model, batch["input_ids"], batch["attention_mask"])
                )
        out["kv_cache"] = cache
    return out


def estimate_from_probe(
    probed: dict[str, Any],
    params: dict[str, int],
    train_cfg: dict,
    *,
    task: str,
    architecture: str,
    eval_sequences: int,
    device: str,
    gradient_checkpointing: bool = False,
    kv_batch: int | None = None,
    optimizer_while_generating: bool = False,
) -> dict[str, Any]:
    """The estimate (the same form as `estimate_memory`'s) from a probe and exact parameters.
    kv_batch: the sequences generated together (None: micro_batch); optimizer_while_generating:
    the generation runs in the training process, beside the AdamW state (MemoryEstimate)."""
    mb, sizes = int(train_cfg["micro_batch"]), probed["batch_sizes"]
    act = linear_fit(sizes, probed["activations"])
    ev = linear_fit(sizes, probed["evaluation"])
    kv = linear_fit(sizes, probed["kv_cache"]) if probed["kv_cache"] else None
    estimate = MemoryEstimate(
        weights=params["weights"],
        gradients=params["gradients"],
        optimizer_state=params["optimizer_state"],
        activations=extrapolate(act, mb),
        kv_cache=extrapolate(kv, kv_batch or mb) if kv else 0,
        activations_per_example=act["per_example"],
        kv_cache_per_example=kv["per_example"] if kv else 0,
        micro_batch=mb,
        # scoring mb examples = mb * eval_sequences sequences
        evaluation=extrapolate(ev, mb * eval_sequences),
        evaluation_per_example=ev["per_example"] * eval_sequences,
        kv_batch=kv_batch,
        optimizer_while_generating=optimizer_while_generating,
    )
    out = estimate.to_dict()
    out["source"] = "measured"
    out["model"] = {
        "architecture": architecture,
        "task": task,
        "n_params": params["n_params"],
        "n_trainable": params["n_trainable"],
        "trainable_tensors": params["trainable_tensors"],
        "lora": bool(train_cfg.get("lora")),
    }
    out["settings"] = {
        "micro_batch": mb,
        "grad_accum": int(train_cfg.get("grad_accum") or 1),
        # train.devices: every process holds the whole model, its gradients and optimizer state
        # and its own micro-batches (gradients are summed in place): the bytes above are per
        # card, and a run takes this many cards.
        "devices": int(train_key(train_cfg, "devices")),
        "seq_len": probed["max_length"],
        "precision": probed["precision"],
        "device": device,
        "gradient_checkpointing": gradient_checkpointing,
        "optimizer": train_key(train_cfg, "optimizer"),
        "eval_sequences_per_example": eval_sequences,
    }
    out["probe"] = {
        **probed,
        "fit": {"activations": act, "evaluation_per_sequence": ev, "kv_cache": kv},
    }
    out["assumptions"] = list(MEASURED_ASSUMPTIONS)
    return out


def measured_estimate(
    subject: Subject,
    train_cfg: dict | None = None,
    params: dict | None = None,
    gradient_checkpointing: bool = False,
) -> dict[str, Any]:
    """Probe `subject` under `train_cfg` (default: its own) and build the estimate."""
    cfg = subject.train_cfg if train_cfg is None else train_cfg
    probed = probe_memory(subject, int(cfg["max_length"]), cfg["precision"])
    return estimate_from_probe(
        probed,
        subject.parameters(cfg.get("lora") or None) if params is None else params,
        cfg,
        task=subject.task,
        architecture=subject.architecture,
        eval_sequences=subject.eval_sequences,
        device=subject.device,
        gradient_checkpointing=gradient_checkpointing,
        kv_batch=subject.kv_batch,
        optimizer_while_generating=subject.optimizer_while_generating,
    )


# ------------------------------------------------------------------ models, LoRA, meta counts
def _conv1d_types() -> tuple[type, ...]:
    import torch

    types: list[type] = [torch.nn.Linear]
    with contextlib.suppress(ImportError):
        from transformers.pytorch_utils import Conv1D

        types.append(Conv1D)
    return tuple(types)


def default_lora_targets(model: Any) -> list[str]:
    """LoRA targets for a model: the leaf names of the linear layers of its attention blocks.

    Names that also end a module outside the repeated blocks (e.g. RoBERTa's "dense", which
    its classifier head has too) are left out. Falls back to every linear leaf name in the
    blocks; [] when there is none.
    """
    linear = _conv1d_types()
    inside: dict[str, bool] = {}  # leaf name -> found in an attention block
    outside: set[str] = set()
    for name, module in model.named_modules():
        if not isinstance(module, linear) or not name:
            continue
        leaf = name.rsplit(".", 1)[-1]
        if re.search(r"\.\d+\.", name) and not name.startswith(HEAD_NAMES):
            attn = bool(re.search(r"attn|attention", name))
            inside[leaf] = inside.get(leaf, False) or attn
        else:
            outside.add(leaf)
    usable = {leaf: attn for leaf, attn in inside.items() if leaf not in outside}
    chosen = sorted(leaf for leaf, attn in usable.items() if attn) or sorted(usable)
    return chosen


def wrap_lora(model: Any, lora: dict, task: str) -> Any:
    """`model` with LoRA adapters, as the campaign's training builds it (peft, in place, with
    the task's TaskModule.lora_task_type)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=lora["r"],
        lora_alpha=lora.get("alpha", 2 * lora["r"]),
        lora_dropout=lora.get("dropout", 0.0),
        target_modules=list(lora["target_modules"]),
        task_type=module_of(task).lora_task_type(),
        fan_in_fan_out=getattr(model.config, "model_type", None) == "gpt2",
    )
    try:
        return get_peft_model(model, config)
    except ValueError as e:
        raise CampaignError(f"train.lora.target_modules: {e}") from None


def meta_parameter_bytes(
    config: Any, task: str, num_labels: int | None = None, lora: dict | None = None
) -> dict[str, int]:
    """`parameter_bytes` of the model `config` builds for `task` (its TaskModule.model_class,
    with the head_config of `num_labels` labels, and LoRA `lora`), instantiated on the meta
    device: exact, whatever its size, no memory used."""
    import torch

    task_module = module_of(task)
    config = copy.deepcopy(config)
    if num_labels is not None:
        for key, value in task_module.head_config(list(range(num_labels))).items():
            setattr(config, key, value)
    with torch.device("meta"):
        model = task_module.model_class().from_config(config)
        model = model.float()  # the campaign trains fp32 weights (autocast for bf16/fp16)
        if lora:
            model = wrap_lora(model, lora, task)
    return parameter_bytes(model)
