"""`campaign init`: a validated params file for a user's own data and model, from a few flags.

It reads the data file (all of it: it is local) with the same reader the manifest stage uses,
counts records and labels, reads the model folder's config.json, and chooses what the flags
do not say: the tokenizer source, LoRA target modules for the model's family, train.max_length
from the texts' token lengths, a first small design (train.lr at two levels, seeds 1 and 2),
CPU-cheap quantized variants, and a split salt that passes the audit's balance checks. What it
cannot infer it refuses in one line, and then writes nothing. The file starts from the
project's params.yaml, so every section and its comments are there; the result is checked by
the validator `campaign validate` uses before it is written (atomically).
"""

from __future__ import annotations

import copy
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from campaign.core.errors import CampaignError
from campaign.core.tasks import TASKS, floors_of, module_of
from campaign.preflight import tokenizer_problem
from campaign.tools.init_tokenizers import (
    from_config_architecture,
    from_config_tokenizer,
    run_tokenizers,
)
from campaign.tools.params_yaml import flow, render
from campaign.train import safetensors_header

# The few-shot floor campaign init writes: each item's 3 nearest training prompts.
FEW_SHOT = {"k": 3, "choose": "nearest"}
TEMPLATE = Path(__file__).resolve().parents[3] / "params.yaml"

# LoRA target modules per config.json model_type: the attention projections of query and value
# (Hu et al.'s choice), under each family's module names. GPT-2 fuses q, k, v in c_attn.
LORA_TARGETS = {
    "bert": ["query", "value"],
    "roberta": ["query", "value"],
    "xlm-roberta": ["query", "value"],
    "camembert": ["query", "value"],
    "electra": ["query", "value"],
    "distilbert": ["q_lin", "v_lin"],
    "gpt2": ["c_attn"],
    "llama": ["q_proj", "v_proj"],
    "mistral": ["q_proj", "v_proj"],
    "qwen2": ["q_proj", "v_proj"],
    "qwen3": ["q_proj", "v_proj"],
}
# Families that only encode: no causal LM head to fine-tune for --task causal_lm.
ENCODERS = ("bert", "roberta", "xlm-roberta", "camembert", "electra", "distilbert")
LORA = {"r": 8, "alpha": 16, "dropout": 0.0}
# The baseline lr and the design's two levels: LoRA adapters, all weights of a pretrained
# model, and a small model trained from scratch want very different steps.
LR_LEVELS = {
    "lora": (1.0e-3, [3.0e-4, 1.0e-3]),
    "full": (5.0e-5, [2.0e-5, 5.0e-5]),
    "from_config": (3.0e-3, [1.0e-3, 3.0e-3]),
}
SEEDS = [1, 2]
# Variants that run on any CPU and cost seconds: the reference, and two int8 ones to decide.
VARIANTS = ["fp32", "int8_dynamic", "onnx_int8_dynamic"]
FRACTIONS = {"train": 0.8, "validation": 0.1, "test": 0.1}
FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
LENGTH_QUANTILE = 0.95
LENGTH_STEP = 8  # max_length is rounded up to a multiple of this
MIN_LENGTH = 16
FROM_CONFIG_MAX_POSITIONS = 512  # the small from_config model's longest sequence
WORDS_TO_TOKENS = 1.3  # subword tokens per whitespace word, when no tokenizer.json is there
EPOCHS = 2  # of the train split, for train.max_steps
# A label this common makes accuracy flatter a model that predicts it: decide on macro-F1.
MACRO_F1_ABOVE_SHARE = 0.6


@dataclass(frozen=True)
class Choices:
    """What `init` read and chose, printed as its summary."""

    records: int
    labels: dict[str, int]
    family: str  # config.json model_type, or from_config's architecture
    max_length: int
    lora_targets: list[str] | None
    salt_note: str
    metric: str
    quantile: float = LENGTH_QUANTILE  # of token lengths, that train.max_length reaches


