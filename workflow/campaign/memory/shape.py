"""The model's geometry from a config (known families: BERT, GPT-2), its parameter count with
and without LoRA, and the KV cache a decoder keeps while generating.

Another architecture (a pretrained RoBERTa, Llama, ...) has no analytic model here:
`analytic_family` says so without raising, and the memory check measures such a model instead
(`campaign.memory.probe`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from campaign.core.errors import CampaignError
from campaign.core.tasks import TASKS, module_of
from campaign.core.tensors import kv_cache_bytes  # noqa: F401 (its public home here)

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
    task: str  # a task with an analytic memory model (head_of: "classifier" or "lm")
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    intermediate_size: int
    max_positions: int
    num_labels: int  # 0 for a causal LM's head
    dropout: float

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_heads

    @property
    def head(self) -> str | None:
        """The task's head: "classifier" (over num_labels) or "lm" (over the vocabulary)."""
        return head_of(self.task)


def head_of(task: str | None) -> str | None:
    """The head of task `task`'s model as the memory model sizes it (TaskModule.memory_head:
    "classifier", "lm"), None for a task without an analytic memory model or no task."""
    return module_of(task).memory_head() if task in TASKS else None


def analytic_tasks() -> list[str]:
    """The tasks the analytic memory model sizes (a head_of), in TASKS order."""
    return [name for name in TASKS if head_of(name) is not None]


ANALYTIC_FAMILIES = ("bert", "gpt2")


class UnknownArchitecture(CampaignError):
    """The config names an architecture with no analytic memory model (measure it instead)."""


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
        raise UnknownArchitecture(
            f"model config: model_type {arch!r} has no analytic memory model (bert, gpt2); "
            "measure it (campaign.memory.probe)"
        )
    out = {ours: config.get(theirs) for ours, theirs in _HF_KEYS[arch].items()}
    out["architecture"] = arch
    out["vocab_size"] = config["vocab_size"]
    if arch == "gpt2" and out["intermediate_size"] is None:
        out["intermediate_size"] = 4 * out["hidden_size"]  # GPT-2's n_inner=None means 4*n_embd
    if "id2label" in config:
        out["num_labels"] = len(config["id2label"])
    return out


def analytic_family(model_cfg: dict) -> str | None:
    """The known family ("bert", "gpt2") of the `model` section's config, or None: no analytic
    model (another architecture, or a BERT causal LM), so the model is to be measured."""
    config = model_cfg.get("config") or {}
    arch = config.get("model_type", config.get("architecture"))
    if arch not in ANALYTIC_FAMILIES:
        return None
    if head_of(model_cfg.get("task")) == "lm" and arch != "gpt2":
        return None
    return arch


def model_shape(model_cfg: dict, num_labels: int | None = None) -> ModelShape:
    """The geometry of the `model` section (task, config, tokenizer).

    The vocabulary is `config.vocab_size` when given (a pretrained config), else
    `tokenizer.vocab_size` (the size the tokenizer is trained to; a tiny corpus can give fewer
    tokens, so pass the real count to `estimate_memory` as n_params when it is known).
    `num_labels` (classes of the train split) is needed for sequence classification.
    """
    task = model_cfg.get("task")
    head = head_of(task)
    if head is None:
        raise CampaignError(f"model.task: {task!r} is not one of {', '.join(analytic_tasks())}")
    cfg = _campaign_config(model_cfg.get("config") or {})
    arch = cfg.get("architecture")
    if arch not in ("bert", "gpt2"):
        raise CampaignError(f"model.config.architecture: {arch!r} is not one of bert, gpt2")
    if head == "lm" and arch != "gpt2":
        raise CampaignError(f"model.config.architecture: {task} needs gpt2 (a decoder)")
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
    if head == "classifier":
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
    if shape.head == "lm":
        return [Linear("lm_head", h, shape.vocab_size, False)]
    return [Linear("score", h, shape.num_labels, False)]


# peft wraps the task head of a sequence classifier in ModulesToSaveWrapper: a trainable copy.
HEAD_MODULES = ("classifier", "score")


def lora_targets(shape: ModelShape, lora: dict | None) -> dict[str, int]:
    """{module name: rank} of the modules peft would adapt (name == target or endswith .target)."""
    if not lora:
        return {}
    targets = list(lora.get("target_modules") or [])
    rank = lora.get("r")
    if not isinstance(rank, int) or rank < 1:
        raise CampaignError("train.lora.r: expected a whole number >= 1")
    modules = [m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)]
    modules += [m for m in head_linears(shape) if m.name not in (*HEAD_MODULES, "lm_head")]
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


def quantized_linears(shape: ModelShape) -> list[Linear]:
    """The nn.Linear modules a quantized base (train.base_quantization) quantizes: every matmul
    but the task head (train/basequant.py). GPT-2's blocks are Conv1D: none."""
    if shape.architecture != "bert":
        return []
    modules = [m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)]
    return modules + [m for m in head_linears(shape) if m.name not in (*HEAD_MODULES, "lm_head")]


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
        (head_sizes if m.name in HEAD_MODULES else sizes).extend(tensors)
    total = sum(sizes) + sum(head_sizes)
    tensors = len(sizes) + len(head_sizes)
    if not lora:
        return ParameterCount(total, total, tensors, tensors)
    adapters: list[int] = []
    by_name = {m.name: m for layer in range(shape.num_layers) for m in layer_linears(shape, layer)}
    by_name.update({m.name: m for m in head_linears(shape)})
    for name, rank in lora_targets(shape, lora).items():
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
