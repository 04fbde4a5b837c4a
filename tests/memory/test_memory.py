"""Memory estimate from the config vs what real tiny models hold: counts, bytes, fit table."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from memkit import GIB, toy

from campaign import memory, train
from campaign.core.errors import CampaignError
from campaign.train import models

LABELS = ["a", "b", "c"]
# The activation formula reproduces the saved-for-backward bytes of every case below to within
# 0.2% on the CPU (what is left: a few int64 index tensors and the loss scalar).
ACTIVATION_TOLERANCE = 0.01
HAS_PEFT = importlib.util.find_spec("peft") is not None
needs_peft = pytest.mark.skipif(not HAS_PEFT, reason="peft is not installed (LoRA cases)")


class FakeTokenizer:
    """What models.build_model reads from a tokenizer: its length and two special ids."""

    pad_token_id = 0
    eos_token_id = 1

    def __init__(self, size: int):
        self.size = size

    def __len__(self) -> int:
        return self.size


def model_spec(
    arch, task, hidden=48, layers=2, heads=3, inter=80, positions=64, vocab=100, drop=0.0
):
    return {
        "task": task,
        "source": "from_config",
        "config": {
            "architecture": arch,
            "hidden_size": hidden,
            "num_hidden_layers": layers,
            "num_attention_heads": heads,
            "intermediate_size": inter,
            "max_position_embeddings": positions,
            "dropout": drop,
        },
        "tokenizer": {
            "source": "train_split",
            "vocab_size": vocab,
            "min_frequency": 1,
            "lowercase": True,
        },
    }


def build(spec, lora=None):
    model = models.build_model(
        spec, FakeTokenizer(spec["tokenizer"]["vocab_size"]), LABELS, seed=0, source=None
    )
    if lora is not None:
        model = models.apply_lora(model, lora, spec["task"])
    return model


def make_batch(task, batch, seq_len, vocab):
    """Token ids with the first example half padding (so attention masks are in play)."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(2, vocab, (batch, seq_len), generator=g)
    mask = torch.ones_like(ids)
    ids[0, seq_len // 2 :], mask[0, seq_len // 2 :] = 0, 0
    if task == "sequence_classification":
        labels = torch.randint(0, len(LABELS), (batch,), generator=g)
    else:
        labels = ids.masked_fill(mask == 0, train.IGNORE)
    return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def estimate_and_measure(arch, task, recipe, drop=0.0, checkpointing=False, **shape):
    spec = model_spec(arch, task, drop=drop, **shape)
    est = memory.estimate_memory(
        spec, recipe, num_labels=len(LABELS), device="cpu", gradient_checkpointing=checkpointing
    )
    model = build(spec, recipe.get("lora"))
    if checkpointing:
        # Reentrant checkpoints keep their inputs as saved tensors, which the hook can count.
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": True}
        )
    autocast = None
    if recipe["precision"] == "bf16":
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    measured = memory.measure_memory(
        model,
        make_batch(
            task, recipe["micro_batch"], recipe["max_length"], spec["tokenizer"]["vocab_size"]
        ),
        lambda params: torch.optim.AdamW(params, lr=1e-3),
        "cpu",
        loss_fn=lambda m, b: train.loss_sum(m, b, task),
        autocast=autocast,
    )
    return est, measured


def recipe(precision="fp32", micro_batch=4, max_length=32, lora=None):
    return {
        "micro_batch": micro_batch,
        "max_length": max_length,
        "precision": precision,
        "lora": lora,
    }


ARCHS = [
    ("bert", "sequence_classification"),
    ("gpt2", "causal_lm"),
    ("gpt2", "sequence_classification"),
]


# ------------------------------------------------------------------ parameter counts
@pytest.mark.parametrize("arch,task", ARCHS)
@pytest.mark.parametrize(
    "size",
    [
        dict(hidden=16, layers=1, heads=1, inter=32, positions=16, vocab=50),
        dict(hidden=48, layers=2, heads=3, inter=80, positions=64, vocab=100),
        dict(hidden=64, layers=3, heads=4, inter=256, positions=128, vocab=1000),
    ],
)
def test_parameter_count_from_config_equals_the_model(arch, task, size):
    spec = model_spec(arch, task, **size)
    model = build(spec)
    counted = memory.analytic_parameter_count(spec, num_labels=len(LABELS))
    params = list(model.parameters())
    assert counted["total"] == sum(p.numel() for p in params)
    assert counted["tensors"] == len(params)
    assert counted["trainable"] == counted["total"]