# ------------------------------------------------------------------ reading the inputs
def data_format(path: Path, given: str | None) -> str:
    if given is not None:
        return given
    fmt = FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise CampaignError(
            f"--data {path}: cannot tell the format from the suffix {path.suffix!r}; "
            f"pass --format csv, jsonl or parquet"
        )
    return fmt


def read_records(source: dict, fields: dict, flags: dict[str, str]):
    """Every record, through the manifest stage's reader; errors name the flag, not the key."""
    from campaign.data import load_records

    try:
        return load_records([source], fields, Path("."))
    except CampaignError as e:
        message = str(e)
        for key, flag in flags.items():
            message = message.replace(f"data.fields.{key}", flag)
        message = message.replace("data.sources[0].format", "--format")
        raise CampaignError(message) from None


def model_config(folder: Path) -> dict:
    """The pretrained folder's config.json."""
    path = folder / "config.json"
    if not folder.is_dir():
        raise CampaignError(f"--model {folder}: no such folder (or pass --model from_config)")
    if not path.is_file():
        raise CampaignError(
            f"--model {folder}: not a model folder (no config.json; a Hugging Face checkpoint "
            "saved with save_pretrained has one)"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise CampaignError(f"{path}: not valid JSON ({e})") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_type"), str):
        raise CampaignError(f"{path}: has no model_type (which family of model is this?)")
    if (problem := tokenizer_problem(folder)) is not None:
        raise CampaignError(f"--model {folder}: {problem}")
    return config


def check_task(folder: Path, config: dict, task: str) -> None:
    """Refuse an encoder-only folder for a task that needs a language-model head."""
    if module_of(task).init_needs_lm_head() and config["model_type"] in ENCODERS:
        raise CampaignError(
            f"--task {task}: {folder} is a {config['model_type']} model (an encoder, no "
            "language-model head); use a decoder (gpt2, llama, mistral, qwen2) or "
            "--task sequence_classification"
        )


def choose_metric(label_counts: dict[str, int]) -> str:
    """accuracy, or macro_f1 when one label holds more than MACRO_F1_ABOVE_SHARE of the
    records (a model that predicts it alone would score that share in accuracy)."""
    total = sum(label_counts.values())
    return "macro_f1" if max(label_counts.values()) > MACRO_F1_ABOVE_SHARE * total else "accuracy"


def project_path(given: str) -> str:
    """A path as typed, written relative to the project folder, the one `campaign init` runs in
    (where `campaign validate` and the stages resolve data and model paths), when it lies
    inside it, else absolute: a params file that names only the project's own files holds no
    machine's folders (a clone elsewhere, a DVC-shared project, the report's licence table)."""
    path, root = Path(given).resolve(), Path.cwd().resolve()
    return path.relative_to(root).as_posix() if path.is_relative_to(root) else path.as_posix()


def weight_names(folder: Path) -> list[str] | None:
    """Tensor names of the folder's safetensors weights (headers only), or None if it has none."""
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        try:
            return list(json.loads(index.read_text(encoding="utf-8")).get("weight_map", {}))
        except (ValueError, AttributeError):
            raise CampaignError(f"{index}: not a safetensors index (not a JSON object)") from None
    path = folder / "model.safetensors"
    if not path.is_file():
        return None
    header = safetensors_header(path)
    return [name for name in header if name != "__metadata__"]


def lora_targets(folder: Path, config: dict, given: list[str] | None) -> list[str]:
    """The LoRA target modules: --lora-targets, else the family's attention projections; each
    checked against the weights' module names where the folder has safetensors."""
    family = config["model_type"]
    targets = given or LORA_TARGETS.get(family)
    if targets is None:
        raise CampaignError(
            f"--model {folder}: model_type {family!r} has no known LoRA target modules "
            f"(known: {', '.join(sorted(LORA_TARGETS))}); pass --lora-targets NAME,NAME "
            "(module names of its attention projections) or --no-lora"
        )
    names = weight_names(folder)
    if names is not None:
        modules = {part for name in names for part in name.split(".")}
        missing = [t for t in targets if t not in modules]
        if missing:
            raise CampaignError(
                f"--model {folder}: no module named {', '.join(missing)} in its weights "
                f"(model_type {family!r}); pass --lora-targets with its names or --no-lora"
            )
    return list(targets)


def token_lengths(texts: list[str], folder: Path | None) -> list[int]:
    """Tokens per text: by the folder's tokenizer.json (special tokens included), else
    whitespace words x WORDS_TO_TOKENS + 2 (a from_config tokenizer is not trained yet)."""
    tokenizer_file = folder / "tokenizer.json" if folder is not None else None
    if tokenizer_file is not None and tokenizer_file.is_file():
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(tokenizer_file))
        tok.no_truncation()
        tok.no_padding()
        return [len(e.ids) for e in tok.encode_batch(texts)]
    return [math.ceil(len(t.split()) * WORDS_TO_TOKENS) + 2 for t in texts]


