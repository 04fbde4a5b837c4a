"""How much accelerator memory a run needs: an estimate from the config, a measurement, a fit table.

The estimate reads `model` and `train` only (no model is built). Components, in bytes:
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
LoRA (`train.lora`): only the adapters, and for sequence classification peft's trainable copy of
the head (modules_to_save), have gradients and optimizer state; the copy also adds to the weights.

Activations: an estimate that follows what PyTorch autograd saves in transformers 5's BERT and
GPT-2 (other implementations save more or less). It matches tensors counted by SavedTensorBytes
to within 0.2% on the CPU (tests/test_memory.py). Notation:
    b micro_batch, s max_length (every example padded to it), T = b*s, h hidden, a heads,
    i intermediate, V vocabulary, C labels; d compute bytes: 4 (fp32), 2 (bf16/fp16 autocast).
    The residual stream and LayerNorm inputs stay fp32 under autocast (fp32 weights + promotion).
    c = bytes of a saved linear input read from the fp32 residual: 4 in fp32 (one tensor shared by
        every reader), d under autocast (each linear saves its own cast).
    m(x) = dropout-mask bytes per element of an x-byte tensor: 0 if dropout = 0, 1 on CUDA (bool),
        x on the CPU (float mask).
per BERT layer (post-LN, erf GELU), full fine-tune:
    T*h*(4 in fp32 | 3*d under autocast: q, k and v each cast the layer input)
    + attention + T*h*d (context) + 2*T*h*m(d) + 2*(T*h*4 + 2*T*4) (LayerNorm inputs, mean, rstd)
    + T*h*c + 2*T*i*d (GELU input, output-dense input)
per GPT-2 layer (pre-LN; gelu_new is tanh arithmetic in Python and saves 4 T*i tensors):
    2*(T*h*4 + 2*T*4) + 2*T*h*c + attention + T*h*d + 2*T*h*m(d) + 5*T*i*d
attention:
    fused (sdpa on CUDA; sdpa on the CPU without dropout): 3*T*h*d (q, k, v) + a*T*4 (logsumexp)
        + b*s*s*d (the bool padding mask, converted on every call); GPT-2 adds 2*T*h*d if its
        training forward builds a KV cache (use_cache not False: the kernel then gets the
        cache's copies of k and v while q keeps the whole c_attn output alive).
    math (eager; sdpa on the CPU with dropout, which computes in fp32, so d' = 4 there, else d):
        3*T*h*d' + a*s*T*4 (softmax output) + a*s*T*(m(d') + d') (dropout mask, probabilities)
        or, without dropout, a*s*T*d' only when d' < 4 (probabilities cast for the matmul).
    E.g. fp32, no dropout, fused: 8*T*h*4 + 16*T + a*T*4 + b*s*s*4 + (2 BERT | 5 GPT-2)*T*i*4,
    the "34*s*b*h + 5*a*s^2*b" of Korthikanti et al. (2022) under its fp16 + bool-mask premises.
embeddings: BERT T*h*4 + 2*T*4 (LayerNorm) + T*h*m(4); GPT-2 s*8 (positions) + T*h*m(4).
head: BERT: T*h*4 (the pooler's hidden[:, 0] view keeps the whole fp32 state; b*h*d under
    autocast) + b*h*d (tanh) + b*h*(m(d) + d) with dropout + b*C*4 (log-softmax).
    GPT-2: T*h*4 + 2*T*4 (ln_f) + T*h*c, then for causal_lm b*(s-1)*(V*4 + 8) (log-softmax and
    labels of the campaign's shifted loss, train.loss_sum), for classification 2*b*8 + b*C*4.
autocast also saves a d-byte copy of each matmul weight whose input needs a gradient.
LoRA: a frozen linear saves no input and nothing upstream of the first adapter is saved; each
    adapter saves its input, T*rank*d (A's output) and its dropout mask + dropped input.
gradient checkpointing: a layer keeps only its input T*h*4 (+ the b*s*s bool mask once); backward
    recomputes one layer at a time, which adds one full layer (`recompute`).

The measurement (`measure_memory`) counts the same components as tensor bytes and records the
process peaks per phase (CUDA: max_memory_allocated / max_memory_reserved; CPU: peak RSS).
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from campaign.errors import CampaignError

FP32_BYTES = 4
INT64_BYTES = 8
GIB = 2**30
# transformers' default hidden and attention dropout for BERT and GPT-2 (used when the config
# dict does not name one; the campaign's models.py always does).
TRANSFORMERS_DEFAULT_DROPOUT = 0.1
BERT_TYPE_VOCAB = 2  # token_type_embeddings rows, transformers' default
COMPUTE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
ATTENTION_IMPLEMENTATIONS = ("sdpa", "eager")


# ------------------------------------------------------------------ model geometry
@dataclass(frozen=True)
class ModelShape:
    """The sizes that decide parameter count and activation memory."""

    architecture: str  # bert | gpt2
    task: str  # sequence_classification | causal_lm
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_positions: int
    num_labels: int  # 0 for causal_lm
    dropout: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads


# Hugging Face config.json names -> ours, for a pretrained model's config.
_HF_KEYS = {
    "bert": {
        "hidden_size": "hidden_size",
        "num_hidden_layers": "num_hidden_layers",
        "num_attention_heads": "num_attention_heads",
        "intermediate_size": "intermediate_size",
        "max_position_embeddings": "max_position_embeddings",
        "dropout": "hidden_dropout_prob",
    },
    "gpt2": {
        "hidden_size": "n_embd",
        "num_hidden_layers": "n_layer",
        "num_attention_heads": "n_head",
        "intermediate_size": "n_inner",
        "max_position_embeddings": "n_positions",
        "dropout": "resid_pdrop",
    },
}


def _campaign_config(config: dict) -> dict:
    """The `model.config` form; a Hugging Face config.json dict (has model_type) is translated."""
    if "model_type" not in config:
        return config
    arch = config["model_type"]
    if arch not in _HF_KEYS:
        raise CampaignError(f"model config: model_type {arch!r} is not one of bert, gpt2")
    out = {ours: config.get(theirs) for ours, theirs in _HF_KEYS[arch].items()}
    out["architecture"] = arch
    out["vocab_size"] = config["vocab_size"]
    if arch == "gpt2" and out["intermediate_size"] is None:
        out["intermediate_size"] = 4 * out["hidden_size"]  # GPT-2's n_inner=None means 4*n_embd
    if "id2label" in config:
        out["num_labels"] = len(config["id2label"])
    return out


def model_shape(model_cfg: dict, num_labels: int | None = None) -> ModelShape:
    """The geometry of the `model` section (task, config, tokenizer).

    The vocabulary is `config.vocab_size` when given (a pretrained config), else
    `tokenizer.vocab_size` (the size the tokenizer is trained to; a tiny corpus can give fewer
    tokens, so pass the real count to `estimate_memory` as n_params when it is known).
    `num_labels` (classes of the train split) is needed for sequence classification.
    """
    task = model_cfg.get("task")
    if task not in ("sequence_classification", "causal_lm"):
        raise CampaignError(
            f"model.task: {task!r} is not one of sequence_classification, causal_lm"
        )
    cfg = _campaign_config(model_cfg.get("config") or {})
    arch = cfg.get("architecture")
    if arch not in ("bert", "gpt2"):
        raise CampaignError(f"model.config.architecture: {arch!r} is not one of bert, gpt2")
    if task == "causal_lm" and arch != "gpt2":
        raise CampaignError("model.config.architecture: causal_lm needs gpt2 (a decoder)")
    need = (
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
    )
    for key in need:
        if not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise CampaignError(f"model.config.{key}: expected a whole number >= 1")
    vocab = cfg.get("vocab_size") or (model_cfg.get("tokenizer") or {}).get("vocab_size")
    if not isinstance(vocab, int) or vocab < 1:
        raise CampaignError(
            "model.tokenizer.vocab_size: needed to size the embeddings (or model.config.vocab_size)"
        )
    labels = 0
    if task == "sequence_classification":
        labels = num_labels if num_labels is not None else cfg.get("num_labels")
        if not isinstance(labels, int) or labels < 1:
            raise CampaignError(
                "model.config.num_labels: sequence classification needs the number of classes "
                "(pass num_labels, the distinct labels of the train split)"
            )
    heads = cfg["num_attention_heads"]
    if cfg["hidden_size"] % heads:
        raise CampaignError(
            f"model.config.hidden_size: {cfg['hidden_size']} is not divisible by "
            f"num_attention_heads {heads}"
        )
    dropout = cfg.get("dropout")
    return ModelShape(
        architecture=arch,
        task=task,
        vocab_size=vocab,
        hidden_size=cfg["hidden_size"],
        num_layers=cfg["num_hidden_layers"],
        num_heads=heads,
        num_kv_heads=cfg.get("num_key_value_heads") or heads,
        intermediate_size=cfg["intermediate_size"],
        max_positions=cfg["max_position_embeddings"],
        num_labels=labels,
        dropout=TRANSFORMERS_DEFAULT_DROPOUT if dropout is None else float(dropout),
    )


# ------------------------------------------------------------------ parameters
@dataclass(frozen=True)
class Linear:
    """A matmul module: its dotted name in the transformers model, fan-in, fan-out, bias."""

    name: str
    n_in: int
    n_out: int
    bias: bool


def layer_linears(shape: ModelShape, layer: int) -> list[Linear]:
    """The linear (Conv1D for GPT-2) modules of one block, in forward order."""
    h, i = shape.hidden_size, shape.intermediate_size
    if shape.architecture == "bert":
        p = f"bert.encoder.layer.{layer}."
        return [
            Linear(p + "attention.self.query", h, h, True),
            Linear(p + "attention.self.key", h, h, True),
            Linear(p + "attention.self.value", h, h, True),
            Linear(p + "attention.output.dense", h, h, True),
            Linear(p + "intermediate.dense", h, i, True),
            Linear(p + "output.dense", i, h, True),
        ]
    p = f"transformer.h.{layer}."
    return [
        Linear(p + "attn.c_attn", h, 3 * h, True),
        Linear(p + "attn.c_proj", h, h, True),
        Linear(p + "mlp.c_fc", h, i, True),
        Linear(p + "mlp.c_proj", i, h, True),
    ]


def head_linears(shape: ModelShape) -> list[Linear]:
    """Matmuls outside the blocks (GPT-2's LM head is tied to the token embedding)."""
    h = shape.hidden_size
    if shape.architecture == "bert":
        return [
            Linear("bert.pooler.dense", h, h, True),
            Linear("classifier", h, shape.num_labels, True),
        ]
    if shape.task == "causal_lm":
        return [Linear("lm_head", h, shape.vocab_size, False)]
    return [Linear("score", h, shape.num_labels, False)]


# peft wraps the task head of a sequence classifier in ModulesToSaveWrapper: a trainable copy.
_HEAD_MODULES = ("classifier", "score")


def _lora_targets(shape: ModelShape, lora: dict | None) -> dict[str, int]:
    """{module name: rank} of the modules peft would adapt (name == target or endswith .target)."""
    if not lora:
        return {}
    targets = list(lora.get("target_modules") or [])
    rank = lora.get("r")
    if not isinstance(rank, int) or rank < 1:
        raise CampaignError("train.lora.r: expected a whole number >= 1")
    modules = [m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)]
    modules += [m for m in head_linears(shape) if m.name not in (*_HEAD_MODULES, "lm_head")]
    chosen = {
        m.name: rank
        for m in modules
        if any(m.name == t or m.name.endswith("." + t) for t in targets)
    }
    if not chosen:
        raise CampaignError(
            f"train.lora.target_modules: {targets} match no linear module of this "
            f"{shape.architecture} model"
        )
    return chosen


