"""Models and tokenizers for a run: built from a small config or loaded from a local folder,
optionally wrapped with LoRA, and saved as one folder (safetensors + config + tokenizer).

transformers and peft are imported inside the functions: they cost seconds to import.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from campaign.core.errors import CampaignError
from campaign.core.tasks import TASKS, module_of, template_files

ARCHITECTURES = ("bert", "gpt2", "llama")
# llama: a decoder with grouped-query attention (num_key_value_heads < num_attention_heads), the
# layout of today's instruct models, small enough from a config for tests on a CPU.
ARCH_KEYS = {"llama": ("num_key_value_heads",)}
CONFIG_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
    "dropout",
)
TOKENIZER_KEYS = ("vocab_size", "min_frequency", "lowercase")
LORA_KEYS = ("r", "alpha", "dropout", "target_modules")
BERT_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")
GPT2_EOS, GPT2_PAD = "<|endoftext|>", "<pad>"


def _need(section: dict, keys: Iterable[str], where: str) -> None:
    for key in keys:
        if key not in section:
            raise CampaignError(f"{where}.{key}: missing (required here)")


def label_names(train_labels: Iterable[str]) -> list[str]:
    """The classes: sorted distinct labels of the train split; their position is the label id."""
    return sorted(set(train_labels))


def source_path(model_spec: dict, root: Path) -> Path | None:
    """The pretrained model folder named by model.source, or None for `from_config`."""
    source = model_spec["source"]
    if source == "from_config":
        return None
    path = Path(source)
    path = path if path.is_absolute() else Path(root) / path
    if not (path / "config.json").is_file():
        raise CampaignError(f"model.source: {source} is not a model folder (no config.json)")
    return path


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """The base_model input a job's params name (Stage.derive_inputs): model.source's folder, or
    nothing for from_config; and the chat template file model.chat_template names, if any.
    `spec`: a run spec ({model, train, seed}) or a preflight spec."""
    model = spec["model"] if "model" in spec else spec["run"]["model"]
    source = model["source"]
    return {
        "base_model": [] if source == "from_config" else [Path(root) / source],
        "chat_template": template_files(model, root),
    }


def check_model_spec(model_spec: dict) -> None:
    """The combinations the builders support, with one-line errors naming the key."""
    task = model_spec.get("task")
    if task not in TASKS:
        raise CampaignError(f"model.task: {task!r} is not one of {', '.join(TASKS)}")
    tok = model_spec.get("tokenizer")
    if not isinstance(tok, dict) or tok.get("source") not in ("train_split", "model"):
        raise CampaignError("model.tokenizer.source: expected train_split or model")
    if model_spec["source"] == "from_config":
        config = model_spec.get("config")
        if not isinstance(config, dict):
            raise CampaignError("model.config: required when model.source is from_config")
        if config.get("architecture") not in ARCHITECTURES:
            raise CampaignError(
                f"model.config.architecture: {config.get('architecture')!r} is not one of "
                f"{', '.join(ARCHITECTURES)}"
            )
        _need(config, CONFIG_KEYS + ARCH_KEYS.get(config["architecture"], ()), "model.config")
        # what the task trains (a classifier, a decoder) refuses the architectures it cannot use
        module_of(task).check_architecture(config["architecture"])
        if tok["source"] != "train_split":
            raise CampaignError(
                "model.tokenizer.source: a from_config model has no tokenizer of its own; "
                "use train_split"
            )
        _need(tok, TOKENIZER_KEYS, "model.tokenizer")
    elif tok["source"] != "model":
        raise CampaignError(
            "model.tokenizer.source: a pretrained model keeps its own tokenizer (its embeddings "
            "are indexed by it); use model"
        )


# ------------------------------------------------------------------ tokenizers
def _continuation_symbols(tok, texts: Sequence[str], prefix: str = "##") -> list[str]:
    """Every "##c" a WordPiece trainer will create: characters after a word's first, sorted."""
    chars: set[str] = set()
    for text in texts:
        normalized = tok.normalizer.normalize_str(text) if tok.normalizer else text
        for word, _span in tok.pre_tokenizer.pre_tokenize_str(normalized):
            chars.update(word[1:])
    return [prefix + c for c in sorted(chars)]


