"""The defaults of the `train` and `model` keys a params file or a run spec may leave out,
written once.

These keys came after runs had been made; each default is the value that means "as before", so
a spec written before the key existed trains the same model. Three readers, one table:
- the recipe (train/recipe.py) fills a missing key from it;
- run ids and store keys (plan/ids.py) leave a key at its default out of the hash, so an old
  spec keeps its id and its store entries;
- the schema's reference (docs/params.md, tools/params_doc.py) prints "Absent: <default>" from
  it, and a test checks that the schema's optional `train` keys are exactly these.
MODEL_DEFAULTS and GENERATION_DEFAULTS are the same for model.chat_template and
model.generation's keys (the generation task, tasks/generation/chat.py, fills them from here).

Standard library only: params validation imports it while Snakemake builds the DAG.
"""

from __future__ import annotations

from types import MappingProxyType

TRAIN_DEFAULTS = MappingProxyType(
    {
        # the frozen base's quantization (train/basequant.py): none
        "base_quantization": None,
        # recompute activations in backward: off (the same weights; operational, not in ids)
        "gradient_checkpointing": False,
        # length-grouped order within windows of micro-batches: off
        "group_by_length": False,
        # causal_lm examples packed into rows of max_length: off
        "packing": False,
        # torch AdamW (train/optim.py)
        "optimizer": "adamw",
        # processes one run trains on (train/distributed.py)
        "devices": 1,
        # the base model's own dropout during training: on, as transformers and peft train it
        "base_dropout": True,
        # your own training command (train/command.py): none, the built-in loop
        "command": None,
        # named training commands train.command may name: none
        "commands": {},
        # which step's model the run keeps (train/select.py): the last
        "select": "last",
    }
)


def with_train_defaults(train: dict) -> dict:
    """A `train` section with every key of TRAIN_DEFAULTS it lacks filled in (a new dict)."""
    return {**TRAIN_DEFAULTS, **train}


def train_key(train: dict, key: str):
    """A `train` key's value in a section or run spec that may lack it (its default then)."""
    return train.get(key, TRAIN_DEFAULTS[key])


MODEL_DEFAULTS = MappingProxyType(
    {
        # generation: the tokenizer's own chat template (tasks/generation/chat.py resolve_template)
        "chat_template": "model",
    }
)

GENERATION_DEFAULTS = MappingProxyType(
    {
        # the per-item score the evaluation decides on: scoring only, in no run id
        "metric": "token_f1",
        # the most tokens generated per item
        "max_new_tokens": 64,
        # prompts generated together
        "batch_size": 8,
        # the largest share of training answers train.max_length may cut
        "max_truncated_share": 0.02,
        # validation items generated and scored at each train.eval_every: none (off)
        "eval_items": None,
    }
)


def generation_settings(model: dict) -> dict:
    """model.generation with every key of GENERATION_DEFAULTS it lacks filled in (a new dict);
    an unknown key is one line naming it."""
    key = generation_key()
    given = model.get(key) or {}
    unknown = sorted(set(given) - set(GENERATION_DEFAULTS))
    if unknown:
        from campaign.core.errors import CampaignError

        raise CampaignError(f"model.{key}.{unknown[0]}: unknown key")
    return {**GENERATION_DEFAULTS, **given}


def generation_key() -> str:
    """The model key GENERATION_DEFAULTS are the defaults of: the settings_key of the task whose
    own settings they are (core/tasks.py TaskModule), so that no key name is written twice."""
    from campaign.core.tasks import TASKS, module_of

    owners = [module_of(t) for t in TASKS]
    return next(t.settings_key for t in owners if t.settings_defaults is GENERATION_DEFAULTS)


DATA_DEFAULTS = MappingProxyType(
    {
        # text that spells a special token of the tokenizer (data/control_tokens.py): refused
        "special_tokens": "refuse",
    }
)


def special_tokens_policy(model: dict) -> str:
    """data.special_tokens as a generating job's `model` spec carries it (plan/ids.py
    resolved_spec copies it there when it is not the default; absent: the default)."""
    return model.get("special_tokens", DATA_DEFAULTS["special_tokens"])
