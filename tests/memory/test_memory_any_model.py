"""Memory for any model a user brings: pretrained RoBERTa and Llama folders (no analytic model) are
measured at two micro-batch sizes and extrapolated; the evaluation phase; the levers of the fit
table; the real preflight memory check on both, and its deterministic part on a rerun."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
import torch
from memkit import GIB, toy
from trainkit import REPO, demo_records, preflight_config, run_preflight, tiny_spec, write_splits

from campaign import memory, train
from campaign.core.errors import CampaignError
from campaign.memory.levers import LOW_BIT_STATE_FRACTION
from campaign.preflight import bench
from campaign.preflight import report as preflight_report
from campaign.preflight.checks import memory as memory_check
from campaign.train.recipe import Recipe

pytestmark = pytest.mark.usefixtures("one_thread")

TRAIN_KEYS = {f"train.{k}" for k in Recipe.__dataclass_fields__}
CPU = torch.device("cpu")
MICRO_BATCH, MAX_LENGTH = 8, 32
CFG = preflight_config(
    ["memory"],
    sample={"train_examples": 48, "validation_examples": 16},
    # L4 fits any tiny model; "toy" (about 105 KiB) fits none, so it lists every lever.
    target_cards=[{"name": "L4", "memory_gib": 24}, {"name": "toy", "memory_gib": 1.0e-4}],
)


# ------------------------------------------------------------------ pretrained folders
def _texts() -> list[str]:
    return [r["text"] for r in demo_records()[:400]]


def _bpe(specials: list[str]):
    """A tiny byte-level BPE trained on demo texts (no download)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_texts(), trainer)
    return tok


