"""How much accelerator memory a run needs, estimated from the config (no model is built).

weights          4 x all parameters. The campaign keeps fp32 weights and runs bf16/fp16 as
                     autocast over the forward (devices.autocast), so the fp32 weights ARE the
                     master weights: no second copy. (Half-precision weights plus an fp32
                     master copy would be 2 + 4 per parameter; the campaign does not train so.)
    gradients        4 x trainable parameters (.grad takes the parameter's dtype).
    optimizer_state  AdamW: exp_avg + exp_avg_sq = 8 x trainable parameters, plus a 4-byte `step`
                     tensor per trainable parameter tensor.
    activations      what autograd saves for backward in one forward of a micro-batch (below),
                     plus the logits around the loss (not saved, but alive there): for causal_lm
                     2*T*V*4 (fp32 logits and the shifted copy the loss reads, or in backward
                     their gradients), else T*C*d.
    kv_cache         causal_lm: the generation cache, `kv_cache_bytes`.
    generate         the weights and the KV cache; for a generation task (model.task
                     generation) also the AdamW state: the train stage generates validation
                     and test on the saved model in the training process, where the Trainer
                     still holds its optimizer (train/stage.py run_training, final_scores; the
                     gradients are freed by zero_grad(set_to_none=True)). A label-scoring causal
                     LM generates only in the quantize stage's own process (weights alone), as
                     do the floors. Its cache holds model.generation.batch_size sequences
                     there, not micro_batch (`scales_with`).
    evaluation       the scoring of one evaluation batch without gradients, while the optimizer
                     state stays (the loop evaluates between steps): micro_batch sequences for a
                     classifier, micro_batch * n_labels for a causal LM (every candidate label's
                     response is scored), `eval_activation_bytes`.
Quantized base (`train.base_quantization: int8_weight_only`, LoRA only): each quantized linear
weight (every BERT matmul but the head; train/basequant.py) is 1 byte per weight + 5 per output
row (fp32 scale, int8 zero point) instead of 4 per weight; the rest of the weights stay fp32.
LoRA (`train.lora`): only the adapters, and for sequence classification peft's trainable copy of
the head (modules_to_save), have gradients and optimizer state; the copy also adds to the weights.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from campaign.core.defaults import train_key
from campaign.core.errors import CampaignError
from campaign.core.tasks import module_of
from campaign.memory.activations import (
    activation_bytes,
    attention_kernel,
    eval_activation_bytes,
)
from campaign.memory.shape import (
    COMPUTE_BYTES,
    FP32_BYTES,
    ModelShape,
    count_parameters,
    kv_cache_bytes,
    model_shape,
    quantized_linears,
)

# ------------------------------------------------------------------ the estimate
# What a phase's bytes_per_example multiplies: the training micro-batch, or the sequences
# generated together (a generation task's cache; the fit table's generation_batch lever).
MICRO_BATCH = "train.micro_batch"
GENERATION_BATCH = "model.generation.batch_size"


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated bytes per component for one micro-batch of `micro_batch` examples.

    `activations_per_example`, `evaluation_per_example` and `kv_cache_per_example` are the parts
    that grow linearly with a batch (everything else is fixed), which is what `fit_table`
    solves for. `evaluation` 0: no evaluation phase (unknown number of labels). `kv_batch`: the
    sequences the cache holds when the run generates free text (model.generation.batch_size;
    None: micro_batch, a label-scoring causal LM's cache); `optimizer_while_generating`: that
    generation runs in the training process beside the AdamW state (module docstring).
    """

    weights: int
    gradients: int
    optimizer_state: int
    activations: int
    kv_cache: int
    activations_per_example: int
    kv_cache_per_example: int
    micro_batch: int
    evaluation: int = 0
    evaluation_per_example: int = 0
    kv_batch: int | None = None
    optimizer_while_generating: bool = False

    def phases(self) -> dict[str, dict[str, Any]]:
        """{phase: {bytes, fixed_bytes, bytes_per_example, scales_with, batch,
        optimizer_state}}: a training step, an evaluation batch between steps, generation
        (LM). bytes = fixed_bytes + bytes_per_example x batch, where batch is the value of the
        key `scales_with` names; optimizer_state: the AdamW bytes the phase holds."""

        def phase(total: int, per: int, batch: int, scales_with: str, state: int) -> dict:
            return {
                "bytes": total,
                "fixed_bytes": total - per * batch,
                "bytes_per_example": per,
                "scales_with": scales_with,
                "batch": batch,
                "optimizer_state": state,
            }

        state, mb = self.optimizer_state, self.micro_batch
        train = self.weights + self.gradients + state + self.activations
        out = {"train_step": phase(train, self.activations_per_example, mb, MICRO_BATCH, state)}
        if self.evaluation:
            evaluate = self.weights + state + self.evaluation
            out["evaluate"] = phase(evaluate, self.evaluation_per_example, mb, MICRO_BATCH, state)
        if self.kv_cache:
            held = state if self.optimizer_while_generating else 0
            out["generate"] = phase(
                self.weights + held + self.kv_cache,
                self.kv_cache_per_example,
                mb if self.kv_batch is None else self.kv_batch,
                MICRO_BATCH if self.kv_batch is None else GENERATION_BATCH,
                held,
            )
        return out

    def to_dict(self) -> dict[str, Any]:
        phases = self.phases()
        peak_phase = max(phases, key=lambda p: phases[p]["bytes"])
        return {
            "bytes": {
                "weights": self.weights,
                "gradients": self.gradients,
                "optimizer_state": self.optimizer_state,
                "activations": self.activations,
                "kv_cache": self.kv_cache,
                "evaluation": self.evaluation,
            },
            "micro_batch": self.micro_batch,
            "phases": phases,
            "peak_phase": peak_phase,
            "peak_bytes": phases[peak_phase]["bytes"],
        }