@dataclass(frozen=True)
class ParameterCount:
    total: int  # every parameter, counted once (tied weights once)
    trainable: int
    tensors: int
    trainable_tensors: int


def count_parameters(shape: ModelShape, lora: dict | None = None) -> ParameterCount:
    """Parameter count of the transformers model (and peft wrapping) built from `shape`."""
    h, v, p = shape.hidden_size, shape.vocab_size, shape.max_positions
    sizes: list[int] = []  # base-model tensors, numel each
    if shape.architecture == "bert":
        sizes += [v * h, p * h, BERT_TYPE_VOCAB * h, h, h]  # word, position, type, LayerNorm
    else:
        sizes += [v * h, p * h]  # wte, wpe
    for layer in range(shape.num_layers):
        for m in layer_linears(shape, layer):
            sizes += [m.n_in * m.n_out] + ([m.n_out] if m.bias else [])
        sizes += [h, h, h, h]  # two LayerNorms, weight and bias each
    if shape.architecture == "gpt2":
        sizes += [h, h]  # ln_f
    head_sizes: list[int] = []
    for m in head_linears(shape):
        if m.name == "lm_head":
            continue  # tied to wte
        tensors = [m.n_in * m.n_out] + ([m.n_out] if m.bias else [])
        (head_sizes if m.name in _HEAD_MODULES else sizes).extend(tensors)
    total = sum(sizes) + sum(head_sizes)
    tensors = len(sizes) + len(head_sizes)
    if not lora:
        return ParameterCount(total, total, tensors, tensors)
    adapters: list[int] = []
    by_name = {m.name: m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)}
    by_name.update({m.name: m for m in head_linears(shape)})
    for name, rank in _lora_targets(shape, lora).items():
        m = by_name[name]
        adapters += [rank * m.n_in, m.n_out * rank]  # lora_A (r, in), lora_B (out, r)
    # The head copy peft trains (sequence classification); the original stays, frozen.
    trainable = sum(adapters) + sum(head_sizes)
    return ParameterCount(
        total=total + sum(adapters) + sum(head_sizes),
        trainable=trainable,
        tensors=tensors + len(adapters) + len(head_sizes),
        trainable_tensors=len(adapters) + len(head_sizes),
    )