@needs_peft
@pytest.mark.parametrize(
    "arch,task,targets",
    [
        ("bert", "sequence_classification", ["query", "value"]),
        ("bert", "sequence_classification", ["dense"]),  # attention, ffn and pooler denses
        ("gpt2", "causal_lm", ["c_attn", "c_proj"]),
        ("gpt2", "sequence_classification", ["c_fc"]),
    ],
)
def test_lora_parameter_count_equals_peft(arch, task, targets):
    spec = model_spec(arch, task)
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": targets}
    model = build(spec, lora)
    counted = memory.analytic_parameter_count(spec, lora, num_labels=len(LABELS))
    assert (counted["total"], counted["trainable"]) == models.count_parameters(model)
    assert counted["trainable_tensors"] == sum(p.requires_grad for p in model.parameters())


def test_lora_target_that_matches_nothing_is_named():
    with pytest.raises(CampaignError, match="train.lora.target_modules"):
        memory.analytic_parameter_count(
            model_spec("gpt2", "causal_lm"), {"r": 2, "target_modules": ["query"]}
        )


# ------------------------------------------------------------------ estimate vs measured
@pytest.mark.parametrize("arch,task", ARCHS)
def test_weights_gradients_optimizer_equal_the_tensor_bytes(arch, task):
    est, got = estimate_and_measure(arch, task, recipe())
    for key in ("weights", "gradients", "optimizer_state"):
        assert est["bytes"][key] == got["bytes"][key], key
    # fp32 full fine-tune: 4 B per parameter, 4 B per gradient, 8 B + a step per tensor.
    n = est["model"]["n_params"]
    assert est["bytes"]["weights"] == est["bytes"]["gradients"] == 4 * n
    assert est["bytes"]["optimizer_state"] == 8 * n + 4 * est["model"]["trainable_tensors"]


@needs_peft
@pytest.mark.parametrize("arch,task", ARCHS)
@pytest.mark.parametrize("lora_dropout", [0.0, 0.1])
def test_lora_weights_gradients_optimizer_equal_the_tensor_bytes(arch, task, lora_dropout):
    targets = ["query", "value"] if arch == "bert" else ["c_attn"]
    lora = {"r": 4, "alpha": 8, "dropout": lora_dropout, "target_modules": targets}
    est, got = estimate_and_measure(arch, task, recipe(lora=lora), drop=0.1)
    for key in ("weights", "gradients", "optimizer_state"):
        assert est["bytes"][key] == got["bytes"][key], key
    # Frozen base: gradients and optimizer state for the adapters (and head copy) only.
    assert est["bytes"]["gradients"] < est["bytes"]["weights"] / 10
    ratio = est["activations_detail"]["saved_for_backward"] / got["bytes"]["activations"]
    assert abs(ratio - 1) <= ACTIVATION_TOLERANCE


ACTIVATION_CASES = [
    # (dropout, precision, gradient checkpointing): fused and math attention, autocast, recompute
    (0.0, "fp32", False),
    (0.1, "fp32", False),
    (0.0, "bf16", False),
    (0.1, "bf16", False),
    (0.1, "fp32", True),
]


@pytest.mark.parametrize("arch,task", ARCHS)
@pytest.mark.parametrize("drop,precision,checkpointing", ACTIVATION_CASES)
def test_activation_estimate_matches_saved_tensors(arch, task, drop, precision, checkpointing):
    est, got = estimate_and_measure(
        arch, task, recipe(precision), drop=drop, checkpointing=checkpointing
    )
    estimated = est["activations_detail"]["saved_for_backward"]
    measured = got["bytes"]["activations"]
    assert abs(estimated / measured - 1) <= ACTIVATION_TOLERANCE, (estimated, measured)
    if checkpointing:  # backward rebuilds one whole layer at a time
        spec = model_spec(arch, task, drop=drop)
        plain = memory.estimate_memory(spec, recipe(precision), num_labels=3, device="cpu")
        layer = plain["activations_detail"]["per_layer_max"]
        assert est["activations_detail"]["recompute"] == layer