def save_roberta(folder: Path) -> Path:
    """A RoBERTa encoder (masked-LM checkpoint, as published) with its tokenizer."""
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaForMaskedLM

    tok = _bpe(["<s>", "<pad>", "</s>", "<unk>", "<mask>"])  # ids 0..4, pad 1 as RoBERTa's
    tok.post_processor = processors.RobertaProcessing(("</s>", 2), ("<s>", 0))
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        sep_token="</s>",
        cls_token="<s>",
        unk_token="<unk>",
        pad_token="<pad>",
        mask_token="<mask>",
    )
    config = RobertaConfig(
        vocab_size=len(fast),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=72,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    torch.manual_seed(0)
    RobertaForMaskedLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


LLAMA = dict(layers=2, heads=4, kv_heads=2, hidden=32)  # grouped-query attention: 2 K/V heads


def save_llama(folder: Path) -> Path:
    """A Llama-style decoder with grouped-query attention, with its tokenizer (no pad token:
    the campaign pads with EOS)."""
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    fast = PreTrainedTokenizerFast(
        tokenizer_object=_bpe(["<unk>", "<s>", "</s>"]),
        bos_token="<s>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    config = LlamaConfig(
        vocab_size=len(fast),
        hidden_size=LLAMA["hidden"],
        intermediate_size=64,
        num_hidden_layers=LLAMA["layers"],
        num_attention_heads=LLAMA["heads"],
        num_key_value_heads=LLAMA["kv_heads"],
        max_position_embeddings=64,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("pretrained")
    return {
        "sequence_classification": save_roberta(root / "roberta"),
        "causal_lm": save_llama(root / "llama"),
    }


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, list[Path]]:
    return write_splits(tmp_path_factory.mktemp("splits"), n_train=96, n_eval=16)


def pretrained_spec(task: str, folder: Path, **train_changes) -> dict:
    spec = tiny_spec(task=task, micro_batch=MICRO_BATCH, max_length=MAX_LENGTH, **train_changes)
    spec["model"] = {"task": task, "source": str(folder), "tokenizer": {"source": "model"}}
    return spec


def run_memory(spec: dict, inputs: dict, tmp_path: Path, config: dict | None = None) -> dict:
    data = dict(inputs)
    if spec["model"]["source"] != "from_config":
        data["base_model"] = [Path(spec["model"]["source"])]
    return run_preflight(spec, data, config or CFG, tmp_path)


def trainer_of(spec: dict, inputs: dict, tmp_path: Path) -> train.Trainer:
    return train.Trainer(spec, train.read_data(inputs), tmp_path / "trainer", root=REPO, device=CPU)


# ------------------------------------------------------------------ hand-computed pieces
def test_linear_fit_and_extrapolation_by_hand():
    # 100 B at 2 examples, 160 B at 4: 30 B per example, 40 B fixed; at 8: 40 + 8 x 30.
    fit = memory.linear_fit([2, 4], [100, 160])
    assert fit == {"per_example": 30, "fixed": 40}
    assert memory.extrapolate(fit, 8) == 280
    # 30.5 B per example rounds up; the line still passes through the larger measurement.
    fit = memory.linear_fit([2, 4], [100, 161])
    assert fit == {"per_example": 31, "fixed": 161 - 4 * 31}
    assert memory.extrapolate(fit, 4) == 161 and memory.extrapolate(fit, 8) == 285
    assert memory.linear_fit([2, 4], [200, 100])["per_example"] == 0  # never below zero
    with pytest.raises(CampaignError, match="probe batch sizes"):
        memory.linear_fit([4, 2], [1, 2])


PARAMS = {  # 1,000 fp32 parameters, all trainable, in 10 tensors
    "n_params": 1000,
    "n_trainable": 1000,
    "tensors": 10,
    "trainable_tensors": 10,
    "weights": 4000,
    "gradients": 4000,
    "optimizer_state": 8040,
}


def test_estimate_from_probe_by_hand():
    probed = {
        "batch_sizes": [2, 4],
        "max_length": 16,
        "precision": "fp32",
        "activations": [1000, 1800],  # 400 B per example + 200 B fixed
        "evaluation": [300, 500],  # per sequence: 100 B + 100 B fixed
        "kv_cache": [64, 128],  # 32 B per sequence
    }
    est = memory.estimate_from_probe(
        probed,
        PARAMS,
        {"micro_batch": 8, "grad_accum": 2, "max_length": 16, "precision": "fp32"},
        task="causal_lm",
        architecture="toy",
        eval_sequences=3,  # a causal LM scores 3 candidate labels per example
        device="cpu",
    )
    assert est["source"] == "measured"
    assert est["bytes"] == {
        "weights": 4000,
        "gradients": 4000,
        "optimizer_state": 8040,
        "activations": 200 + 8 * 400,
        "kv_cache": 8 * 32,
        "evaluation": 100 + 8 * 3 * 100,  # 24 sequences
    }
    phases = est["phases"]
    per_micro_batch = {"scales_with": "train.micro_batch", "batch": 8}
    assert phases["train_step"] == {
        "bytes": 4000 + 4000 + 8040 + 3400,
        "fixed_bytes": 4000 + 4000 + 8040 + 200,
        "bytes_per_example": 400,
        "optimizer_state": 8040,
        **per_micro_batch,
    }
    assert phases["evaluate"] == {
        "bytes": 4000 + 8040 + 2500,
        "fixed_bytes": 4000 + 8040 + 100,
        "bytes_per_example": 300,
        "optimizer_state": 8040,
        **per_micro_batch,
    }
    # A label-scoring causal LM generates only in the quantize stage's own process: the weights
    # and the cache of micro_batch sequences, no optimizer state.
    assert phases["generate"] == {
        "bytes": 4000 + 256,
        "fixed_bytes": 4000,
        "bytes_per_example": 32,
        "optimizer_state": 0,
        **per_micro_batch,
    }
    assert est["peak_phase"] == "train_step" and est["peak_bytes"] == 19440


def test_a_generation_runs_cache_is_its_generation_batch_beside_the_optimizer_state():
    """model.task generation: the train stage generates validation and test in the training
    process (the Trainer's AdamW state alive), model.generation.batch_size sequences at once."""
    probed = {
        "batch_sizes": [2, 4],
        "max_length": 16,
        "precision": "fp32",
        "activations": [1000, 1800],
        "evaluation": [300, 500],
        "kv_cache": [64, 128],  # 32 B per sequence
    }
    est = memory.estimate_from_probe(
        probed,
        PARAMS,
        {"micro_batch": 8, "max_length": 16, "precision": "fp32"},
        task="causal_lm",
        architecture="toy",
        eval_sequences=1,
        device="cpu",
        kv_batch=3,
        optimizer_while_generating=True,
    )
    assert est["bytes"]["kv_cache"] == 3 * 32
    assert est["phases"]["generate"] == {
        "bytes": 4000 + 8040 + 3 * 32,
        "fixed_bytes": 4000 + 8040,
        "bytes_per_example": 32,
        "optimizer_state": 8040,
        "scales_with": "model.generation.batch_size",
        "batch": 3,
    }


def measured_toy(grad_accum: int = 2) -> dict:
    """memkit's 6 GiB step, as a probe's measured estimate."""
    return toy(grad_accum, "measured")


def fake_variant(lever: str, peak_gib: float | None) -> dict:
    estimate = None
    if peak_gib is not None:
        estimate = {"peak_bytes": int(peak_gib * GIB), "peak_phase": "train_step"}
    return {
        "lever": lever,
        "change": f"{lever} on",
        "setting": None,
        "estimate": estimate,
        "source": "estimated",
        "note": None if estimate else "does not apply",
    }


def test_a_generation_caches_batch_is_its_lever_not_micro_batch():
    """A generation task's cache (model.generation.batch_size 8 sequences of 1 GiB, beside
    1 GiB of weights and 2 GiB of AdamW state) is the peak: 11 GiB on a 9 GiB card. A smaller
    micro_batch moves no cached sequence; 6 sequences (9 GiB, the whole card) fit."""
    est = toy(
        grad_accum=1,
        kv_cache=8 * GIB,
        kv_cache_per_example=GIB,
        kv_batch=8,
        optimizer_while_generating=True,
    )
    assert est["peak_phase"] == "generate" and est["peak_bytes"] == 11 * GIB
    (row,) = memory.fit_table(est, [{"name": "c", "memory_gib": 9}], 0.0)
    assert not row["fits"] and row["max_micro_batch"] == 0
    levers = {r["lever"]: r for r in row["levers"]}
    mb = levers["micro_batch"]
    assert mb["need_bytes"] == 11 * GIB and mb["phase"] == "generate" and not mb["fits"]
    gen = levers["generation_batch"]
    assert gen["setting"] == {"model.generation.batch_size": 6}
    assert gen["need_bytes"] == 9 * GIB and gen["saves_bytes"] == 2 * GIB and gen["fits"]
    # 8-bit AdamW moments shrink the generate phase too: the state is alive there.
    assert levers["optimizer"]["need_bytes"] == 11 * GIB - int(2 * GIB * 0.74609375)


def test_levers_by_hand():
    # Needs 1 + 1 + 2 + 4 x 0.5 = 6 GiB; the 5 GiB card (no margin) does not fit, 8 GiB does.
    variants = [fake_variant("bf16", 4.5), fake_variant("lora", None)]
    cards = [{"name": "small", "memory_gib": 5}, {"name": "big", "memory_gib": 8}]
    small, big = memory.fit_table(measured_toy(), cards, 0.0, variants)
    assert big["fits"] and big["levers"] == []
    assert not small["fits"] and small["source"] == "measured"
    rows = {r["lever"]: r for r in small["levers"]}
    assert list(rows) == ["lora", "micro_batch", "bf16", "optimizer", "packing", "generation_batch"]
    # micro_batch: effective batch 4 x 2 = 8; the divisors below 4 are 2 and 1; at 2 the step
    # needs 4 + 2 x 0.5 = 5 GiB, which fits: micro_batch 2, grad_accum 4.
    mb = rows["micro_batch"]
    assert mb["setting"] == {"train.micro_batch": 2, "train.grad_accum": 4}
    assert mb["need_bytes"] == 5 * GIB and mb["saves_bytes"] == GIB and mb["fits"]
    assert mb["source"] == "measured"  # arithmetic on the (measured) estimate
    # 8-bit AdamW: 2 GiB of fp32 moments -> (2 + 8/256) / 8 of it; saves 2 x 0.74609375 GiB.
    low = rows["optimizer"]
    assert low["setting"] == {"train.optimizer": "adamw_8bit"}
    assert low["saves_bytes"] == int(2 * GIB * 0.74609375) and low["fits"]
    # A variant's own estimate, with its own source; one that does not apply has no numbers.
    assert rows["bf16"]["need_bytes"] == int(4.5 * GIB) and rows["bf16"]["fits"]
    assert rows["bf16"]["source"] == "estimated" and rows["bf16"]["saves_bytes"] == 1.5 * GIB
    assert rows["lora"]["need_bytes"] is None and rows["lora"]["note"] == "does not apply"
    text = memory.format_levers([small, big])
    assert text.splitlines()[0] == "levers for small (needs 6.00 GiB, 5.00 GiB usable):"
    assert "micro_batch 4 -> 2, grad_accum 2 -> 4" in text and "measured" in text
    assert "levers for big" not in text


def test_micro_batch_lever_falls_back_to_one_when_nothing_fits():
    # 3 GiB card: even micro_batch 1 needs 4.5 GiB. Effective batch 4 x 3 = 12: divisors 3, 2, 1.
    (row,) = memory.fit_table(measured_toy(grad_accum=3), [{"name": "c", "memory_gib": 3}], 0.0)
    mb = next(r for r in row["levers"] if r["lever"] == "micro_batch")
    assert mb["setting"] == {"train.micro_batch": 1, "train.grad_accum": 12}
    assert mb["need_bytes"] == 4 * GIB + GIB // 2 and mb["fits"] is False
    assert memory.need_at(measured_toy(), 3) == (4 * GIB + 3 * GIB // 2, "train_step")


def test_live_tensor_bytes_by_hand():
    x0 = torch.zeros(10)  # made before: never counted
    with memory.LiveTensorBytes() as live:
        a = torch.ones(1000)  # 4,000 B
        b = a * 2  # 4,000 B more: 8,000 alive
        v = b.view(10, 100)  # a view: no new memory
        del a  # 4,000 alive
        c = x0 + 1  # 40 B
    assert live.peak() == 8000 and live.allocations == 3
    assert live.peak(exclude=live.ids([b])) == 4000  # without b: a alone, then c alone
    live.close()
    del v, c


# ------------------------------------------------------------------ the analytic model
def test_unknown_architectures_have_no_analytic_family(folders):
    from transformers import AutoConfig

    for folder in folders.values():
        config = AutoConfig.from_pretrained(str(folder)).to_dict()
        assert memory.analytic_family({"config": config}) is None
        with pytest.raises(memory.UnknownArchitecture, match="no analytic memory model"):
            memory.estimate_memory(
                {"task": "causal_lm", "config": config},
                {"micro_batch": 1, "max_length": 8, "precision": "fp32"},
            )
    assert memory.analytic_family({"config": {"architecture": "bert"}}) == "bert"
    assert memory.analytic_family({"config": {"model_type": "gpt2"}}) == "gpt2"
    # BERT as a causal LM has no analytic model either: it is measured, not refused.
    assert memory.analytic_family({"task": "causal_lm", "config": {"model_type": "bert"}}) is None


def _bert_spec(drop: float = 0.0) -> dict:
    spec = tiny_spec(hidden=32, layers=2)["model"]
    spec["config"]["dropout"] = drop
    return spec


def test_analytic_levers_are_the_estimates_of_the_changed_recipe():
    spec, recipe = _bert_spec(), {"micro_batch": 8, "max_length": 32, "precision": "fp32"}
    kwargs = dict(num_labels=3, device="cuda")
    variants = {v["lever"]: v for v in memory.analytic_variants(spec, recipe, **kwargs)}
    assert list(variants) == ["lora", "max_length", "bf16", "gradient_checkpointing"]
    assert all(v["source"] == "estimated" for v in variants.values())
    lora = {"r": 8, "alpha": 16, "dropout": 0.0, "target_modules": ["key", "query", "value"]}
    expected = {
        "lora": memory.estimate_memory(spec, {**recipe, "lora": lora}, **kwargs),
        "max_length": memory.estimate_memory(spec, {**recipe, "max_length": 16}, **kwargs),
        "bf16": memory.estimate_memory(spec, {**recipe, "precision": "bf16"}, **kwargs),
        "gradient_checkpointing": memory.estimate_memory(
            spec, recipe, gradient_checkpointing=True, **kwargs
        ),
    }
    for lever, est in expected.items():
        assert variants[lever]["estimate"] == est, lever
    assert variants["lora"]["setting"] == {"train.lora": lora}
    # Each lever lowers the need of a BERT training step.
    base = memory.estimate_memory(spec, recipe, **kwargs)["peak_bytes"]
    assert all(v["estimate"]["peak_bytes"] < base for v in variants.values())
    # A recipe that already trains LoRA in bf16 has nothing to gain from those two.
    done = memory.analytic_variants(spec, {**recipe, "precision": "bf16", "lora": lora}, **kwargs)
    assert [v["estimate"] for v in done if v["lever"] in ("lora", "bf16")] == [None, None]


@pytest.mark.parametrize("arch,task", [("bert", "sequence_classification"), ("gpt2", "causal_lm")])
def test_default_lora_targets_of_the_known_families(arch, task):
    # What the analytic levers adapt is what default_lora_targets finds in a built model.
    from test_memory import build, model_spec

    from campaign.memory.levers import FAMILY_LORA_TARGETS

    model = build(model_spec(arch, task))
    assert memory.default_lora_targets(model) == FAMILY_LORA_TARGETS[arch]


def test_evaluation_phase_scores_micro_batch_times_labels_for_a_causal_lm():
    spec = tiny_spec(task="causal_lm", architecture="gpt2")["model"]
    recipe = {"micro_batch": 4, "max_length": 32, "precision": "fp32"}
    est = memory.estimate_memory(spec, recipe, num_labels=3, device="cpu")
    shape = memory.model_shape(spec)
    scoring = memory.eval_activation_bytes(shape, 4 * 3, 32, 4, device="cpu")
    assert est["bytes"]["evaluation"] == scoring["total"]
    # The fp32 logits of 12 sequences and their log-softmax: 12 x V x 4 x (2 x 32 - 1).
    assert scoring["scores"] == 12 * 600 * 4 * 63
    evaluate = est["phases"]["evaluate"]
    assert (
        evaluate["bytes"]
        == est["bytes"]["weights"] + est["bytes"]["optimizer_state"] + (scoring["total"])
    )
    # Without the number of labels a causal LM's estimate has no evaluation phase.
    assert "evaluate" not in memory.estimate_memory(spec, recipe, device="cpu")["phases"]


def _score(task):
    return memory_check._score_fn(task)


@pytest.mark.parametrize(
    "arch,task,tolerance",
    [
        ("bert", "sequence_classification", 0.3),
        ("gpt2", "sequence_classification", 0.3),
        ("gpt2", "causal_lm", 0.02),  # logits dominate: modelled to the op
    ],
)
@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_evaluation_estimate_against_the_measured_peak(arch, task, tolerance, precision):
    from test_memory import build, make_batch, model_spec

    spec = model_spec(arch, task, hidden=64, heads=4, inter=128, vocab=500, drop=0.1)
    model = build(spec)
    autocast = None
    if precision == "bf16":
        autocast = lambda: torch.autocast("cpu", dtype=torch.bfloat16)  # noqa: E731
    d = 2 if precision == "bf16" else 4
    shape = memory.model_shape(spec, num_labels=3)
    for n in (2, 8):
        measured = memory.eval_peak(model, make_batch(task, n, 32, 500), _score(task), autocast)
        estimated = memory.eval_activation_bytes(shape, n, 32, d, device="cpu")["total"]
        assert abs(estimated / measured - 1) <= tolerance, (n, estimated, measured)


# ------------------------------------------------------------------ measuring real models
def test_meta_counts_equal_the_real_model(folders, inputs, tmp_path):
    lora = {"r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    for task, folder in folders.items():
        lora_here = lora if task == "causal_lm" else {**lora, "target_modules": ["query"]}
        for recipe_lora in (None, lora_here):
            spec = pretrained_spec(task, folder, lora=recipe_lora)
            trainer = trainer_of(spec, inputs, tmp_path / task)
            real = memory.parameter_bytes(trainer.model)
            n = len(trainer.labels) if task == "sequence_classification" else None
            meta = memory.meta_parameter_bytes(trainer.model.config, task, n, recipe_lora)
            assert meta == real, (task, recipe_lora)
            assert real["weights"] == 4 * real["n_params"]  # fp32


def test_default_lora_targets_of_pretrained_models(folders, inputs, tmp_path):
    expected = {
        "sequence_classification": ["key", "query", "value"],  # "dense" is also the head's
        "causal_lm": ["k_proj", "o_proj", "q_proj", "v_proj"],
    }
    for task, folder in folders.items():
        trainer = trainer_of(pretrained_spec(task, folder), inputs, tmp_path / task)
        assert memory.default_lora_targets(trainer.model) == expected[task]


@pytest.mark.parametrize("task", ["sequence_classification", "causal_lm"])
def test_extrapolation_equals_a_real_step_at_the_micro_batch(folders, inputs, tmp_path, task):
    spec = pretrained_spec(task, folders[task])
    trainer = trainer_of(spec, inputs, tmp_path)
    labels = len(trainer.labels)
    subject = memory_check._subject(bench_of(spec, inputs, tmp_path), trainer, labels)
    est = memory.measured_estimate(subject, params=memory.parameter_bytes(trainer.model))
    make = memory_check._batch_maker(trainer)
    loss = memory_check._loss_fn(task)
    for n in (3, MICRO_BATCH):  # between and beyond the probe sizes 2 and 4
        real = memory.step_peak(trainer.model, make(n, MAX_LENGTH), loss)["activations"]
        fit = est["probe"]["fit"]["activations"]
        assert memory.extrapolate(fit, n) == real, n
    assert est["bytes"]["activations"] == memory.extrapolate(
        est["probe"]["fit"]["activations"], MICRO_BATCH
    )


def bench_of(spec: dict, inputs: dict, tmp_path: Path) -> bench.Bench:
    return bench.Bench(
        spec,
        train.read_data(inputs),
        CFG,
        tmp_path / "bench",
        REPO,
        Path(spec["model"]["source"]),
        bench.Hooks(device=CPU),
        None,
    )


# ------------------------------------------------------------------ the preflight memory check
def _check_common(check: dict) -> dict:
    d = check["details"]
    assert d["estimator"] == "measured"
    for row in d["comparison"]:  # exact tensor bytes either way
        if row["component"] in memory_check.EXACT_MEMORY:
            assert row["estimated"] == row["measured"] > 0, row
    act = next(r for r in d["comparison"] if r["component"] == "activations (peak)")
    assert act["estimated"] == act["measured"] and d["extrapolation_relative_error"] == 0.0
    assert d["activation_relative_error"] is None  # nothing analytic to hold to a tolerance
    (l4, toy_card) = d["fit_table"]
    assert l4["fits"] and l4["levers"] == [] and d["fits"] == ["L4"]
    assert not toy_card["fits"] and toy_card["source"] == "measured"
    levers = {r["lever"]: r for r in toy_card["levers"]}
    assert list(levers) == list(memory.LEVERS)
    assert all(r["source"] == "measured" for r in levers.values())
    # Each suggestion is a train key; gradient checkpointing's saving measured on real steps.
    ckpt = levers["gradient_checkpointing"]
    assert ckpt["setting"] == {"train.gradient_checkpointing": True}
    assert ckpt["measured_saves_bytes"] > 0
    assert all(set(r["setting"] or {}) <= set(TRAIN_KEYS) for r in levers.values())
    target = d["estimate_for_cards"]
    saved = int(target["bytes"]["optimizer_state"] * (1 - LOW_BIT_STATE_FRACTION))
    assert levers["optimizer"]["need_bytes"] == max(
        p["bytes"] - (saved if name in ("train_step", "evaluate") else 0)
        for name, p in target["phases"].items()
    )
    chosen = levers["micro_batch"]["setting"]["train.micro_batch"]
    assert levers["micro_batch"]["setting"]["train.grad_accum"] * chosen == MICRO_BATCH * 2
    assert levers["micro_batch"]["need_bytes"] == memory.need_at(target, chosen)[0]
    # LoRA: frozen base, so gradients and AdamW state shrink; half the length needs less.
    for lever in ("lora", "max_length"):
        assert levers[lever]["need_bytes"] < toy_card["need_bytes"], lever
    assert "train.lora" in levers["lora"]["setting"]
    return d


def test_pretrained_roberta_classifier_is_measured(folders, inputs, tmp_path):
    check = run_memory(
        pretrained_spec("sequence_classification", folders["sequence_classification"]),
        inputs,
        tmp_path,
    )["memory"]
    assert check["passed"], check["summary"]
    d = _check_common(check)
    assert d["architecture"] == "roberta" and d["kv_cache"] is None
    assert "evaluate" in d["estimate_for_cards"]["phases"]
    assert "roberta: no analytic model, measured" in check["summary"]


@pytest.fixture(scope="module")
def llama_report(folders, inputs, tmp_path_factory) -> dict:
    spec = pretrained_spec("causal_lm", folders["causal_lm"])
    return run_memory(spec, inputs, tmp_path_factory.mktemp("llama"))


def test_pretrained_llama_with_grouped_query_attention_is_measured(llama_report, inputs):
    report = llama_report
    check = report["memory"]
    assert check["passed"], check["summary"]
    d = _check_common(check)
    assert d["architecture"] == "llama"
    # The measured cache is the grouped-query one: 2 K/V heads, not 4.
    head_dim = LLAMA["hidden"] // LLAMA["heads"]
    gqa = memory.kv_cache_bytes(
        LLAMA["layers"], LLAMA["kv_heads"], head_dim, MAX_LENGTH, MICRO_BATCH, 4
    )
    assert d["kv_cache"] == {"estimated": gqa, "measured": gqa}
    # Evaluation scores every candidate label: micro_batch x n_labels sequences per batch.
    target = d["estimate_for_cards"]
    n_labels = len(train.label_names(train.read_data(inputs).train.labels))
    assert target["settings"]["eval_sequences_per_example"] == n_labels
    per_sequence = target["probe"]["fit"]["evaluation_per_sequence"]["per_example"]
    assert target["phases"]["evaluate"]["bytes_per_example"] == n_labels * per_sequence
    text = preflight_report.format_report(report)
    assert "llama: no analytic memory model; measured on cpu" in text
    assert "levers for toy" in text and "gradient_checkpointing" in text


def test_rerun_gives_the_same_deterministic_part(llama_report, folders, inputs, tmp_path):
    first = llama_report
    second = run_memory(pretrained_spec("causal_lm", folders["causal_lm"]), inputs, tmp_path)
    stable_a, measured_a = preflight_report.split_report(first)
    stable_b, measured_b = preflight_report.split_report(second)
    assert stable_a == stable_b
    assert "measured" not in stable_a["memory"]["details"]
    # Step times vary; the levers' measured bytes (in the fit table) do not.
    assert set(measured_a["memory"]["details"]) == {"measured", "lever_costs"}
    assert stable_a["memory"]["details"]["fit_table"][1]["levers"]  # the levers are in it


def test_known_family_stays_analytic_with_estimated_levers(inputs, tmp_path):
    check = run_memory(tiny_spec(micro_batch=MICRO_BATCH), inputs, tmp_path)["memory"]
    assert check["passed"], check["summary"]
    d = check["details"]
    assert d["estimator"] == "analytic" and d["extrapolation_relative_error"] is None
    assert d["activation_relative_error"] <= CFG["activation_tolerance"]
    (_, toy_card) = d["fit_table"]
    assert {r["source"] for r in toy_card["levers"]} == {"estimated"}
    assert [r["lever"] for r in toy_card["levers"]] == list(memory.LEVERS)
    assert "evaluate" in d["estimate_for_cards"]["phases"]


def test_a_step_that_runs_out_of_memory_still_gives_the_fit_table(inputs, tmp_path, monkeypatch):
    def out_of_memory(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    monkeypatch.setattr(memory_check, "measure_memory", out_of_memory)
    check = run_memory(tiny_spec(micro_batch=MICRO_BATCH), inputs, tmp_path)["memory"]
    assert not check["passed"]
    assert (
        check["summary"] == f"a training step at micro_batch {MICRO_BATCH} ran out of memory on cpu"
    )
    d = check["details"]
    assert d["comparison"] == [] and d["fits"] == ["L4"] and d["fit_table"][1]["levers"]
    assert "out of memory" in "\n".join(memory_check.describe(d))


def test_a_lever_that_cannot_be_measured_is_listed_with_its_reason():
    from test_memory import build, make_batch, model_spec

    spec = model_spec("gpt2", "causal_lm", drop=0.1)
    model = build(spec)
    recipe = {"micro_batch": 4, "grad_accum": 1, "max_length": 32, "precision": "fp32"}

    def batches(n: int, length: int) -> dict:
        if length < 32:
            raise RuntimeError("no kernel for this length")
        return make_batch("causal_lm", n, length, 100)

    subject = memory.Subject(
        model=model,
        task="causal_lm",
        train_cfg=recipe,
        make_batch=batches,
        loss_fn=memory_check._loss_fn("causal_lm"),
        score_fn=memory_check._score_fn("causal_lm"),
        autocast=lambda precision: functools.partial(train.autocast, CPU, precision),
        parameters=lambda lora: memory.meta_parameter_bytes(model.config, "causal_lm", None, lora),
        eval_sequences=3,
        architecture="gpt2",
    )
    base = memory.measured_estimate(subject)
    variants = {v["lever"]: v for v in memory.measured_variants(subject)}
    assert variants["max_length"]["estimate"] is None
    assert variants["max_length"]["note"] == (
        "could not be measured: RuntimeError: no kernel for this length"
    )
    # The others were measured; GPT-2's LoRA (Conv1D weights) on its attention projections.
    for lever in ("lora", "bf16", "gradient_checkpointing"):
        assert variants[lever]["estimate"]["source"] == "measured", lever
    lora = variants["lora"]["estimate"]
    assert lora["model"]["lora"] and lora["bytes"]["gradients"] < base["bytes"]["gradients"] / 4
    assert variants["lora"]["setting"]["train.lora"]["target_modules"] == ["c_attn", "c_proj"]
    checkpointed = variants["gradient_checkpointing"]["estimate"]
    assert checkpointed["bytes"]["activations"] < base["bytes"]["activations"]
    assert checkpointed["bytes"]["weights"] == base["bytes"]["weights"]


def test_the_generate_phase_holds_the_optimizer_state_only_where_the_subject_says():
    """measured_estimate (the fit table's measured levers) takes who generates from the
    subject: beside the AdamW state (the built-in loop's training process) or not (a
    train.command run's model, scored by the campaign after the command has exited)."""
    import dataclasses

    from test_memory import build, make_batch, model_spec

    model = build(model_spec("gpt2", "causal_lm"))
    subject = memory.Subject(
        model=model,
        task="causal_lm",
        train_cfg={"micro_batch": 4, "grad_accum": 1, "max_length": 16, "precision": "fp32"},
        make_batch=lambda n, length: make_batch("causal_lm", n, length, 100),
        loss_fn=memory_check._loss_fn("causal_lm"),
        score_fn=memory_check._score_fn("causal_lm"),
        autocast=lambda precision: None,
        parameters=lambda lora: memory.meta_parameter_bytes(model.config, "causal_lm", None, lora),
        architecture="gpt2",
        kv_length=24,
        kv_batch=3,
    )
    phases = {}
    for beside in (True, False):
        est = memory.measured_estimate(
            dataclasses.replace(subject, optimizer_while_generating=beside)
        )
        phases[beside] = est["phases"]["generate"]
        state = est["bytes"]["optimizer_state"] if beside else 0
        assert phases[beside]["optimizer_state"] == state
        assert phases[beside]["bytes"] == (
            est["bytes"]["weights"] + state + est["bytes"]["kv_cache"]
        )
    assert phases[True]["bytes"] - phases[False]["bytes"] == est["bytes"]["optimizer_state"] > 0