def _drop_added_tokens(tok, keep: Sequence[str]):
    """The tokenizer with only `keep` as added (special) tokens; the vocabulary is unchanged."""
    import json

    from tokenizers import Tokenizer

    data = json.loads(tok.to_str())
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] in keep]
    return Tokenizer.from_str(json.dumps(data))


def train_tokenizer(
    texts: Iterable[str], architecture: str, vocab_size: int, min_frequency: int, lowercase: bool
):
    """A fast tokenizer trained on `texts` only (pass the TRAIN split, never evaluation data).

    bert: WordPiece with [CLS] text [SEP]; gpt2: byte-level BPE with <|endoftext|> as EOS and
    a separate <pad>. Deterministic for the same texts and settings.
    """
    from tokenizers import (
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast

    texts = list(texts)
    if architecture == "bert":
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
        tok.normalizer = normalizers.BertNormalizer(lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        # tokenizers (<= 0.23) gives the "##x" continuation symbols ids in hash-map order, and
        # merges break count ties by id, so two trainings can differ (huggingface/tokenizers
        # #1794). Registering those symbols up front, in sorted order, fixes their ids.
        suffixes = _continuation_symbols(tok, texts)
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[*BERT_SPECIALS, *suffixes],
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        tok = _drop_added_tokens(tok, keep=BERT_SPECIALS)
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
        tok.decoder = decoders.WordPiece()
        specials = dict(
            unk_token="[UNK]",
            pad_token="[PAD]",
            cls_token="[CLS]",
            sep_token="[SEP]",
            mask_token="[MASK]",
        )
    elif architecture in ("gpt2", "llama"):  # byte-level BPE for both decoders
        tok = Tokenizer(models.BPE())
        if lowercase:
            tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=[GPT2_EOS, GPT2_PAD],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=False,
        )
        tok.train_from_iterator(texts, trainer)
        specials = dict(
            bos_token=GPT2_EOS, eos_token=GPT2_EOS, unk_token=GPT2_EOS, pad_token=GPT2_PAD
        )
    else:
        raise CampaignError(f"model.config.architecture: {architecture!r} has no tokenizer recipe")
    return PreTrainedTokenizerFast(tokenizer_object=tok, **specials)


def load_tokenizer(path: Path, task: str):
    """The tokenizer saved with a model folder; a decoder without a pad token pads with EOS."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(path))
    if tok.pad_token_id is None:
        if tok.eos_token_id is None:
            raise CampaignError(f"model.source: the tokenizer in {path} has no pad or EOS token")
        tok.pad_token = tok.eos_token
    if module_of(task).decoder and tok.eos_token_id is None:
        # An encoder tokenizer ([SEP] ends every sequence) can still end a response.
        tok.eos_token = tok.sep_token
    return tok


def make_tokenizer(model_spec: dict, train_texts: Sequence[str], source: Path | None):
    """The run's tokenizer: the pretrained model's, or one trained on the train texts only."""
    if source is not None:
        return load_tokenizer(source, model_spec["task"])
    settings = model_spec["tokenizer"]
    tok = train_tokenizer(
        train_texts,
        model_spec["config"]["architecture"],
        vocab_size=settings["vocab_size"],
        min_frequency=settings["min_frequency"],
        lowercase=settings["lowercase"],
    )
    tok.model_max_length = model_spec["config"]["max_position_embeddings"]
    return tok


# ------------------------------------------------------------------ models
# model.config's sizes, and each built-in architecture's transformers names for them (BERT's
# are the same) and for its dropout probabilities (all set to model.config.dropout).
_SIZE_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "intermediate_size",
    "max_position_embeddings",
)
_SIZE_NAMES = {
    "bert": _SIZE_KEYS,
    "gpt2": ("n_embd", "n_layer", "n_head", "n_inner", "n_positions"),
}
_DROPOUT_NAMES = {
    "bert": ("hidden_dropout_prob", "attention_probs_dropout_prob"),
    "gpt2": ("resid_pdrop", "embd_pdrop", "attn_pdrop", "summary_first_dropout"),
}


def _architecture_config(cfg: dict, architecture: str, tokenizer) -> dict[str, Any]:
    """The config arguments BERT and GPT-2 take alike: the vocabulary, model.config's sizes and
    dropout under the architecture's names, the pad token."""
    names = _SIZE_NAMES[architecture]
    sizes = {name: cfg[key] for name, key in zip(names, _SIZE_KEYS, strict=True)}
    dropout = dict.fromkeys(_DROPOUT_NAMES[architecture], cfg["dropout"])
    return {
        "vocab_size": len(tokenizer),
        **sizes,
        **dropout,
        "pad_token_id": tokenizer.pad_token_id,
    }


def _from_config(model_spec: dict, tokenizer, labels: list[str]):
    import transformers as tf

    cfg, task = model_spec["config"], module_of(model_spec["task"])
    label_map: dict[str, Any] = task.head_config(labels)
    if cfg["architecture"] == "bert":
        config = tf.BertConfig(**_architecture_config(cfg, "bert", tokenizer), **label_map)
        return _model_for(task, config)
    if cfg["architecture"] == "llama":
        return _model_for(task, llama_config(cfg, tokenizer))
    config = tf.GPT2Config(
        **_architecture_config(cfg, "gpt2", tokenizer),
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        **label_map,
    )
    return _model_for(task, config)


def _model_for(task, config):
    """A fresh model of the task's class for `config` (BertForSequenceClassification,
    GPT2LMHeadModel, LlamaForCausalLM, ...): the class its Auto class maps the config to,
    built directly (weights drawn from torch's RNG as the class's own __init__ draws them)."""
    return task.model_class()._model_mapping[type(config)](config)


def llama_config(cfg: dict, tokenizer):
    """A Llama config from model.config: grouped-query attention with num_key_value_heads heads
    of keys and values shared by num_attention_heads query heads (which it must divide)."""
    import transformers as tf

    heads, kv_heads = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    if not isinstance(kv_heads, int) or kv_heads < 1 or heads % kv_heads:
        raise CampaignError(
            f"model.config.num_key_value_heads: {kv_heads!r} must divide "
            f"num_attention_heads ({heads})"
        )
    return tf.LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=cfg["hidden_size"],
        num_hidden_layers=cfg["num_hidden_layers"],
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        intermediate_size=cfg["intermediate_size"],
        max_position_embeddings=cfg["max_position_embeddings"],
        attention_dropout=cfg["dropout"],
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )


def pretrained_options(task: str, labels: list[str]) -> dict:
    """from_pretrained's keys for a base made into the task's model: a head of `labels`
    (the task's head_config), if it has one."""
    head = module_of(task).head_config(labels)
    if not head:
        return {}
    # A checkpoint with a head for other labels (another task's classifier): the head is new,
    # like any head a checkpoint lacks; every other weight is loaded.
    return {**head, "ignore_mismatched_sizes": True}


def _pretrained(path: Path, task: str, tokenizer, labels: list[str]):
    import torch

    auto = module_of(task).model_class()
    model = auto.from_pretrained(str(path), dtype=torch.float32, **pretrained_options(task, labels))
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model


def build_model(model_spec: dict, tokenizer, labels: list[str], seed: int, source: Path | None):
    """A fresh model for the task; new weights drawn from torch's RNG seeded with `seed`."""
    import torch

    torch.manual_seed(seed)
    if source is None:
        model = _from_config(model_spec, tokenizer, labels)
    else:
        model = _pretrained(source, model_spec["task"], tokenizer, labels)
    # Every module in train mode: from_pretrained leaves them in eval mode, and a peft wrapper
    # made later is in train mode at its top only, so the loop's `model.training` test would
    # never turn dropout (or gradient checkpointing) on for a LoRA run on a pretrained base.
    return model.float().train()


def set_base_dropout(model, on: bool) -> int:
    """train.base_dropout: false sets every dropout of the base model to p = 0 (its hidden,
    attention and classifier-input dropout), true leaves the model's own probabilities. Call it
    before LoRA wraps the model, so train.lora.dropout stays the adapters' own. Returns the
    number of dropout modules set to 0.

    Why a key: transformers and peft train the base in train mode (dropout on), which their
    documentation's loops do; on a short LoRA run of a pretrained encoder that noise can cost
    more than it regularizes (benchmarks/bench_learning.py, fortunes8 at 120 steps: off is
    +3.0 points [+0.7, +5.4] over 5 seeds), so it is a decision to make and measure (an
    ablation factor), not a silent default."""
    import torch

    if on:
        return 0
    count = 0
    for module in model.modules():
        if isinstance(module, torch.nn.modules.dropout._DropoutNd):
            module.p = 0.0
            count += 1
    return count