def analytic_parameter_count(
    model_cfg: dict, lora: dict | None = None, num_labels: int | None = None
) -> dict[str, int]:
    """`count_parameters` of the `model` section, as a dict."""
    return asdict(count_parameters(model_shape(model_cfg, num_labels), lora))


# ------------------------------------------------------------------ KV cache
def kv_cache_bytes(
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    context_len: int,
    batch: int,
    dtype_bytes: int,
) -> int:
    """Bytes of a generation cache: 2 (K, V) x layers x kv_heads x head_dim x context x batch x B.

    Grouped-query attention stores num_key_value_heads < num_attention_heads heads, hence its use.
    """
    return 2 * num_layers * num_kv_heads * head_dim * context_len * batch * dtype_bytes


# ------------------------------------------------------------------ activations
class _Ledger:
    """Saved-for-backward bytes, each tensor counted once however many ops save it."""

    def __init__(self) -> None:
        self.items: dict[Any, int] = {}

    def add(self, key: Any, nbytes: int) -> None:
        if nbytes > 0:
            self.items.setdefault(key, nbytes)

    def total(self) -> int:
        return sum(self.items.values())


@dataclass(frozen=True)
class _Ctx:
    """What one activation estimate depends on, beyond the model shape."""

    batch: int
    seq_len: int
    d: int  # compute bytes
    mask_bool: bool  # dropout masks are bool (CUDA) rather than float (CPU)
    fused: bool  # attention saves logsumexp instead of s x s probabilities
    attn_bytes: int  # bytes of q, k, v and probabilities inside a math attention
    training_cache: bool  # GPT-2 builds a KV cache in the training forward (use_cache)
    full_ft: bool  # base weights train (else: LoRA, base frozen)
    lora: dict[str, int]  # adapted module -> rank
    lora_dropout: float

    @property
    def tokens(self) -> int:
        return self.batch * self.seq_len

    def mask(self, dropout: float, elem_bytes: int) -> int:
        """Bytes per element of a dropout's saved mask."""
        if dropout <= 0:
            return 0
        return 1 if self.mask_bool else elem_bytes


def _linear(
    led: _Ledger, c: _Ctx, m: Linear, x_key: Any, x_bytes: int, live: bool, rows: int
) -> bool:
    """A linear on input `x_key` (rows x m.n_in, x_bytes each); returns: its output needs grad.

    It saves its input when its weight trains (full fine-tune) or LoRA adapts it: the same tensor
    as other readers when no cast is needed, else its own cast copy (autocast). Under autocast it
    also saves the d-byte copy of a weight it needs for the input's gradient (when `live`).
    """
    cast = x_bytes != c.d
    key = (x_key, m.name) if cast else x_key
    adapted = m.name in c.lora
    if c.full_ft:
        led.add(key, rows * m.n_in * c.d)
    if c.d != FP32_BYTES and live:
        led.add((m.name, "weight_cast"), m.n_in * m.n_out * c.d)
    if adapted:
        rank = c.lora[m.name]
        a_key: Any = key
        if c.lora_dropout > 0:
            if live:
                led.add((m.name, "lora_mask"), rows * m.n_in * c.mask(c.lora_dropout, x_bytes))
            a_key = (m.name, "lora_dropped")
        led.add((a_key, "lora_A") if a_key is not key else key, rows * m.n_in * c.d)
        led.add((m.name, "lora_A_out"), rows * rank * c.d)
        if c.d != FP32_BYTES:
            led.add((m.name, "lora_B_weight_cast"), rank * m.n_out * c.d)
            if live:
                led.add((m.name, "lora_A_weight_cast"), rank * m.n_in * c.d)
    return live or c.full_ft or adapted