def choose_max_length(
    lengths: list[int], max_positions: int, quantile: float = LENGTH_QUANTILE
) -> int:
    """The `quantile` of the token lengths, rounded up to LENGTH_STEP, within
    [MIN_LENGTH, max_positions]: at most 1 - quantile of them are longer."""
    ordered = sorted(lengths)
    at = ordered[min(len(ordered) - 1, math.ceil(quantile * len(ordered)) - 1)]
    rounded = LENGTH_STEP * math.ceil(at / LENGTH_STEP)
    return max(min(MIN_LENGTH, max_positions), min(rounded, max_positions))


def max_positions_of(config: dict) -> int:
    for key in ("max_position_embeddings", "n_positions"):
        if isinstance(config.get(key), int) and config[key] > 0:
            return config[key]
    return FROM_CONFIG_MAX_POSITIONS


def task_fields(args) -> dict:
    """data.fields from the flags, as the task needs them (its init_fields): text and label for
    the label tasks; for generation either --messages-column or --prompt-column and
    --response-column (the label column, if any, only stratifies the split)."""
    fields = {
        "id": args.id_column,
        "text": args.text_column,
        "label": args.label_column,
        "group": args.group_column,
        "timestamp": args.timestamp_column,
    }
    return module_of(args.task).init_fields(args, fields)


# ------------------------------------------------------------------ the params
def model_section(template: dict, args, choices_in: dict) -> dict:
    """The model section: the task, the source, a small config for from_config (a Llama with
    grouped-query attention for generation), the tokenizer, and generation's own keys."""
    pretrained = args.model != "from_config"
    task = args.task
    source = args.model if not pretrained else project_path(args.model)
    model: dict[str, Any] = {"task": task, "source": source}
    if pretrained:
        model["tokenizer"] = {"source": "model"}
    else:
        config = copy.deepcopy(template["model"].get("config") or {})
        config.update(
            architecture=from_config_architecture(task),
            hidden_size=config.get("hidden_size", 64),
            num_hidden_layers=config.get("num_hidden_layers", 2),
            num_attention_heads=config.get("num_attention_heads", 2),
            intermediate_size=config.get("intermediate_size", 128),
            dropout=config.get("dropout", 0.1),
            max_position_embeddings=max(128, choices_in["max_length"]),
        )
        module_of(task).init_config(config)  # generation: grouped-query attention
        model["config"] = config
        model["tokenizer"] = from_config_tokenizer(template, task)
    model.update(choices_in["model_keys"] or {})
    return model


# The metric key of the label tasks (TaskModule.decision_key); a task decided on another key
# has none.
METRIC_KEY = "evaluation.metric"
# What the written file says where build_params dropped a key of the template (by dotted key),
# so the section keeps its comments and the reader learns where the setting went.
DROPPED_NOTES = {
    METRIC_KEY: "metric: none here: generated text is decided on model.generation.metric",
}