def test_activation_formula_by_hand():
    # fp32, no dropout, fused attention, BERT: per layer 8*T*h*4 + 2*T*i*4 + a*T*4 + 16*T
    # + b*s*s*4 (the padding mask sdpa converts per call).
    b, s, h, a, i, layers = 2, 8, 16, 2, 32, 3
    spec = model_spec("bert", "sequence_classification", hidden=h, layers=layers, heads=a, inter=i)
    shape = memory.model_shape(spec, num_labels=3)
    t = b * s
    per_layer = 8 * t * h * 4 + 2 * t * i * 4 + a * t * 4 + 16 * t + b * s * s * 4
    got = memory.activation_bytes(shape, b, s, 4, device="cpu")
    assert got["layers"] == layers * per_layer
    # Math attention (eager) trades the logsumexp and mask for a*s*T*4 softmax probabilities.
    eager = memory.activation_bytes(shape, b, s, 4, device="cpu", attention="eager")
    assert eager["layers"] - got["layers"] == layers * (a * s * t * 4 - a * t * 4 - b * s * s * 4)


def test_activations_grow_linearly_with_the_micro_batch():
    spec = model_spec("gpt2", "causal_lm", drop=0.1)
    one, five = (memory.estimate_memory(spec, recipe(micro_batch=n)) for n in (1, 5))
    per = one["phases"]["train_step"]["bytes_per_example"]
    assert five["bytes"]["activations"] - one["bytes"]["activations"] == 4 * per
    assert five["phases"]["train_step"]["fixed_bytes"] == one["phases"]["train_step"]["fixed_bytes"]


def test_bool_dropout_masks_make_cuda_activations_smaller():
    spec = model_spec("bert", "sequence_classification", drop=0.1)
    cpu = memory.estimate_memory(spec, recipe(), num_labels=3, device="cpu")
    cuda = memory.estimate_memory(spec, recipe(), num_labels=3, device="cuda")
    assert cuda["bytes"]["activations"] < cpu["bytes"]["activations"]
    assert cuda["settings"]["attention_kernel"] == "fused"
    assert cpu["settings"]["attention_kernel"] == "math"


def test_measurement_reports_process_peaks_per_phase():
    _, got = estimate_and_measure("bert", "sequence_classification", recipe())
    assert set(got["phases"]) == {"forward", "backward", "optimizer_step"}
    assert got["peak"]["kind"] == "cpu_rss"
    assert got["peak"]["bytes"] >= max(p["rss_before"] for p in got["phases"].values())


# ------------------------------------------------------------------ KV cache
def test_kv_cache_bytes_formula():
    # 2 (K, V) x 2 layers x 4 heads x 8 dims x 10 positions x 3 sequences x 2 bytes
    assert memory.kv_cache_bytes(2, 4, 8, 10, 3, 2) == 2 * 2 * 4 * 8 * 10 * 3 * 2