def _attention_core(
    led: _Ledger, c: _Ctx, shape: ModelShape, layer: int, q: bool, k: bool, v: bool
) -> None:
    """What one attention saves, given which of q, k, v need grad.

    fused: the kernel saves q, k, v, its output and logsumexp, plus the padding mask it converts
    from bool to the query's dtype on every call. GPT-2 with a training-time KV cache hands the
    kernel the cache's concatenated copies of k and v, while q still views the c_attn output, so
    the whole (T, 3h) output stays alive too. math: scores = q k^T saves k for dq and q for dk;
    softmax saves its output, dropout its mask, and p v saves the probabilities for dv and v for dp.
    """
    if not (q or k or v):
        return
    t, h, a, s = c.tokens, shape.hidden_size, shape.num_heads, c.seq_len
    if c.fused:
        d = c.d
        qkv = 3 * t * h * d
        if c.training_cache and shape.architecture == "gpt2":
            qkv += 2 * t * h * d
        led.add((layer, "qkv"), qkv)
        led.add((layer, "context"), t * h * d)  # the kernel's output, saved by it
        led.add((layer, "logsumexp"), a * t * FP32_BYTES)
        led.add((layer, "padding_mask"), c.batch * s * s * d)
        return
    d = c.attn_bytes
    scores = q or k
    if k:
        led.add((layer, "q"), t * h * d)
    if q:
        led.add((layer, "k"), t * h * d)
    if scores:
        led.add((layer, "v"), t * h * d)
        led.add((layer, "softmax"), a * s * t * FP32_BYTES)
    if shape.dropout > 0:
        if scores:
            led.add((layer, "attn_dropout_mask"), a * s * t * c.mask(shape.dropout, d))
        if v:
            led.add((layer, "attn_probs"), a * s * t * d)
    elif d != FP32_BYTES and v:
        led.add((layer, "attn_probs"), a * s * t * d)


def _layer_norm(led: _Ledger, c: _Ctx, shape: ModelShape, key: Any, live: bool) -> None:
    # LayerNorm saves input, mean and rstd when its input or its (full fine-tune) weight needs grad.
    if live or c.full_ft:
        led.add(key, c.tokens * shape.hidden_size * FP32_BYTES + 2 * c.tokens * FP32_BYTES)


def _hidden_dropout(led: _Ledger, c: _Ctx, shape: ModelShape, key: Any, live: bool) -> None:
    if live:
        led.add(key, c.tokens * shape.hidden_size * c.mask(shape.dropout, c.d))


def _bert_layer(led: _Ledger, c: _Ctx, shape: ModelShape, layer: int, live: bool) -> bool:
    t, i, d = c.tokens, shape.intermediate_size, c.d
    q, k, v, o, fc1, fc2 = layer_linears(shape, layer)
    x = (layer, "input")  # fp32: the previous LayerNorm's output
    qkv_live = [_linear(led, c, m, x, FP32_BYTES, live, t) for m in (q, k, v)]
    _attention_core(led, c, shape, layer, *qkv_live)
    out = _linear(led, c, o, (layer, "context"), d, any(qkv_live), t)
    _hidden_dropout(led, c, shape, (layer, "attn_out_mask"), out)
    out = out or live  # residual
    _layer_norm(led, c, shape, (layer, "ln1_in"), out)
    out = out or c.full_ft
    mid = _linear(led, c, fc1, (layer, "ln1_out"), FP32_BYTES, out, t)
    if mid:
        led.add((layer, "gelu_in"), t * i * d)
    mid2 = _linear(led, c, fc2, (layer, "gelu_out"), d, mid, t)
    _hidden_dropout(led, c, shape, (layer, "ffn_out_mask"), mid2)
    res = mid2 or out
    _layer_norm(led, c, shape, (layer, "ln2_in"), res)
    return res or c.full_ft


def _gpt2_layer(led: _Ledger, c: _Ctx, shape: ModelShape, layer: int, live: bool) -> bool:
    t, i, d = c.tokens, shape.intermediate_size, c.d
    attn, proj, fc, fc_proj = layer_linears(shape, layer)
    _layer_norm(led, c, shape, (layer, "ln1_in"), live)
    ln1 = live or c.full_ft
    qkv = _linear(led, c, attn, (layer, "ln1_out"), FP32_BYTES, ln1, t)
    _attention_core(led, c, shape, layer, qkv, qkv, qkv)
    out = _linear(led, c, proj, (layer, "context"), d, qkv, t)
    _hidden_dropout(led, c, shape, (layer, "attn_out_mask"), out)
    res = out or live
    _layer_norm(led, c, shape, (layer, "ln2_in"), res)
    ln2 = res or c.full_ft
    mid = _linear(led, c, fc, (layer, "ln2_out"), FP32_BYTES, ln2, t)
    if mid:
        led.add((layer, "gelu_new"), 4 * t * i * d)  # x, x^3 term, tanh, 0.5*x
    mid2 = _linear(led, c, fc_proj, (layer, "gelu_out"), d, mid, t)
    _hidden_dropout(led, c, shape, (layer, "ffn_out_mask"), mid2)
    return mid2 or res


def _layer(led: _Ledger, c: _Ctx, shape: ModelShape, layer: int, live: bool) -> bool:
    fn = _bert_layer if shape.architecture == "bert" else _gpt2_layer
    return fn(led, c, shape, layer, live)


def _embeddings(led: _Ledger, c: _Ctx, shape: ModelShape) -> bool:
    """Saved by the embedding block; returns whether its output needs grad (embeddings train)."""
    if not c.full_ft:
        return False  # frozen embeddings: nothing upstream of the first adapter is saved
    t, h = c.tokens, shape.hidden_size
    if shape.architecture == "bert":
        _layer_norm(led, c, shape, "emb_ln_in", True)
    else:
        led.add("position_ids", c.seq_len * INT64_BYTES)
    led.add("emb_dropout_mask", t * h * c.mask(shape.dropout, FP32_BYTES))
    return True