ASSUMPTIONS = (
    "weights fp32 (4 B/param); bf16/fp16 run as autocast, so no separate master copy; a quantized "
    "base (train.base_quantization) holds its linear weights in 1 B + 5 B per output row",
    "gradients fp32 for trainable parameters only",
    "AdamW: exp_avg + exp_avg_sq fp32 (8 B/trainable param) + a 4 B step per trainable tensor",
    "activations: analytic saved-for-backward bytes of one micro-batch, every example padded to "
    "max_length, + logits; an estimate",
    "kv_cache (causal_lm): generation of micro_batch sequences of max_length tokens, in the "
    "quantize stage's own process (weights and cache, no optimizer state)",
    "evaluation: one scoring batch without gradients (micro_batch sequences, x n_labels for a "
    "causal LM) beside the weights and optimizer state; an estimate",
    "not counted: CUDA context and kernels (~0.3-1 GiB), allocator fragmentation (reserved > "
    "allocated), temporaries inside a kernel; the fit table's margin is for those",
)


def base_quantization(train_cfg: dict, shape: ModelShape) -> dict | None:
    """{method, params, bytes} of the quantized base weights (train.base_quantization), or None
    for an fp32 base. One-line errors as the training stage gives them (basequant.py)."""
    from campaign.train import base_quantization_method, quantized_linear_bytes

    key = "train.base_quantization"
    method = base_quantization_method(train_cfg)
    if method is None:
        return None
    if method != "int8_weight_only":
        raise CampaignError(f"{key}: {method} has no memory model (int8_weight_only has)")
    linears = quantized_linears(shape)
    if not linears:
        raise CampaignError(
            f"{key}: {method} quantizes nn.Linear layers and this {shape.architecture} model has "
            "none outside its head (GPT-2's blocks are transformers Conv1D)"
        )
    return {
        "method": method,
        "params": sum(m.n_in * m.n_out for m in linears),
        "bytes": sum(quantized_linear_bytes(m.n_in, m.n_out) for m in linears),
    }


def _need_keys(section: dict, keys: Sequence[str], where: str) -> None:
    for key in keys:
        if key not in section:
            raise CampaignError(f"{where}.{key}: missing (the memory estimate reads it)")


