"""How many bytes autograd saves for backward in one micro-batch.

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
A quantized base (train.base_quantization int8_weight_only, torchao per-row) casts each int8
weight to the compute dtype for its matmul and rescales the output by the row scales: where the
input needs a gradient, autograd saves that cast (n_in*n_out*d) and the scales (n_out*d).
LoRA: a frozen linear saves no input and nothing upstream of the first adapter is saved; each
    adapter saves its input, T*rank*d (A's output) and its dropout mask + dropped input.
gradient checkpointing: a layer keeps only its input T*h*4 (+ the b*s*s bool mask once); backward
    recomputes one layer at a time, which adds one full layer (`recompute`).
evaluation (`eval_activation_bytes`, no gradients, eval mode): N sequences (the campaign scores a
    causal LM's n_labels candidate responses per example: N = micro_batch * n_labels), T = N*s.
    Nothing is saved; the peak is the larger of one layer's transients, 2*T*h*4 (residual, norm
    output) + max(feed-forward: BERT 2*T*i*d, GPT-2 4*T*h*4 + 4*T*i*d (gelu_new's temporaries);
    attention: 6*T*h*d + fused N*s*s*d (the mask) or math 2*a*s*T*4 (scores, probabilities)),
    and the scores: causal_lm keeps the fp32
    logits N*s*V*4 and their log-softmax N*(s-1)*V*4, a classifier N*C*4 a few times; plus, under
    autocast, the d-byte copy of every matmul weight (cached for the forward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from campaign.core.errors import CampaignError
from campaign.memory.shape import (
    ATTENTION_IMPLEMENTATIONS,
    FP32_BYTES,
    HEAD_MODULES,
    INT64_BYTES,
    Linear,
    ModelShape,
    head_linears,
    layer_linears,
    lora_targets,
    quantized_linears,
)


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
    quantized: frozenset[str] = frozenset()  # int8 weight-only linears (quantized base)

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
    if m.name in c.quantized:
        if live:
            led.add((m.name, "int8_weight_cast"), m.n_in * m.n_out * c.d)
            led.add((m.name, "int8_row_scales"), m.n_out * c.d)
    elif c.d != FP32_BYTES and live:
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
    trains = c.full_ft or head.name in HEAD_MODULES
    if trains:
        cast = d != FP32_BYTES
        led.add(("lnf_out", head.name) if cast else "lnf_out", t * h * d)
    if d != FP32_BYTES:
        led.add((head.name, "weight_cast"), head.n_in * head.n_out * d)
    if shape.head == "lm":
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
    quantized_base: bool = False,
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
        lora=lora_targets(shape, lora),
        lora_dropout=float((lora or {}).get("dropout") or 0.0),
        quantized=frozenset(m.name for m in quantized_linears(shape))
        if quantized_base
        else (frozenset()),
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


def _matmul_weights(shape: ModelShape) -> int:
    """Elements of every matmul weight (blocks and head; GPT-2's tied LM head counts once)."""
    mats = [m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)]
    mats += head_linears(shape)
    return sum(m.n_in * m.n_out for m in mats)


def eval_activation_bytes(
    shape: ModelShape,
    sequences: int,
    seq_len: int,
    dtype_bytes: int,
    *,
    device: str = "cuda",
    attention: str = "sdpa",
) -> dict[str, int]:
    """Peak bytes of scoring `sequences` sequences of `seq_len` tokens without gradients.

    Returns {layer, scores, weight_casts, total}: the transients of one block, of the logits
    and the loss (module doc), the autocast weight copies, and total = casts + the larger of
    the two. An estimate: the campaign's scoring (train.loop) batches micro_batch sequences for
    a classifier and micro_batch * n_labels for a causal LM, which the caller passes.
    """
    n, s, d = sequences, seq_len, dtype_bytes
    t, h, i, a = n * s, shape.hidden_size, shape.intermediate_size, shape.num_heads
    if shape.architecture == "bert":
        ffn = 2 * t * i * d
    else:
        ffn = 4 * t * h * FP32_BYTES + 4 * t * i * d
    attn = 6 * t * h * d
    if attention_kernel(attention, device, 0.0) == "fused":  # eval mode: no dropout
        attn += n * s * s * d
    else:
        attn += 2 * a * s * t * FP32_BYTES
    layer = 2 * t * h * FP32_BYTES + max(ffn, attn)
    if shape.head == "lm":
        scores = n * shape.vocab_size * FP32_BYTES * (2 * s - 1)
    else:
        scores = 3 * n * shape.num_labels * FP32_BYTES
    casts = _matmul_weights(shape) * d if d != FP32_BYTES else 0
    return {
        "layer": layer,
        "scores": scores,
        "weight_casts": casts,
        "total": casts + max(layer, scores),
    }