def _head(led: _Ledger, c: _Ctx, shape: ModelShape, live: bool) -> int:
    """Saved by the head and the loss; returns the transient bytes of the logits (not saved)."""
    t, h, b, d = c.tokens, shape.hidden_size, c.batch, c.d
    if shape.architecture == "bert":
        pooler, classifier = head_linears(shape)
        cls = ("final", "cls")
        if d == FP32_BYTES and (c.full_ft or (pooler.name in c.lora and c.lora_dropout <= 0)):
            # hidden[:, 0] is a view: saving it keeps the whole fp32 hidden state alive.
            led.add(cls, t * h * FP32_BYTES)
        live = _linear(led, c, pooler, cls, FP32_BYTES, live, b)
        if live:
            led.add("pooler_tanh", b * h * d)
        cls_key = "pooler_tanh"
        if shape.dropout > 0 and live:
            led.add("pooler_dropout_mask", b * h * c.mask(shape.dropout, d))
            cls_key = "pooler_dropped"
        led.add(cls_key, b * h * d)  # the classifier trains (full fine-tune or peft's copy)
        if d != FP32_BYTES:
            led.add((classifier.name, "weight_cast"), classifier.n_in * classifier.n_out * d)
        led.add("log_softmax", b * shape.num_labels * FP32_BYTES)
        return b * shape.num_labels * d
    _layer_norm(led, c, shape, "lnf_in", live)
    (head,) = head_linears(shape)
    trains = c.full_ft or head.name in _HEAD_MODULES
    if trains:
        cast = d != FP32_BYTES
        led.add(("lnf_out", head.name) if cast else "lnf_out", t * h * d)
    if d != FP32_BYTES:
        led.add((head.name, "weight_cast"), head.n_in * head.n_out * d)
    if shape.task == "causal_lm":
        # The campaign's loss (train.loss_sum): position t predicts t+1, so b*(s-1) rows.
        rows = b * max(c.seq_len - 1, 0)
        led.add("log_softmax", rows * shape.vocab_size * FP32_BYTES)
        led.add("shifted_labels", rows * INT64_BYTES)  # labels[:, 1:] copied by reshape
        # Not saved but alive around the loss: the fp32 logits and the shifted copy it reads
        # (in backward, their gradients): about 2*T*V*4, however d is.
        return 2 * t * shape.vocab_size * FP32_BYTES
    led.add("pooled_index", 2 * b * INT64_BYTES)
    led.add("log_softmax", b * shape.num_labels * FP32_BYTES)
    return t * shape.num_labels * d


def attention_kernel(attn_implementation: str, device: str, dropout: float) -> str:
    """ "fused" (saves logsumexp) or "math" (saves s x s probabilities) for this setting.

    sdpa on CUDA uses flash / memory-efficient kernels (dropout included); on the CPU its fused
    kernel serves no-dropout calls, and with dropout it falls back to the math path, like eager.
    """
    if attn_implementation not in ATTENTION_IMPLEMENTATIONS:
        raise CampaignError(
            f"attention: {attn_implementation!r} is not one of "
            f"{', '.join(ATTENTION_IMPLEMENTATIONS)}"
        )
    if attn_implementation == "eager":
        return "math"
    if device == "cuda" or dropout <= 0:
        return "fused"
    return "math"


def activation_bytes(
    shape: ModelShape,
    batch: int,
    seq_len: int,
    dtype_bytes: int,
    *,
    device: str = "cuda",
    attention: str = "sdpa",
    gradient_checkpointing: bool = False,
    lora: dict | None = None,
    use_cache: bool = False,
) -> dict[str, int]:
    """Activation memory of one forward+backward of a (batch, seq_len) micro-batch, in bytes.

    Returns {embeddings, layers, head, weight_casts, saved_for_backward, recompute, logits, total}:
    `saved_for_backward` is what autograd holds between forward and backward (the formula in the
    module doc), `recompute` the one layer rebuilt at a time under gradient checkpointing,
    `logits` the transient logits around the loss; `total` = their sum. An estimate (module doc).
    `use_cache`: whether the training forward lets GPT-2 build a KV cache, which transformers does
    unless the call passes use_cache=False (train.logits_of passes it); under the fused kernel
    it costs 2*T*h*d per layer.
    """
    kernel = attention_kernel(attention, device, shape.dropout)
    c = _Ctx(
        batch=batch,
        seq_len=seq_len,
        d=dtype_bytes,
        mask_bool=device == "cuda",
        fused=kernel == "fused",
        # sdpa's math fallback on the CPU computes half-precision inputs in fp32.
        attn_bytes=FP32_BYTES if (device == "cpu" and attention == "sdpa") else dtype_bytes,
        training_cache=use_cache,
        full_ft=not lora,
        lora=_lora_targets(shape, lora),
        lora_dropout=float((lora or {}).get("dropout") or 0.0),
    )
    led = _Ledger()
    live = _embeddings(led, c, shape)
    embeddings = led.total()
    layer_bytes: list[int] = []
    recompute = 0
    for layer in range(shape.num_layers):
        before = led.total()
        if gradient_checkpointing:
            one = _Ledger()
            _layer(one, c, shape, layer, True)
            live = True
            recompute = max(recompute, one.total())
            # The checkpoint keeps the block's tensor arguments: its input hidden state and the
            # bool padding mask (one tensor for all blocks).
            led.add((layer, "checkpoint_input"), c.tokens * shape.hidden_size * FP32_BYTES)
            led.add("padding_mask_bool", batch * seq_len * seq_len)
        else:
            live = _layer(led, c, shape, layer, live)
        layer_bytes.append(led.total() - before)
    before = led.total()
    logits = _head(led, c, shape, live)
    head = led.total() - before
    saved = led.total()
    casts = sum(n for k, n in led.items.items() if isinstance(k, tuple) and "cast" in str(k[-1]))
    return {
        "embeddings": embeddings,
        "layers": sum(layer_bytes),
        "per_layer_max": max(layer_bytes),
        "head": head,
        "weight_casts": casts,
        "saved_for_backward": saved,
        "recompute": recompute,
        "logits": logits,
        "total": saved + recompute + logits,
    }