def estimate_memory(
    model_cfg: dict,
    train_cfg: dict,
    n_trainable: int | None = None,
    n_params: int | None = None,
    *,
    num_labels: int | None = None,
    device: str = "cuda",
    attention: str = "sdpa",
    gradient_checkpointing: bool = False,
    use_cache: bool = False,
) -> dict[str, Any]:
    """Estimated memory of a training step, an evaluation batch and (causal_lm) generation, from
    the config alone.

    model_cfg: the `model` section (task, config, tokenizer); train_cfg: the `train` section
    (micro_batch, max_length, precision, optional lora, grad_accum). n_params / n_trainable replace
    the analytic counts when the real model is known (e.g. a pretrained model). `num_labels`: the
    classes (a classifier's head; for causal_lm the candidate responses scored per example in
    evaluation; without it a causal LM's estimate has no evaluation phase). `device` ("cuda" or
    "cpu") and `attention` ("sdpa" or "eager", what envreport says transformers picks) decide the
    attention kernel and dropout-mask size; the training stage does not use gradient checkpointing,
    the flag shows what it would save. `use_cache=True` estimates a training forward that lets GPT-2
    build a KV cache (the campaign's train.logits_of turns it off). Returns a JSON-able dict, all
    sizes in bytes.
    """
    _check_recipe(train_cfg, device)
    precision = train_cfg["precision"]
    lora = train_cfg.get("lora") or None
    shape = model_shape(model_cfg, num_labels)
    if train_key(train_cfg, "base_dropout") is False:
        # The base's dropout set to 0 (train.models.set_base_dropout): it saves no masks.
        shape = dataclasses.replace(shape, dropout=0.0)
    batch, seq_len, d = train_cfg["micro_batch"], train_cfg["max_length"], COMPUTE_BYTES[precision]
    if seq_len > shape.max_positions:
        raise CampaignError(
            f"train.max_length: {seq_len} exceeds model.config.max_position_embeddings "
            f"{shape.max_positions}"
        )
    count = count_parameters(shape, lora)
    total = count.total if n_params is None else int(n_params)
    trainable = count.trainable if n_trainable is None else int(n_trainable)
    weight_bytes = total * FP32_BYTES
    quantization = base_quantization(train_cfg, shape)
    if quantization is not None:
        weight_bytes -= quantization["params"] * FP32_BYTES - quantization["bytes"]

    def act(b: int) -> dict[str, int]:
        return activation_bytes(
            shape,
            b,
            seq_len,
            d,
            device=device,
            attention=attention,
            gradient_checkpointing=gradient_checkpointing,
            lora=lora,
            use_cache=use_cache,
            quantized_base=quantization is not None,
        )

    acts, per_example = act(batch), act(1)["total"] - act(0)["total"]
    evaluation, eval_per_example = _evaluation_bytes(
        shape, num_labels, batch, seq_len, d, device, attention
    )
    kv_per_example = (
        kv_cache_bytes(shape.num_layers, shape.num_kv_heads, shape.head_dim, seq_len, 1, d)
        if shape.head == "lm"
        else 0
    )
    kv = kv_per_example * batch
    estimate = MemoryEstimate(
        weights=weight_bytes,
        gradients=trainable * FP32_BYTES,
        optimizer_state=2 * trainable * FP32_BYTES + count.trainable_tensors * FP32_BYTES,
        activations=acts["total"],
        kv_cache=kv,
        activations_per_example=per_example,
        kv_cache_per_example=kv_per_example,
        micro_batch=batch,
        evaluation=evaluation,
        evaluation_per_example=eval_per_example,
    )
    out = estimate.to_dict()
    out["source"] = "estimated"
    out["activations_detail"] = acts
    out["model"] = dict(architecture=shape.architecture, task=shape.task, n_params=total,
                        n_trainable=trainable, trainable_tensors=count.trainable_tensors,
                        lora=lora is not None, base_quantization=quantization)  # fmt: skip
    out["settings"] = _settings(
        shape, train_cfg, device, attention, gradient_checkpointing, use_cache
    )
    out["assumptions"] = list(ASSUMPTIONS)
    return out


def setting(estimate: dict, key: str) -> Any:
    """A `train` key the estimate was made for (its `settings`), or the key's one default
    (core/defaults.py) for an estimate made before the key was recorded."""
    return train_key(estimate.get("settings", {}), key)


def _settings(
    shape, train_cfg: dict, device: str, attention: str, gradient_checkpointing: bool,
    use_cache: bool,
) -> dict:  # fmt: skip
    """The estimate's `settings`: the recipe and kernel choices it was made for."""
    precision = train_cfg["precision"]
    return {
        "micro_batch": train_cfg["micro_batch"],
        "grad_accum": int(train_cfg.get("grad_accum") or 1),
        # train.devices: every process holds the whole model, its gradients and optimizer state
        # and its own micro-batches (gradients are summed in place): the bytes above are per
        # card, and a run takes this many cards.
        "devices": int(train_key(train_cfg, "devices")),
        "seq_len": train_cfg["max_length"],
        "precision": precision,
        "compute_bytes": COMPUTE_BYTES[precision],
        "device": device,
        "attention": attention,
        "attention_kernel": attention_kernel(attention, device, shape.dropout),
        "dropout": shape.dropout,
        "gradient_checkpointing": gradient_checkpointing,
        # AdamW state is counted as fp32 moments whatever train.optimizer says (an upper bound
        # for a low-bit one); the optimizer lever row reads which one the recipe runs.
        "optimizer": train_key(train_cfg, "optimizer"),
        "training_kv_cache": use_cache and shape.architecture == "gpt2",
    }


def _check_recipe(train_cfg: dict, device: str) -> None:
    """The train keys the estimate reads, a precision it knows and a device it models."""
    _need_keys(train_cfg, ("micro_batch", "max_length", "precision"), "train")
    precision = train_cfg["precision"]
    if precision not in COMPUTE_BYTES:
        raise CampaignError(f"train.precision: {precision!r} is not one of fp32, bf16, fp16")
    if device not in ("cuda", "cpu"):
        raise CampaignError(f"device: {device!r} is not one of cuda, cpu")


def _evaluation_bytes(
    shape, num_labels: int | None, batch: int, seq_len: int, d: int, device: str, attention: str
) -> tuple[int, int]:
    """(bytes, bytes per example more) of an evaluation batch's activations: one sequence an
    example for a classifier, one per candidate response for a causal LM (none without
    num_labels)."""
    per_seq = module_of(shape.task).eval_sequences(num_labels)
    if not per_seq:
        return 0, 0

    def scoring(b: int) -> int:
        return eval_activation_bytes(
            shape, b * per_seq, seq_len, d, device=device, attention=attention
        )["total"]

    evaluation = scoring(batch)
    return evaluation, scoring(batch + 1) - evaluation