@pytest.mark.parametrize("batch,context", [(1, 7), (3, 16)])
def test_kv_cache_equals_a_real_gpt2_cache(batch, context):
    spec = model_spec("gpt2", "causal_lm")
    model = build(spec).eval()
    ids = torch.randint(2, 100, (batch, context), generator=torch.Generator().manual_seed(1))
    real = memory.measure_kv_cache(model, ids)
    cfg = spec["config"]
    assert real == memory.kv_cache_bytes(
        cfg["num_hidden_layers"],
        cfg["num_attention_heads"],
        cfg["hidden_size"] // cfg["num_attention_heads"],
        context,
        batch,
        4,
    )
    est = memory.estimate_memory(spec, recipe(micro_batch=batch, max_length=context))
    assert est["bytes"]["kv_cache"] == real


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kv_cache_equals_a_real_grouped_query_cache(dtype):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=1,  # grouped-query attention: 4 query heads share one K/V head
        max_position_embeddings=32,
    )
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).to(dtype).eval()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(2))
    real = memory.measure_kv_cache(model, ids)
    nbytes = torch.finfo(dtype).bits // 8
    assert real == memory.kv_cache_bytes(2, 1, 32 // 4, 12, 2, nbytes)
    assert real * 4 == memory.kv_cache_bytes(2, 4, 32 // 4, 12, 2, nbytes)  # vs full MHA


def test_cache_tensor_bytes_reads_legacy_tuples():
    k = torch.zeros(1, 2, 3, 4)
    assert memory.cache_tensor_bytes(((k, k), (k, k))) == 4 * k.nbytes
    assert memory.cache_tensor_bytes(None) == 0


# ------------------------------------------------------------------ fit table
def test_fit_table_by_hand():
    cards = [
        {"name": "big", "memory_gib": 8},
        {"name": "small", "memory_gib": 6},
        {"name": "tiny", "memory_gib": 4},
    ]
    big, small, tiny = memory.fit_table(toy(), cards, margin_fraction=0.1)
    # Training needs 1 + 1 + 2 + 4 x 0.5 = 6 GiB; usable = 90% of the card.
    assert big["need_bytes"] == 6 * GIB and big["phase"] == "train_step"
    assert big["fits"] and big["margin_bytes"] == 2 * GIB and big["margin_pct"] == 25.0
    assert big["max_micro_batch"] == 6  # (7.2 - 4) / 0.5 = 6.4
    assert not small["fits"]  # 6 GiB > 5.4 GiB usable, although it is exactly the card
    assert small["margin_bytes"] == 0 and small["max_micro_batch"] == 2  # (5.4 - 4) / 0.5
    assert not tiny["fits"] and tiny["max_micro_batch"] == 0  # the fixed 4 GiB alone do not fit
    text = memory.format_fit_table([big, small, tiny])
    assert "big" in text and "NO" in text and "yes" in text


def test_fit_table_takes_the_tightest_phase():
    # Generation: 1 GiB weights + 4 x 1.5 GiB cache = 7 GiB, more than training's 6 GiB.
    (row,) = memory.fit_table(
        toy(kv_cache=6 * GIB, kv_cache_per_example=3 * GIB // 2),  # 1.5 GiB x micro_batch 4
        [{"name": "c", "memory_gib": 8}],
        0.1,
    )
    assert row["phase"] == "generate" and row["need_bytes"] == 7 * GIB and row["fits"]
    assert row["max_micro_batch"] == 4  # generation: (7.2 - 1) / 1.5 = 4.13; training allows 6


@pytest.mark.parametrize(
    "cards,margin,where",
    [
        ([{"name": "x", "memory_gib": 0}], 0.1, r"cards\[0\].memory_gib"),
        ([{"memory_gib": 8}], 0.1, r"cards\[0\].name"),
        ([{"name": "x", "memory_gib": 8}], 1.0, "margin_fraction"),
    ],
)
def test_fit_table_rejects_bad_cards(cards, margin, where):
    with pytest.raises(CampaignError, match=where):
        memory.fit_table(toy(), cards, margin)


# ------------------------------------------------------------------ config errors
@pytest.mark.parametrize(
    "spec_change,recipe_change,where",
    [
        ({}, {"max_length": 65}, "train.max_length"),
        (
            {"task": "causal_lm", "config": {"architecture": "bert"}},
            {},
            "model.config.architecture",
        ),
        ({}, {"precision": "fp8"}, "train.precision"),
    ],
)
def test_estimate_names_the_bad_key(spec_change, recipe_change, where):
    spec = model_spec("bert", "sequence_classification")
    spec["config"].update(spec_change.pop("config", {}))
    spec.update(spec_change)
    with pytest.raises(CampaignError, match=where):
        memory.estimate_memory(spec, {**recipe(), **recipe_change}, num_labels=3)


def test_classification_needs_the_number_of_labels():
    with pytest.raises(CampaignError, match="num_labels"):
        memory.estimate_memory(model_spec("bert", "sequence_classification"), recipe())


def test_pretrained_config_json_is_understood():
    spec = model_spec("gpt2", "causal_lm")
    model = build(spec)
    hf = {"task": "causal_lm", "config": model.config.to_dict()}
    assert memory.analytic_parameter_count(hf)["total"] == sum(
        p.numel() for p in model.parameters()
    )


def test_comparison_table():
    est, got = estimate_and_measure("gpt2", "causal_lm", recipe())
    rows = memory.compare(est, got)
    assert [r["component"] for r in rows][:3] == ["weights", "gradients", "optimizer_state"]
    assert all(r["ratio"] == 1.0 for r in rows[:3])
    assert "activations" in memory.format_comparison(rows)