# ------------------------------------------------------------------ the estimate
@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated bytes per component for one micro-batch of `micro_batch` examples.

    `activations_per_example` and `kv_cache_per_example` are the parts that grow linearly with
    the micro-batch (everything else is fixed), which is what `fit_table` solves for.
    """

    weights: int
    gradients: int
    optimizer_state: int
    activations: int
    kv_cache: int
    activations_per_example: int
    kv_cache_per_example: int
    micro_batch: int

    def phases(self) -> dict[str, dict[str, int]]:
        """{phase: {bytes, fixed_bytes, bytes_per_example}}: a training step; generation (LM)."""
        train = self.weights + self.gradients + self.optimizer_state + self.activations
        out = {
            "train_step": {
                "bytes": train,
                "fixed_bytes": train - self.activations_per_example * self.micro_batch,
                "bytes_per_example": self.activations_per_example,
            }
        }
        if self.kv_cache:
            out["generate"] = {
                "bytes": self.weights + self.kv_cache,
                "fixed_bytes": self.weights,
                "bytes_per_example": self.kv_cache_per_example,
            }
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
            },
            "micro_batch": self.micro_batch,
            "phases": phases,
            "peak_phase": peak_phase,
            "peak_bytes": phases[peak_phase]["bytes"],
        }


ASSUMPTIONS = (
    "weights fp32 (4 B/param); bf16/fp16 run as autocast, so no separate master copy",
    "gradients fp32 for trainable parameters only",
    "AdamW: exp_avg + exp_avg_sq fp32 (8 B/trainable param) + a 4 B step per trainable tensor",
    "activations: analytic saved-for-backward bytes of one micro-batch, every example padded to "
    "max_length, + logits; an estimate",
    "kv_cache (causal_lm): generation of micro_batch sequences of max_length tokens",
    "not counted: CUDA context and kernels (~0.3-1 GiB), allocator fragmentation (reserved > "
    "allocated), temporaries inside a kernel; the fit table's margin is for those",
)


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
    """Estimated memory of a training step (and of generation for causal_lm), from config alone.

    model_cfg: the `model` section (task, config, tokenizer); train_cfg: the `train` section
    (micro_batch, max_length, precision, optional lora). n_params / n_trainable replace the
    analytic counts when the real model is known (e.g. a pretrained model). `device` ("cuda" or
    "cpu") and `attention` ("sdpa" or "eager", what envreport says transformers picks) decide the
    attention kernel and dropout-mask size; the training stage does not use gradient
    checkpointing, the flag shows what it would save. `use_cache=True` estimates a training
    forward that lets GPT-2 build a KV cache (the campaign's train.logits_of turns it off).
    Returns a JSON-able dict, all sizes in bytes.
    """
    _need_keys(train_cfg, ("micro_batch", "max_length", "precision"), "train")
    precision = train_cfg["precision"]
    if precision not in COMPUTE_BYTES:
        raise CampaignError(f"train.precision: {precision!r} is not one of fp32, bf16, fp16")
    if device not in ("cuda", "cpu"):
        raise CampaignError(f"device: {device!r} is not one of cuda, cpu")
    lora = train_cfg.get("lora") or None
    shape = model_shape(model_cfg, num_labels)
    batch, seq_len, d = train_cfg["micro_batch"], train_cfg["max_length"], COMPUTE_BYTES[precision]
    if seq_len > shape.max_positions:
        raise CampaignError(
            f"train.max_length: {seq_len} exceeds model.config.max_position_embeddings "
            f"{shape.max_positions}"
        )
    count = count_parameters(shape, lora)
    total = count.total if n_params is None else int(n_params)
    trainable = count.trainable if n_trainable is None else int(n_trainable)

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
        )

    acts, per_example = act(batch), act(1)["total"] - act(0)["total"]
    kv = kv_per_example = 0
    if shape.task == "causal_lm":
        kv_per_example = kv_cache_bytes(
            shape.num_layers, shape.num_kv_heads, shape.head_dim, seq_len, 1, d
        )
        kv = kv_per_example * batch
    estimate = MemoryEstimate(
        weights=total * FP32_BYTES,
        gradients=trainable * FP32_BYTES,
        optimizer_state=2 * trainable * FP32_BYTES + count.trainable_tensors * FP32_BYTES,
        activations=acts["total"],
        kv_cache=kv,
        activations_per_example=per_example,
        kv_cache_per_example=kv_per_example,
        micro_batch=batch,
    )
    out = estimate.to_dict()
    out["activations_detail"] = acts
    out["model"] = {
        "architecture": shape.architecture,
        "task": shape.task,
        "n_params": total,
        "n_trainable": trainable,
        "trainable_tensors": count.trainable_tensors,
        "lora": lora is not None,
    }
    out["settings"] = {
        "micro_batch": batch,
        "seq_len": seq_len,
        "precision": precision,
        "compute_bytes": d,
        "device": device,
        "attention": attention,
        "attention_kernel": attention_kernel(attention, device, shape.dropout),
        "dropout": shape.dropout,
        "gradient_checkpointing": gradient_checkpointing,
        "training_kv_cache": use_cache and shape.architecture == "gpt2",
    }
    out["assumptions"] = list(ASSUMPTIONS)
    return out


# ------------------------------------------------------------------ measurement
class SavedTensorBytes:
    """Bytes of the distinct storages autograd saves for backward inside this context.

    Storages of `exclude` (parameters, buffers, the batch) are not counted: they exist anyway.
    Only sizes and addresses are kept; the hook never prolongs a tensor's life.
    """

    def __init__(self, exclude: Iterable[Any] = ()):
        self._skip = {_storage(t)[0] for t in exclude}
        self._seen: dict[int, int] = {}
        self._hooks: Any = None

    def __enter__(self) -> SavedTensorBytes:
        import torch

        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, _unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self._hooks.__exit__(*exc)

    def _pack(self, tensor: Any) -> Any:
        ptr, nbytes = _storage(tensor)
        if ptr and ptr not in self._skip:
            self._seen.setdefault(ptr, nbytes)
        return tensor

    @property
    def nbytes(self) -> int:
        return sum(self._seen.values())

    @property
    def count(self) -> int:
        return len(self._seen)


def _unpack(tensor: Any) -> Any:
    return tensor


def _storage(tensor: Any) -> tuple[int, int]:
    """(address, bytes) of the memory behind a tensor (a view reports its whole base)."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes()
    except (RuntimeError, NotImplementedError):  # sparse and other storage-less layouts
        return id(tensor), tensor.nbytes


def _tensor_bytes(tensors: Iterable[Any]) -> int:
    return sum(t.nbytes for t in tensors)


_CLEAR_REFS = "/proc/self/clear_refs"


def _reset_rss_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS; False where unsupported."""
    try:
        with open(_CLEAR_REFS, "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _rss_peak() -> int:
    """Peak resident set size: VmHWM (since the last reset), else ru_maxrss (since start)."""
    with contextlib.suppress(OSError):
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def _rss() -> int:
    import psutil

    return psutil.Process(os.getpid()).memory_info().rss


@contextlib.contextmanager
def _phase(device: Any, out: dict, name: str):
    """Record the memory peak of the enclosed code under out[name]."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        reserved_before = torch.cuda.memory_reserved(device)
        yield
        torch.cuda.synchronize(device)
        peak = torch.cuda.max_memory_allocated(device)
        out[name] = {
            "allocated_before": before,
            "allocated_after": torch.cuda.memory_allocated(device),
            "peak_allocated": peak,
            "peak_over_before": peak - before,
            "reserved_before": reserved_before,
            "peak_reserved": torch.cuda.max_memory_reserved(device),
        }
        return
    resettable = _reset_rss_peak()
    before = _rss()
    yield
    peak = _rss_peak()
    out[name] = {
        "rss_before": before,
        "rss_after": _rss(),
        "rss_peak": peak,
        "peak_over_before": peak - before,
        "peak_since": "phase start" if resettable else "process start",
    }


def measure_memory(
    model: Any,
    batch: dict[str, Any],
    optimizer_factory: Callable[[list[Any]], Any],
    device: Any,
    *,
    loss_fn: Callable[[Any, dict[str, Any]], Any] | None = None,
    autocast: Callable[[], contextlib.AbstractContextManager] | None = None,
) -> dict[str, Any]:
    """Measured bytes per component of one training step: forward, backward, optimizer.step().

    Tensor bytes: weights = parameter bytes as loaded; gradients = .grad bytes after backward;
    optimizer_state = state tensor bytes after one step (optimizer_factory is called with the
    trainable parameters); activations = distinct storages saved for backward during the forward
    (SavedTensorBytes). Process peaks per phase: on CUDA max_memory_allocated / _reserved (peak
    stats reset between phases), on the CPU the RSS high-water mark (reset per phase where the
    kernel allows). `loss_fn(model, batch)` defaults to `model(**batch).loss`; the estimate
    models the campaign's loss, `lambda m, b: train.loss_sum(m, b, task)`. `autocast()` returns
    the forward's autocast context. The model takes one real step: pass a throwaway.
    """
    import torch

    device = torch.device(device)
    model.to(device)
    model.train()
    batch = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}
    params = list(model.parameters())  # tied weights appear once
    for p in params:
        p.grad = None
    trainable = [p for p in params if p.requires_grad]
    buffers = list(model.buffers())
    inputs = [v for v in batch.values() if isinstance(v, torch.Tensor)]
    phases: dict[str, dict] = {}
    start = torch.cuda.memory_allocated(device) if device.type == "cuda" else _rss()

    saved = SavedTensorBytes(exclude=[*params, *buffers, *inputs])
    context = autocast() if autocast is not None else contextlib.nullcontext()
    with _phase(device, phases, "forward"), saved, context:
        loss = loss_fn(model, batch) if loss_fn is not None else model(**batch).loss
    with _phase(device, phases, "backward"):
        loss.backward()
    del loss
    gradients = _tensor_bytes(p.grad for p in params if p.grad is not None)
    optimizer = optimizer_factory(trainable)
    with _phase(device, phases, "optimizer_step"):
        optimizer.step()
    optimizer_state = _tensor_bytes(
        t for state in optimizer.state.values() for t in state.values() if torch.is_tensor(t)
    )
    optimizer.zero_grad(set_to_none=True)
    del optimizer

    key = "peak_allocated" if device.type == "cuda" else "rss_peak"
    peak: dict[str, Any] = {"kind": "cuda_allocated" if device.type == "cuda" else "cpu_rss"}
    peak["bytes"] = max(p[key] for p in phases.values())
    peak["over_start"] = peak["bytes"] - start
    if device.type == "cuda":
        peak["reserved"] = max(p["peak_reserved"] for p in phases.values())
    return {
        "device": str(device),
        "bytes": {
            "weights": _tensor_bytes(params),
            "buffers": _tensor_bytes(buffers),
            "gradients": gradients,
            "optimizer_state": optimizer_state,
            "activations": saved.nbytes,
        },
        "saved_tensors": saved.count,
        "start": start,
        "phases": phases,
        "peak": peak,
    }