def check_lora(lora: dict) -> None:
    _need(lora, LORA_KEYS, "train.lora")
    if not isinstance(lora["target_modules"], list) or not lora["target_modules"]:
        raise CampaignError("train.lora.target_modules: expected a non-empty list of module names")


def apply_lora(model, lora: dict, task: str):
    """Wrap with LoRA adapters; only they (and a classification head) train. The task's
    lora_task_type says what peft wraps (a classifier's new head trains and saves too)."""
    from peft import LoraConfig, get_peft_model

    check_lora(lora)
    config = LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=list(lora["target_modules"]),
        task_type=module_of(task).lora_task_type(),
        fan_in_fan_out=model.config.model_type == "gpt2",  # GPT-2 stores Conv1D weights (in, out)
    )
    try:
        return get_peft_model(model, config)
    except ValueError as e:
        raise CampaignError(f"train.lora.target_modules: {e}") from None


def check_base_quantization(lora: dict | None, method: str | None) -> None:
    """train.base_quantization: a known method, and only with train.lora (basequant.py)."""
    from campaign.train import basequant

    basequant.base_quantization_method({"lora": lora, "base_quantization": method})


def quantize_base(model, train_spec: dict, device_type: str):
    """The base model with its linear weights quantized as train.base_quantization says (before
    LoRA wraps them), or unchanged when it is null or absent."""
    from campaign.train import basequant

    method = basequant.base_quantization_method(train_spec)
    if method is None:
        return model
    return basequant.quantize_base(model, method, device_type)


def has_quantized_base(model) -> bool:
    from campaign.train.basequant import is_quantized

    return any(is_quantized(p) for p in model.parameters())


def unwrap(model):
    """A plain transformers model: LoRA adapters merged into the base weights. On a quantized
    base, the base is dequantized to fp32 first (basequant.merge_dequantized)."""
    if has_quantized_base(model):
        from campaign.train.basequant import merge_dequantized

        return merge_dequantized(model)
    if hasattr(model, "merge_and_unload"):
        return model.merge_and_unload()
    return model


def save_model(model, tokenizer, folder: Path) -> None:
    """Write model.safetensors, config.json and the tokenizer files into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(folder))
    tokenizer.save_pretrained(str(folder))


# ------------------------------------------------------------------ adapter-sized artifacts
# A LoRA run on a pretrained base saves its adapter (peft's layout: adapter_config.json and
# adapter_model.safetensors, loadable with PeftModel.from_pretrained) and, in BASE_FILE, the
# content hash of the base folder it was trained on; readers load the base, check its hash and
# merge the adapter in memory (load_run_model). A from_config base has no folder to name: such a
# run saves the merged model, as before.
BASE_FILE = "base.json"
ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"


def is_adapter_model(model) -> bool:
    return hasattr(model, "peft_config")


def _plain(value):
    """JSON-able and the same bytes in every process: sets (peft's target_modules) sorted."""
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "value") and type(value).__module__.startswith("peft"):
        return value.value  # peft's enums (TaskType, PeftType)
    return value


def save_adapter(model, tokenizer, folder: Path, base: Path, labels: list[str], method) -> None:
    """The adapter of a LoRA model (its trainable tensors: LoRA A/B and a trained head copy), its
    config, the tokenizer and BASE_FILE: what a reader needs with the base folder `base`."""
    import json

    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    from campaign.core.hashing import hash_tree

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in get_peft_model_state_dict(model).items()}
    save_file(state, str(folder / ADAPTER_WEIGHTS), metadata={"format": "pt"})
    config = _plain(model.peft_config["default"].to_dict())
    config["base_model_name_or_path"] = None  # the base is named by its hash, not a path
    config["inference_mode"] = True
    (folder / ADAPTER_CONFIG).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    info = {
        "base_hash": hash_tree(base),
        "base_quantization": method,
        "labels": list(labels),
        "task": head_task(config["task_type"]),
    }
    (folder / BASE_FILE).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n")
    tokenizer.save_pretrained(str(folder))


def head_task(task_type) -> str:
    """The task BASE_FILE names an adapter's head by: the first task (in TASKS' order) whose
    LoRA task type (peft's TaskType, or its string) is `task_type`; a generation run's adapter
    is read as a causal LM's. An adapter of another or no task type (a user's LoraConfig
    without one) is read as a head over labels: the first task with one output per label."""
    found = [name for name in TASKS if module_of(name).lora_task_type() == task_type]
    return (found or [name for name in TASKS if module_of(name).label_head])[0]


