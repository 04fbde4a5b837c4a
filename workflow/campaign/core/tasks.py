"""Tasks: the one contract that data, train, evaluate and quantize share about what a record is.

A task says how a record becomes a training example, how a model is scored on an item, which
floors a fine-tuned model must beat, and whether the split balances a label. Phases look the task
up here by `model.task` and call it; they do not branch on its name (DESIGN.md, "Tasks and
trainers"). One module per task: a new task is one module and one line in TASKS.

Light on import (standard library only): params validation reads TASKS while Snakemake builds the
DAG; the task modules import transformers inside their functions.
"""

from __future__ import annotations

from dataclasses import dataclass

from campaign.core.errors import CampaignError


@dataclass(frozen=True)
class Task:
    """What a phase needs to know about a task without importing its module.

    name: the value of model.task. module: the module that holds the task's TaskModule as
    `TASK` (imported when a phase needs it). scoring: "label_probability" (a closed set of
    labels, the probability of each) or "generated_text" (the model generates; a per-item score
    in [0, 1]). floors: the reference candidates the verdict weighs a fine-tuned model against.
    stratify_by_label: whether the split balances label shares by default (a generation task
    has no label; its split balances only a column the user names). packs: whether
    train.packing packs its examples into shared rows (packing_refusal).
    """

    name: str
    module: str
    scoring: str
    floors: tuple[str, ...]
    stratify_by_label: bool
    packs: bool


# The floors of the label tasks (campaign.evaluate.floor).
LABEL_FLOORS = ("majority", "tfidf_logreg")

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="sequence_classification",
            module="campaign.tasks.sequence_classification",
            scoring="label_probability",
            floors=LABEL_FLOORS,
            stratify_by_label=True,
            # A classifier's example is one sequence with one label: nothing to pack it with.
            packs=False,
        ),
        Task(
            name="causal_lm",
            module="campaign.tasks.causal_lm",
            scoring="label_probability",
            floors=LABEL_FLOORS,
            stratify_by_label=True,
            packs=True,
        ),
        Task(
            name="generation",
            module="campaign.tasks.generation",
            scoring="generated_text",
            floors=("retrieval", "zero_shot"),
            stratify_by_label=False,
            # Not yet: packed conversations were never shown to train as they do unpacked.
            packs=False,
        ),
    )
}


class TaskModule:
    """The interface every phase calls for what differs per task: one subclass per module in
    campaign/tasks/ (its instance is the module's `TASK`), found by `module_of(model.task)`.
    Phase code calls these methods; it does not branch on a task's name.

    `info` is the task's Task (the light facts above). The methods are grouped by the phase
    that calls them; a method a task does not support raises CampaignError naming the task.
    """

    info: Task

    def _unsupported(self, what: str):
        raise CampaignError(f"model.task: {self.info.name} does not support {what}")

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    def setup(self, model_spec: dict, tokenizer, root):
        """What a run formats with (its template, its settings), once per run."""
        self._unsupported("setup")

    def encode_split(self, run, tokenizer, split, max_length: int) -> list[dict]:
        """A split's training examples: {"input_ids", "labels"} dicts."""
        self._unsupported("encode_split")

    def check_train_examples(self, run, examples) -> None:
        """Refuse a train split the run cannot learn from (one line naming the key)."""

    def evaluate(self, model, tokenizer, run, split, examples, **kwargs):
        """(loss per target, mean per-item score, predictions) on a split."""
        self._unsupported("evaluate")

    def empty_predictions(self):
        """The predictions frame of an empty split."""
        self._unsupported("empty_predictions")

    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    def tokenization_check(self, trainer, split, inspect: int, full=None):
        """(passed, summary, details) of the preflight's tokenization check."""
        self._unsupported("tokenization_check")

    def not_reproduced(self, trainer, split, n: int, details: dict):
        """Why the overfit check's memorised examples were not reproduced (None: they were)."""
        self._unsupported("not_reproduced")

    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    def metric_of(self, model_spec: dict) -> str:
        """The per-item metric the task's decisions are made on."""
        self._unsupported("metric_of")

    def floor_stage(self, spec: dict, inputs: dict, folder, root, timings) -> None:
        """Score the task's floors (the floor stage)."""
        self._unsupported("floor_stage")

    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    def init_family(self) -> str:
        """The family of the small from_config model `campaign init` writes
        (model.config.architecture: bert, gpt2 or llama), and whose LoRA targets it proposes
        for it. Called by campaign.tools.init and campaign.tools.init_tokenizers."""
        self._unsupported("campaign init")

    def init_needs_lm_head(self) -> bool:
        """Whether the task needs a language-model head: `campaign init` refuses an
        encoder-only pretrained folder (bert, roberta, ...) for it. Called by
        campaign.tools.init."""
        return True

    def init_fields(self, args, fields: dict) -> dict:
        """data.fields from `campaign init`'s column flags: `fields` holds id, text, label,
        group and timestamp as the flags gave them (None where not given); the task checks the
        ones it needs and adds its own, refusing a missing or misplaced flag in one line. Called
        by campaign.tools.init."""
        self._unsupported("campaign init")

    def init_check_labels(self, labels, args, data) -> None:
        """Refuse, in one line naming --label-column, data whose distinct labels (`labels`:
        the label column's value counts) the task cannot learn from; by default nothing is
        refused. Called by campaign.tools.init."""

    def init_config(self, config: dict) -> None:
        """Adjust, in place, the small from_config model's config that `campaign init` writes
        (by default nothing). Called by campaign.tools.init."""

    def init_lowercase(self) -> bool:
        """Whether a from_config tokenizer may lowercase the texts (the template's
        model.tokenizer.lowercase applies); False where case is part of what is scored.
        Called by campaign.tools.init_tokenizers."""
        return True

    def init_generation(self, records, folder, train_tokenizers, longest):
        """What `campaign init` sizes a generating task's run with: None for a task that does
        not generate (init sizes train.max_length on the text column), else (the task's keys of
        the model section, the formatted examples' token lengths per tokenizer, the quantile of
        them that train.max_length must reach). records: the data's records; folder: the
        pretrained model folder, None for from_config; train_tokenizers(texts): the from_config
        run's tokenizers as [(tokenizer, n)], each trained on the first n texts; longest(lengths):
        the longest of token lengths, rounded up as init rounds lengths. Called by
        campaign.tools.init."""
        return None

    def init_model_text(self, model: dict, flow) -> list[str]:
        """The lines of the params file's model section for the task's own keys of `model`
        (the model section `campaign init` writes), with their comments, each value written by
        `flow` (YAML flow style); none by default. Called by campaign.tools.init."""
        return []

    def decision_key(self) -> str:
        """The dotted params key that names the metric the task's decisions are made on:
        `campaign init` writes evaluation.metric only where it is that key, and prints the
        value at this key; docs/registries.md shows it. Called by campaign.tools.init and
        campaign.tools.registries_doc."""
        return "evaluation.metric"

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