def cache_tensor_bytes(cache: Any) -> int:
    """Bytes of the key/value tensors of a transformers cache (5.x Cache, or legacy tuples)."""
    import torch

    if cache is None:
        return 0
    if torch.is_tensor(cache):
        return cache.nbytes
    if isinstance(cache, list | tuple):
        return sum(cache_tensor_bytes(x) for x in cache)
    if hasattr(cache, "layers"):  # transformers >= 4.56: Cache.layers[i].keys / .values
        return sum(
            cache_tensor_bytes(getattr(layer, "keys", None))
            + cache_tensor_bytes(getattr(layer, "values", None))
            for layer in cache.layers
        )
    if hasattr(cache, "key_cache"):  # older DynamicCache
        return cache_tensor_bytes(cache.key_cache) + cache_tensor_bytes(cache.value_cache)
    if hasattr(cache, "self_attention_cache"):  # encoder-decoder
        return cache_tensor_bytes(cache.self_attention_cache) + cache_tensor_bytes(
            getattr(cache, "cross_attention_cache", None)
        )
    raise TypeError(f"unknown cache type {type(cache).__name__}")


def measure_kv_cache(model: Any, input_ids: Any, attention_mask: Any = None) -> int:
    """Bytes of the cache a causal LM builds for one forward over `input_ids` (batch, context)."""
    import torch

    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True)
    cache = out.get("past_key_values")
    if cache is None:
        cache = out.get("cache")
    return cache_tensor_bytes(cache)