def build_params(template: dict, args, records, choices_in: dict) -> dict:
    """The template's params with the user's data, model and a first small design."""
    p = copy.deepcopy(template)
    name = args.name or _name_from(Path(args.out))
    p["campaign"]["name"] = name
    p["data"]["sources"] = [choices_in["source"]]
    p["data"]["fields"] = choices_in["fields"]
    p["data"]["previous_manifest"] = None

    split = p["split"]
    split.update(method="group_hash", fractions=dict(FRACTIONS), temporal_cutoff=None)
    split["previous"] = None

    pretrained = args.model != "from_config"
    p["model"] = model_section(template, args, choices_in)

    mode = "from_config" if not pretrained else ("lora" if choices_in["lora"] else "full")
    lr, levels = LR_LEVELS[mode]
    train = p["train"]
    micro_batch = 32 if not pretrained else 16
    n_train = max(1, round(FRACTIONS["train"] * len(records)))
    max_steps = min(2000, max(20, math.ceil(EPOCHS * n_train / micro_batch)))
    every = max(1, max_steps // 4)
    train.update(
        lr=lr,
        micro_batch=micro_batch,
        grad_accum=1,
        max_steps=max_steps,
        warmup_steps=max(1, max_steps // 10),
        eval_every=every,
        checkpoint_every=every,
        max_length=choices_in["max_length"],
        lora=({**LORA, "target_modules": choices_in["lora"]} if choices_in["lora"] else None),
        base_quantization=None,
        devices=1,
    )

    ablation = p["ablation"]
    ablation.update(design="full", seeds=list(SEEDS), factors={"train": {"lr": levels}})
    ablation["fractional"] = {"p": None}
    ablation["explicit"] = {"cells": None}
    ablation["budget_hours"] = None

    quantization = p["quantization"]
    quantization.update(variants=applicable_variants(p["model"]["task"]), runs="representative")

    # One metric key per task: evaluation.metric for labels; a generation campaign is decided on
    # model.generation.metric and has none here (evaluate._check_params refuses one).
    if module_of(p["model"]["task"]).decision_key() == METRIC_KEY:
        p["evaluation"]["metric"] = choices_in["metric"]
    else:
        p["evaluation"].pop("metric", None)
    # The task's floors (a TF-IDF classifier is no floor for free text, nor retrieval for a label).
    p["evaluation"]["floor"] = list(floors_of(p["model"]["task"]))
    if "few_shot" in p["evaluation"]["floor"]:  # the base model with 3 similar training examples
        p["evaluation"]["few_shot"] = dict(FEW_SHOT)

    preflight = p["preflight"]
    sample = preflight["sample"]
    n_validation = max(1, round(FRACTIONS["validation"] * len(records)))
    sample["train_examples"] = min(sample["train_examples"], n_train)
    sample["validation_examples"] = min(sample["validation_examples"], n_validation)
    return p


def applicable_variants(task: str) -> list[str]:
    """The proposed VARIANTS that apply to `task` (an ONNX export cannot generate: proposing
    one for generation would only add a skipped row)."""
    from campaign.quantize import get_variant

    return [v for v in VARIANTS if task in get_variant(v).tasks]


def dropped_variants(task: str) -> str | None:
    """The words for the proposed variants `task` drops, with the reason; None for none."""
    from campaign.quantize import get_variant

    dropped = [get_variant(v) for v in VARIANTS if v not in applicable_variants(task)]
    if not dropped:
        return None
    why = "; ".join(f"{v.name}: {v.tasks_note or 'not for ' + task}" for v in dropped)
    return f"  variants not proposed for {task}: {why}"


def _name_from(out: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", out.stem).strip("-._") or "campaign"
    return name if name[0].isalnum() else "c" + name


def choose_salt(records, params: dict) -> tuple[str, str]:
    """(salt, note): the best of `campaign split-salt`'s salts, or the name's with split.assign
    auto (the integer program places the units) when no salt passes."""
    from campaign.data import find_salt

    split = params["split"]
    try:
        choice = find_salt(records, split, seed=params["campaign"]["seed"])
    except CampaignError:
        split["assign"] = "auto"
        return split["salt"], (
            "no hashed salt passes the balance checks (`campaign split-salt` says by how "
            "much); split.assign: auto (the integer program places the units then)"
        )
    return choice.salt, (
        f"salt {choice.salt}: max label deviation {choice.label_deviation:.3f}, max size "
        f"deviation {choice.size_deviation:.3f}"
    )


def model_text(model: dict) -> list[str]:
    """The `model` section with a comment per key (a pretrained source has no config)."""
    pretrained = model["source"] != "from_config"
    tok = model["tokenizer"]
    rows = [
        "model:",
        f"  task: {model['task']}   # {' | '.join(TASKS)}",
        f"  source: {flow(model['source'])}",
    ]
    if pretrained:
        rows[-1] += "   # a local pretrained folder; a pretrained source needs no model.config"
        rows += [
            "  tokenizer:",
            "    source: model   # its own tokenizer: the embeddings are indexed by it",
        ]
        return [*rows, *module_of(model["task"]).init_model_text(model, flow), ""]
    rows[-1] += "   # or a local folder with a pretrained model (config.json ...)"
    rows.append("  # The small transformers config of a from_config model (trained from scratch).")
    rows.append("  config:")
    rows += [f"    {k}: {flow(v)}" for k, v in model["config"].items()]
    rows.append("  # A tokenizer trained on the train split only.")
    rows.append("  tokenizer:")
    rows += [f"    {k}: {flow(v)}" for k, v in tok.items()]
    return [*rows, *module_of(model["task"]).init_model_text(model, flow), ""]


# ------------------------------------------------------------------ the command
def init(args) -> int:
    """`campaign init`: check the inputs, choose, validate, write --out; print what it chose.

    The steps in the order a user reads its output: refusals first (check_flags, then the data
    and the model as they are read), then each choice with the line that prints it.
    """
    from campaign.core.fsutil import atomic_write_text

    out, data = check_flags(args)
    template_text, template = read_template()
    task = module_of(args.task)
    source = data_source(args, data)
    fields = task_fields(args)
    folder = None if args.model == "from_config" else Path(args.model)
    config = model_config(folder) if folder is not None else None
    if config is not None:
        check_task(folder, config, args.task)
    records = read_records(source, fields, {k: f"--{k}-column" for k in fields})
    labels = records["label"].value_counts().sort_index()
    task.init_check_labels(labels, args, data)

    targets = choose_lora(args, folder, config)
    model_keys, max_length, quantile = choose_lengths(args, records, folder, config, template)
    metric = choose_metric({str(k): int(v) for k, v in labels.items()})
    chosen = {
        "source": source,
        "fields": fields,
        "lora": targets,
        "max_length": max_length,
        "metric": metric,
        "model_keys": model_keys,
    }
    params = build_params(template, args, records, chosen)
    salt_note = place_split(records, params)
    text = checked_text(template_text, template, params, out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out, text, mode=0o644)

    choices = Choices(
        records=len(records),
        labels={str(k): int(v) for k, v in labels.items()},
        family=config["model_type"]
        if config is not None
        else params["model"]["config"]["architecture"],
        max_length=max_length,
        quantile=quantile,
        lora_targets=targets,
        salt_note=salt_note,
        # The metric at the task's decision key: a generation campaign is judged on its
        # per-item metric of the generated text.
        metric=at_key(params, task.decision_key()),
    )
    print(summary(out, params, choices))
    return 0


def check_flags(args) -> tuple[Path, Path]:
    """(--out, --data) after refusing an --out that is a folder or exists (without --force), a
    missing licence and a missing data file."""
    out = Path(args.out)
    if out.is_dir():
        raise CampaignError(f"--out {out}: is a folder; name the params file to write")
    if out.exists() and not args.force:
        raise CampaignError(f"--out {out}: exists; pass --force to replace it")
    if not args.licence or not args.licence.strip():
        raise CampaignError(
            "--licence: required: say under which licence the data may be used (an SPDX id "
            "such as CC-BY-4.0, or e.g. 'proprietary, internal use only')"
        )
    data = Path(args.data)
    if not data.is_file():
        raise CampaignError(f"--data {data}: no such file")
    return out, data


def read_template() -> tuple[str, dict]:
    """The project's params.yaml: (its text, its values)."""
    if not TEMPLATE.is_file():
        raise CampaignError(
            f"{TEMPLATE.name}: the template params file is missing from the project"
        )
    template_text = TEMPLATE.read_text(encoding="utf-8")
    return template_text, yaml.safe_load(template_text)


def data_source(args, data: Path) -> dict:
    """data.sources[0]: the file (project-relative), its format, licence and origin."""
    return {
        "path": project_path(args.data),
        "format": data_format(data, args.format),
        "licence": args.licence.strip(),
        "origin": (args.origin or f"local file {data.name} (campaign init)").strip(),
    }


def choose_lora(args, folder: Path | None, config: dict | None) -> list[str] | None:
    """The LoRA target modules (None: no LoRA; on by default for a pretrained model): the
    folder's family's, checked against its weights, or from_config's family's."""
    use_lora = args.lora if args.lora is not None else folder is not None
    if not use_lora:
        return None
    given = (
        [t.strip() for t in args.lora_targets.split(",") if t.strip()]
        if args.lora_targets
        else None
    )
    if config is not None:
        return lora_targets(folder, config, given)
    return given or LORA_TARGETS[module_of(args.task).init_family()]


def choose_lengths(args, records, folder: Path | None, config: dict | None, template: dict):
    """(the task's model keys or None, train.max_length, the quantile of token lengths it
    reaches): sized on the formatted examples of a generating task (its init_generation), else
    on the text column."""
    max_positions = max_positions_of(config) if config is not None else FROM_CONFIG_MAX_POSITIONS
    n_train = max(1, round(FRACTIONS["train"] * len(records)))

    def train_tokenizers(texts: list[str]) -> list:
        return run_tokenizers(texts, template, args.task, n_train)

    def longest(lengths: list[int]) -> int:
        return choose_max_length(lengths, 10**6, quantile=1.0)

    generating = module_of(args.task).init_generation(records, folder, train_tokenizers, longest)
    if generating is None:
        model_keys, quantile = None, LENGTH_QUANTILE
        length_sets = [token_lengths(list(records["text"]), folder)]
    else:
        model_keys, length_sets, quantile = generating
    max_length = max(choose_max_length(n, max_positions, quantile) for n in length_sets)
    return model_keys, max_length, quantile


def place_split(records, params: dict) -> str:
    """Set split.salt (and split.assign) to a salt that passes the audit's balance checks;
    the note that says which."""
    params["split"]["salt"] = params["campaign"]["name"]
    params["split"]["assign"] = "hash"
    salt, salt_note = choose_salt(records, params)
    params["split"]["salt"] = salt
    return salt_note


def checked_text(template_text: str, template: dict, params: dict, out: Path) -> str:
    """The params file's text, after `campaign validate`'s check of `params` and a check that
    the text says exactly what was validated."""
    from campaign.core.params import validate

    try:
        validate(copy.deepcopy(params), source=str(out))
    except CampaignError as e:
        raise CampaignError(f"init: the params it would write are not valid: {e}") from None
    text = render(template_text, template, params, model_text, DROPPED_NOTES)
    if yaml.safe_load(text) != params:  # the rendering must say exactly what was validated
        raise CampaignError("init: internal error: the written YAML differs from the params")
    return text


def at_key(params: dict, dotted: str):
    """The value at a dotted key of the params."""
    value = params
    for part in dotted.split("."):
        value = value[part]
    return value


def summary(out: Path, params: dict, c: Choices) -> str:
    labels = ", ".join(f"{k} {v}" for k, v in c.labels.items())
    lora = f"LoRA on {', '.join(c.lora_targets)}" if c.lora_targets else "all weights (no LoRA)"
    runs = len(params["ablation"]["factors"]["train"]["lr"]) * len(params["ablation"]["seeds"])
    lines = [
        f"wrote {out}",
        f"  data: {c.records} records, {len(c.labels)} labels ({labels})",
        f"  model: {params['model']['source']} ({c.family}), tokenizer "
        f"{params['model']['tokenizer']['source']}, {lora}",
        f"  train.max_length {c.max_length} (the {c.quantile:.0%} quantile of token lengths)"
        f", train.max_steps {params['train']['max_steps']}",
        f"  design: train.lr {params['ablation']['factors']['train']['lr']} x seeds "
        f"{params['ablation']['seeds']} = {runs} runs; variants "
        f"{', '.join(params['quantization']['variants'])}; decided on {c.metric}",
        f"  split: {c.salt_note}",
        f"next: CAMPAIGN_PARAMS={out} campaign validate; CAMPAIGN_PARAMS={out} snakemake -n",
    ]
    dropped = dropped_variants(params["model"]["task"])
    if dropped is not None:
        lines.insert(-2, dropped)
    if params["data"]["fields"]["group"] is None:
        lines.insert(
            2,
            "  note: no --group-column: each record is its own unit, so texts of one author "
            "or thread can land in train and test",
        )
    return "\n".join(lines)


def add_parser(sub) -> None:
    """Register `campaign init` on the CLI's subparsers."""
    import argparse

    text = "write a validated params file for your own data and model"
    p = sub.add_parser("init", help=text, description=text)
    p.add_argument("--data", required=True, help="the data file (CSV, JSON Lines or Parquet)")
    p.add_argument("--format", choices=["csv", "jsonl", "parquet"], help="default: from the suffix")
    p.add_argument("--text-column", help="the text (required unless --task generation)")
    p.add_argument(
        "--label-column",
        help="the label (required unless --task generation; there, a column to stratify on)",
    )
    p.add_argument("--prompt-column", help="--task generation: the prompt (with --response-column)")
    p.add_argument("--response-column", help="--task generation: the reference response")
    p.add_argument(
        "--messages-column",
        help="--task generation: a list of {role, content} ending with the assistant's answer",
    )
    p.add_argument("--id-column", required=True, help="a unique id per record")
    p.add_argument(
        "--group-column",
        help="who or what a record belongs to (author, thread); a group never spans two splits",
    )
    p.add_argument("--timestamp-column", help="an ISO 8601 time per record (optional)")
    p.add_argument(
        "--model",
        required=True,
        help="a local pretrained folder (with config.json), or from_config (a small model "
        "trained from scratch, for CPU trials)",
    )
    p.add_argument(
        "--task",
        choices=list(TASKS),
        default=next(iter(TASKS)),  # the first task: the classifier
    )
    p.add_argument(
        "--lora",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="LoRA adapters (default: on for a pretrained model, off for from_config)",
    )
    p.add_argument("--lora-targets", help="comma-separated module names (default: by model family)")
    p.add_argument("--licence", help="the data's licence (required: SPDX id or a statement)")
    p.add_argument("--origin", help="where the data came from (default: the local file's name)")
    p.add_argument("--name", help="campaign.name (default: from --out)")
    p.add_argument(
        "--out", default="mine.yaml", help="the params file to write (default: %(default)s)"
    )
    p.add_argument("--force", action="store_true", help="replace an existing --out")
    p.set_defaults(func=init)