def module_of(name: str) -> TaskModule:
    """The TaskModule of task `name` (its module's TASK), or a one-line error naming the known
    tasks. Every module under campaign.tasks counts in the code version of a stage that can call
    this (core/code.py follows `discover_member`), so editing a task's module reruns its stages."""
    return discover_member("campaign.tasks", get(name).module).TASK


def discover_member(package: str, module: str):
    """Import `module`, a member of `package` chosen at run time."""
    from importlib import import_module

    if not module.startswith(package + "."):
        raise CampaignError(f"{module} is not a member of {package}")
    return import_module(module)


def trainer_module(name: str):
    """Transitional: the task module for generation, None for the label tasks (their phases
    still branch; being replaced by module_of)."""
    return module_of(name) if TASKS[name].scoring == "generated_text" else None


def floors_of(name: str) -> tuple[str, ...]:
    """The floors a model of task `name` can be weighed against (evaluation.floor picks)."""
    return get(name).floors


def check_floors(name: str, floors) -> None:
    """evaluation.floor must name floors of the task: a TF-IDF classifier is no floor for free
    text, nor a retrieved answer for a label."""
    wrong = [f for f in floors if f not in floors_of(name)]
    if wrong:
        raise CampaignError(
            f"evaluation.floor: {wrong[0]} is not a floor of the {name} task (its floors: "
            f"{', '.join(floors_of(name))})"
        )


def packing_refusal(name: str) -> str | None:
    """Why train.packing does not apply to task `name` (None: it packs), as the words after
    "train.packing: ". The one answer the params check, the trainer, the memory check's fit
    table and its measured lever costs read, so that no lever row offers a key the params
    check then refuses."""
    if get(name).packs:
        return None
    packing = [t.name for t in TASKS.values() if t.packs]
    return f"packs {', '.join(packing)} examples only (model.task is {name})"


def scoring_of(name: str) -> str:
    """How the evaluation scores a model of task `name`: its Task's scoring."""
    return get(name).scoring


def get(name: str) -> Task:
    """The task named by model.task, or a one-line error listing the known ones."""
    try:
        return TASKS[name]
    except KeyError:
        raise CampaignError(
            f"model.task: {name!r} is not a task module (known: {', '.join(sorted(TASKS))})"
        ) from None


# model.chat_template values that name no file: the tokenizer's own template, or the plain one.
TEMPLATE_SETTINGS = ("model", "none")


def template_files(model: dict, root) -> list:
    """The Jinja file model.chat_template names (relative to the project root), as a derived
    input of every job that formats with it (train, preflight, floor, quantize): its content is
    then in their keys, so editing the template retrains and rescores; [] for model, none or no
    template. A file outside the project (a `..` path, an absolute path elsewhere, a link out)
    or a folder is refused in one line naming the key (check_template_file); a missing one is
    Snakemake's missing input (`campaign validate` refuses it first)."""
    path = check_template_file(model, root, must_exist=False)
    return [] if path is None else [path]


def check_template_file(model: dict, root, must_exist: bool = True):
    """The path of the template file model.chat_template names (None for model, none or no
    template), after refusing one that lies outside the project folder `root` (links followed:
    no file outside the project is ever read as a template), is missing (when `must_exist`),
    or is not a file."""
    from pathlib import Path

    setting = model.get("chat_template")
    if setting is None or setting in TEMPLATE_SETTINGS:
        return None
    path = Path(setting)
    path = path if path.is_absolute() else Path(root) / path
    expected = "model, none or the path of a Jinja template file inside the project"
    if not path.resolve().is_relative_to(Path(root).resolve()):
        raise CampaignError(
            f"model.chat_template: {setting} lies outside the project folder; expected {expected}"
        )
    if not path.exists():
        if not must_exist:
            return path
        raise CampaignError(f"model.chat_template: {setting}: no such file; expected {expected}")
    if not path.is_file():
        raise CampaignError(f"model.chat_template: {setting} is not a file; expected {expected}")
    return path