def save_run_model(model, tokenizer, folder: Path, base: Path | None, labels, method=None):
    """A finished run's model folder: the adapter and the base's hash for LoRA on a pretrained
    base (`base`: its folder), the merged plain model otherwise. Returns the model to score
    (merged in memory, the same weights a reader of the folder gets)."""
    if base is not None and is_adapter_model(model):
        save_adapter(model, tokenizer, folder, base, labels, method)
        return unwrap(model)
    plain = unwrap(model)
    save_model(plain, tokenizer, folder)
    return plain


def adapter_info(folder: Path) -> dict | None:
    """BASE_FILE of a model folder (None: a plain model folder)."""
    import json

    path = Path(folder) / BASE_FILE
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise CampaignError(f"{path}: not readable JSON ({e})") from None


def check_base(folder: Path, base: Path | None) -> dict | None:
    """BASE_FILE's record, after checking `base` is the folder the adapter was trained on."""
    from campaign.core.hashing import hash_tree

    info = adapter_info(folder)
    if info is None:
        return None
    if base is None:
        raise CampaignError(
            f"{Path(folder) / BASE_FILE}: this model folder is a LoRA adapter; its base model "
            "folder (input 'base_model') is needed to load it"
        )
    got = hash_tree(base)
    if got != info["base_hash"]:
        raise CampaignError(
            f"{Path(folder) / BASE_FILE}: the adapter was trained on a base with content hash "
            f"{info['base_hash'][:16]}, but {base} hashes to {got[:16]}"
        )
    return info


def load_run_model(folder: Path, task: str, base: Path | None = None):
    """A run's model folder as a plain fp32 transformers model in eval mode: from_pretrained for
    a plain folder; for an adapter folder, the base (hash checked) with the adapter merged."""
    import torch

    info = check_base(folder, base)
    if info is None:
        auto = module_of(task).model_class()
        return auto.from_pretrained(str(folder), dtype=torch.float32).eval()
    from peft import PeftModel

    tokenizer = load_tokenizer(Path(folder), task)
    # The base's new head (a classifier's) is drawn and then replaced by the adapter's trained
    # copy; a fixed seed keeps even that draw the same.
    torch.manual_seed(0)
    model = _pretrained(Path(base), task, tokenizer, list(info["labels"])).float()
    method = info.get("base_quantization")
    if method is not None:
        from campaign.train import basequant

        model = basequant.quantize_base(model, method, "cpu")
    model = PeftModel.from_pretrained(model, str(folder))
    return unwrap(model).eval()


def enable_gradient_checkpointing(model) -> None:
    """train.gradient_checkpointing: transformers' activation checkpointing, non-reentrant (it
    replays each layer's RNG state, so dropout draws the same masks: the same weights)."""
    if not getattr(model, "supports_gradient_checkpointing", False):
        arch = getattr(model.config, "model_type", type(model).__name__)
        raise CampaignError(
            f"train.gradient_checkpointing: this {arch} model does not support it; set false"
        )
    if hasattr(model, "activation_checkpointing_enable"):  # transformers >= 5
        model.activation_checkpointing_enable({"use_reentrant": False})
    else:
        model.gradient_checkpointing_enable({"use_reentrant": False})


def count_parameters(model) -> tuple[int, int]:
    """(all, trainable) parameter counts."""
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return total, trainable


# ------------------------------------------------------------------ a model folder's weights
# Read here, not in campaign.core.io: the training stage reads an adapter's tensor names (the
# command adapter's check), and core.io must stay out of its code version (an edit of a
# reader would retrain every run).
def safetensors_header(path: str | Path) -> dict:
    """The JSON header of a safetensors file (tensor name -> dtype, shape, offsets; and
    "__metadata__"), read without the weights: an 8-byte little-endian length, then the JSON."""
    import json

    path = Path(path)
    with path.open("rb") as f:
        size = int.from_bytes(f.read(8), "little")
        if size > path.stat().st_size - 8:
            raise CampaignError(f"{path}: not a safetensors file (its header length is wrong)")
        try:
            header = json.loads(f.read(size))
        except ValueError:
            raise CampaignError(
                f"{path}: not a safetensors file (its header is not JSON)"
            ) from None
    if not isinstance(header, dict):
        raise CampaignError(f"{path}: not a safetensors file (its header is not a JSON object)")
    return header