# ------------------------------------------------------------------ comparison and fit table
def compare(estimate: dict[str, Any], measured: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows {component, estimated, measured, ratio} for the components both sides have.

    Activations compare the estimate's saved-for-backward bytes with the measured saved tensors;
    on CUDA the step's estimated total is also set against the measured peak allocated.
    """
    est, got = estimate["bytes"], measured["bytes"]
    pairs = [
        ("weights", est["weights"], got["weights"]),
        ("gradients", est["gradients"], got["gradients"]),
        ("optimizer_state", est["optimizer_state"], got["optimizer_state"]),
        (
            "activations (saved)",
            estimate["activations_detail"]["saved_for_backward"],
            got["activations"],
        ),
    ]
    if measured["peak"]["kind"] == "cuda_allocated":
        pairs.append(
            (
                "train step peak",
                estimate["phases"]["train_step"]["bytes"],
                measured["peak"]["bytes"],
            )
        )
    return [
        {"component": c, "estimated": e, "measured": m, "ratio": e / m if m else None}
        for c, e, m in pairs
    ]


def format_bytes(n: int | float) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows, strict=True)]
    lines = [header, ["-" * w for w in widths], *rows]
    return "\n".join(
        "  ".join(
            str(x).rjust(w) if j else str(x).ljust(w)
            for j, (x, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in lines
    )


def format_comparison(rows: Sequence[dict[str, Any]]) -> str:
    body = [
        [
            r["component"],
            format_bytes(r["estimated"]),
            format_bytes(r["measured"]),
            "-" if r["ratio"] is None else f"{r['ratio']:.3f}",
        ]
        for r in rows
    ]
    return _table(["component", "estimated", "measured", "est/meas"], body)


def fit_table(
    estimate: dict[str, Any], cards: Sequence[dict[str, Any]], margin_fraction: float
) -> list[dict[str, Any]]:
    """Does the run fit each card, keeping `margin_fraction` of its memory free?

    cards: [{name, memory_gib}]. Per card: need (the estimate's peak phase), margin left (bytes,
    % of the card), fits, and max_micro_batch: the largest micro-batch whose every phase fits
    in memory_gib x (1 - margin_fraction), from fixed + bytes_per_example x micro_batch (None when
    no phase grows with the micro-batch).
    """
    if not 0 <= margin_fraction < 1:
        raise CampaignError(f"margin_fraction: {margin_fraction} is not in [0, 1)")
    phases = estimate["phases"]
    need, phase = estimate["peak_bytes"], estimate["peak_phase"]
    rows = []
    for n, card in enumerate(cards):
        name, gib = card.get("name"), card.get("memory_gib")
        if not isinstance(name, str) or not name:
            raise CampaignError(f"cards[{n}].name: expected a card name")
        if isinstance(gib, bool) or not isinstance(gib, int | float) or gib <= 0:
            raise CampaignError(f"cards[{n}].memory_gib: expected a number > 0, got {gib!r}")
        capacity = int(gib * GIB)
        usable = capacity * (1 - margin_fraction)
        limits = []
        for p in phases.values():
            if p["bytes_per_example"] > 0:
                limits.append(
                    max(0, math.floor((usable - p["fixed_bytes"]) / p["bytes_per_example"]))
                )
            elif p["fixed_bytes"] > usable:
                limits.append(0)
        rows.append(
            {
                "card": name,
                "memory_bytes": capacity,
                "need_bytes": need,
                "phase": phase,
                "margin_bytes": capacity - need,
                "margin_pct": 100.0 * (capacity - need) / capacity,
                "required_margin_pct": 100.0 * margin_fraction,
                "fits": need <= usable,
                "micro_batch": estimate["micro_batch"],
                "max_micro_batch": min(limits) if limits else None,
            }
        )
    return rows


def format_fit_table(rows: Sequence[dict[str, Any]]) -> str:
    """The fit table as aligned text, one line per card."""
    body = [
        [
            r["card"],
            format_bytes(r["memory_bytes"]),
            f"{format_bytes(r['need_bytes'])} ({r['phase']})",
            format_bytes(r["margin_bytes"]),
            f"{r['margin_pct']:.1f}%",
            f"{r['required_margin_pct']:.0f}%",
            "yes" if r["fits"] else "NO",
            str(r["micro_batch"]),
            "any" if r["max_micro_batch"] is None else str(r["max_micro_batch"]),
        ]
        for r in rows
    ]
    header = [
        "card",
        "memory",
        "need (phase)",
        "margin",
        "margin %",
        "required",
        "fits",
        "micro_batch",
        "max micro_batch",
    ]
    return _table(header, body)
