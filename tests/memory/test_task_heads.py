"""The memory model sizes a task by what its module says (TaskModule.memory_head, eval_sequences),
not by its name: a new task defined by one module (here a copy of a label task under another
name) gets the same estimate as the task whose head it has, and its own name on the estimate."""

from __future__ import annotations

import dataclasses
import sys
import types

import pytest
from test_memory import model_spec

from campaign import memory
from campaign.core import tasks
from campaign.core.errors import CampaignError
from campaign.tasks.causal_lm import CausalLM
from campaign.tasks.sequence_classification import SequenceClassification

RECIPE = {"micro_batch": 4, "grad_accum": 1, "max_length": 32, "precision": "fp32"}


def new_task(monkeypatch, name: str, like: str, base: type) -> None:
    """Register task `name`: one module whose TASK has the head of task `like`."""
    info = dataclasses.replace(tasks.TASKS[like], name=name, module=f"campaign.tasks.{name}")
    module = types.ModuleType(info.module)
    module.TASK = type(name, (base,), {"info": info})()
    monkeypatch.setitem(sys.modules, info.module, module)
    monkeypatch.setitem(tasks.TASKS, name, info)


@pytest.mark.parametrize(
    ("name", "like", "base", "arch"),
    [
        ("tagging", "sequence_classification", SequenceClassification, "bert"),
        ("ranking", "causal_lm", CausalLM, "gpt2"),
    ],
)
def test_a_new_task_module_is_sized_by_its_head(monkeypatch, name, like, base, arch):
    new_task(monkeypatch, name, like, base)
    got = memory.estimate_memory(model_spec(arch, name, drop=0.1), RECIPE, num_labels=3)
    want = memory.estimate_memory(model_spec(arch, like, drop=0.1), RECIPE, num_labels=3)
    assert got["model"].pop("task") == name and want["model"].pop("task") == like
    assert got == want
    assert got["bytes"]["evaluation"] > 0
    # A causal LM's head keeps a KV cache and scores every label's response (3 sequences an
    # example); a classifier's scores one sequence and keeps none.
    assert (got["bytes"]["kv_cache"] > 0) == (like == "causal_lm")
    assert memory.analytic_family({"task": name, "config": {"model_type": "bert"}}) == (
        None if like == "causal_lm" else "bert"
    )


def test_a_task_without_an_analytic_model_is_refused_naming_those_that_have_one():
    refusal = r"model.task: 'generation' is not one of sequence_classification, causal_lm"
    with pytest.raises(CampaignError, match=refusal):
        memory.estimate_memory(model_spec("gpt2", "generation"), RECIPE)


def test_the_probe_builds_the_model_class_the_task_trains(monkeypatch):
    """A task with no analytic memory model of its own (memory_head None: the memory check
    probes it) whose model is a classifier: the probe's exact parameter bytes are those of the
    classifier the run trains (TaskModule.model_class, head_config, lora_task_type), not of a
    causal LM chosen because the task has no analytic head."""
    import transformers as tf

    class Probed(SequenceClassification):
        def memory_head(self):
            return None

    new_task(monkeypatch, "probed", "sequence_classification", Probed)
    config = tf.GPT2Config(vocab_size=64, n_embd=16, n_layer=1, n_head=2, n_positions=32)
    lora = {"r": 2, "target_modules": ["c_attn"]}
    for adapter in (None, lora):
        got = memory.meta_parameter_bytes(config, "probed", 3, adapter)
        want = memory.meta_parameter_bytes(config, "sequence_classification", 3, adapter)
        assert got == want, adapter
    trained = tf.GPT2ForSequenceClassification(tf.GPT2Config(**config.to_dict(), num_labels=3))
    assert memory.meta_parameter_bytes(config, "probed", 3) == memory.parameter_bytes(trained)
