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
# What the label tasks share: each item scored by the probability of each label, weighed
# against the label floors, the split balancing label shares.
LABEL_TASK = {"scoring": "label_probability", "floors": LABEL_FLOORS, "stratify_by_label": True}

TASKS: dict[str, Task] = {
    task.name: task
    for task in (
        Task(
            name="sequence_classification",
            module="campaign.tasks.sequence_classification",
            **LABEL_TASK,
            # A classifier's example is one sequence with one label: nothing to pack it with.
            packs=False,
        ),
        Task(name="causal_lm", module="campaign.tasks.causal_lm", **LABEL_TASK, packs=True),
        Task(
            name="generation",
            module="campaign.tasks.generation",
            scoring="generated_text",
            floors=("retrieval", "zero_shot", "few_shot"),
            stratify_by_label=False,
            # Each conversation keeps to itself in a packed row (train/packing.py): its loss
            # on the assistant's tokens is the one it has alone.
            packs=True,
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

    def _undecided(self, method: str):
        """A method every task must define for itself (no default a new task would inherit
        unawares): the error names the task, its class and the method."""
        raise NotImplementedError(
            f"task {self.info.name}: {type(self).__name__} must define {method} "
            f"(TaskModule.{method} has no default; see its docstring)"
        )

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    # What the train phase (models, the loop, scoring, train.command) asks a task. The defaults
    # are a decoder's: a causal LM trained on its target tokens (labels shifted by one).

    # The train stage's name for a split's final score (its progress line): the label tasks'
    # accuracy; a task scored on generated text has none at training time, only its loss.
    score_name = "loss per answer token"
    # Whether the model ends a response with EOS (a decoder): models.load_tokenizer then gives a
    # tokenizer without one its separator token as EOS.
    decoder = True
    # Whether items carry a label from a closed set: the run spec and the run manifest of a
    # train.command run name the labels (label ids), and its saved model is scored by
    # train.SavedModel (what the quantize phase scores with); False: the task scores its items.
    labeled = False
    # Whether the model's head has one output per label (a classifier): a saved model's
    # id2label and an adapter's head must match the run's labels (train.command's checks).
    label_head = False
    # The model a pretrained base is made into, as train.command's adapter check words it.
    model_noun = "causal LM"

    def check_architecture(self, architecture: str) -> None:
        """Refuse a model.config.architecture (bert, gpt2, llama) the task cannot train, in one
        line naming the key; train's check_model_spec calls it for a from_config model."""
        if architecture == "bert":
            raise CampaignError(
                f"model.config.architecture: {self.info.name} needs gpt2 or llama (a decoder)"
            )

    def model_class(self):
        """The transformers Auto class of the task's model (AutoModelForCausalLM by default):
        train's builders pick its class for a config, its loaders and the command adapter's
        check call its from_pretrained."""
        import transformers

        return transformers.AutoModelForCausalLM

    def head_config(self, labels) -> dict:
        """The model config's keys for a head over `labels` (label-id order): num_labels,
        id2label, label2id for a classifier; {} for a model without a head of labels. train's
        builders pass them to the config and to from_pretrained."""
        return {}

    def lora_task_type(self):
        """peft's TaskType of the task's model (train.lora wraps it so; the adapter's base.json
        names the head by it)."""
        from peft import TaskType

        return TaskType.CAUSAL_LM

    def loss_sum(self, logits, labels):
        """Sum (not mean) of per-target cross-entropies of one micro-batch (a scalar tensor):
        train.steps.loss_sum calls it on the batch's logits (fp32) and labels. The default:
        position t predicts token t+1, IGNORE labels skipped."""
        import torch.nn.functional as F

        return F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]),
            labels[:, 1:].reshape(-1),
            ignore_index=-100,  # train.IGNORE: the positions the loss skips
            reduction="sum",
        )

    def setup(self, model_spec: dict, tokenizer, root, *, labels=(), max_length=None):
        """What a run formats and scores with, once per run (the loop's run_setup; the label
        tasks' names, label ids and format; the generation task's template and settings).
        labels: the run's label names in label-id order; max_length: train.max_length."""
        self._unsupported("setup")

    def encode_split(self, run, tokenizer, split, max_length: int) -> list[dict]:
        """A split's training examples: {"input_ids", "labels"} dicts."""
        self._unsupported("encode_split")

    def check_train_examples(self, run, examples) -> None:
        """Refuse a train split the run cannot learn from (one line naming the key)."""

    def evaluate(self, model, tokenizer, run, split, examples, **kwargs):
        """(loss per target, mean per-item score or None, what `predictions` makes the frame
        of) on a non-empty split; the loop calls it at every evaluation and on the saved model
        (kwargs: micro_batch, pad_id, device, final, autocast). The generation task's score
        and frame come only when `final` (generating every eval_every steps would cost more
        than training)."""
        self._unsupported("evaluate")

    def scores(self, model, tokenizer, run, split, examples, **kwargs):
        """(probabilities (n, n_labels), summed loss, target count) of a label task's model on
        a split (kwargs: micro_batch, pad_id, device, autocast); Trainer.scores calls it."""
        self._unsupported("scores")

    def predictions(self, run, split, scored):
        """The predictions frame of a split from evaluate's third value (None: the split is
        empty); the train stage writes it. The default: the frame evaluate made, or the empty
        one."""
        return scored if scored is not None else self.empty_predictions()

    def empty_predictions(self):
        """The predictions frame of an empty split."""
        self._unsupported("empty_predictions")

    def command_fields(self, model_spec: dict, tokenizer_folder, root) -> dict:
        """What a train.command run spec holds for this task besides the common keys (the
        generation task: the chat template the campaign formats and scores with); {} here."""
        return {}

    def eval_items(self, model_spec: dict) -> int | None:
        """How many validation items the loop generates and scores at each evaluation
        (model.generation.eval_items for a task judged on generated text; None: off). The
        default: None, the task's curve is evaluate's score (a label task's accuracy)."""
        return None

    def generated_score(self, model, tokenizer, run, split) -> float:
        """The mean per-item score in [0, 1] of the model's greedy generations on `split` (the
        loop's fixed validation subsample, a train.batches.Split), by the task's metric: the
        training curve train.select: best_generated chooses by. Only a task with eval_items
        has one."""
        self._unsupported("generated scores during training")

    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    def tokenization_check(
        self, trainer, split, inspect: int, full=None, max_unknown_share: float = 1.0
    ):
        """(passed, summary, details) of the preflight's tokenization check
        (preflight/checks/tokenization.py) on the Trainer `trainer` built on the sample `split`:
        `inspect` examples shown, `full` the whole data (train, validation, test),
        `max_unknown_share` preflight.max_unknown_token_share (a task that spells its text
        byte-level may ignore it). details["inspected"]: one entry per example shown, as the
        check's describe prints it: id, label, tokens, loss_positions, n_tokens, text_tokens,
        truncated and loss_on (or a task module's view: marked, n_tokens, targets, truncated)."""
        self._unsupported("tokenization_check")

    def not_reproduced(self, trainer, split, n: int, details: dict):
        """Why the overfit check's memorised examples were not reproduced (None: they were),
        asked by preflight/checks/overfit.py once the loss is below its threshold; a task that
        only checks the loss returns None at once (its answers are the loss's): the default."""
        return None

    def generates_text(self) -> bool:
        """Whether a run generates free text (model.generation): the memory check sizes its KV
        cache (Generating) and refuses a prompt past the model's positions, the overfit check
        records the step its answers came back, and the preflight spec notes a built-in run
        planned beside a command baseline. False: the task scores its items in one forward."""
        return False

    def longest_prompt(self, trainer, full) -> tuple[int, str]:
        """(tokens, "<split> item <id>") of the longest prompt a run generates from, over the
        evaluation splits of `full` (the whole data), counted with `trainer`'s tokenizer: what
        the memory check sizes the KV cache on. Only a task that generates_text."""
        self._unsupported("longest_prompt")

    def memory_task(self) -> str:
        """The task whose memory model a run of this task is measured as (campaign.memory: its
        Subject's task, the loss and the scoring the probe runs; preflight/checks/memory.py):
        the task itself, unless it trains another task's model (e.g. a causal LM)."""
        return self.info.name

    def memory_head(self) -> str | None:
        """The head of the task's model, as the analytic memory model sizes it
        (campaign.memory.shape, activations, estimate; the probe's model class and peft
        TaskType): "classifier" (a head over num_labels), "lm" (a causal LM's head over the
        vocabulary; the model keeps a KV cache), or None: no analytic model of its own
        (model_shape refuses it; the memory check probes it as its memory_task)."""
        return None

    def eval_sequences(self, num_labels: int | None) -> int:
        """How many sequences the evaluation scores per example, with `num_labels` labels (None
        or 0: not known, then 0 for a task that needs them): the memory estimate's evaluation
        batch (campaign.memory.estimate) and the memory check's probe."""
        return 1

    def resume_generations(self, trainer, model, texts) -> list | None:
        """What the resume check (preflight/checks/resume.py) compares between the model in
        memory and its reloaded copy beside the predictions: `model`'s greedy continuations of
        `texts`, or None when the task's predictions say it all."""
        return None

    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    def metric_of(self, model_spec: dict) -> str:
        """The per-item metric the task's decisions are made on."""
        self._unsupported("metric_of")

    def floor_spec(self, params: dict) -> dict:
        """What the floor stage's spec (its key) holds beyond the floors' names and the task:
        the model the floors prompt and how. {} by default: floors that read only the split
        files (the label floors) depend on nothing else."""
        return {}

    def floor_stage(self, spec: dict, inputs: dict, folder, root, timings) -> None:
        """Score the task's floors (the floor stage)."""
        self._unsupported("floor_stage")

    def scorer(self, evaluation: dict, model_spec: dict, train, evals):
        """The Scorer the evaluate stage (and quantize_select) scores every variant with
        (campaign.evaluate.scoring: items, point, score, decided_errors, error_files,
        metric (what decides), item_metric), from the evaluation settings, the evaluate spec's
        model part, the train split file and the evaluation split files `evals`. Called by
        evaluate.scoring.scorer."""
        self._unsupported("scorer")

    def check_evaluation(self, params: dict) -> None:
        """Refuse the metric keys the task does not decide on, in one line naming the key
        (evaluation.metric, model.generation): the evaluate phase's params check calls it after
        check_floors."""
        self._unsupported("check_evaluation")

    def evaluation_model(self, model: dict) -> dict:
        """The part of params' `model` the evaluation's spec holds (the settings its per-item
        metric reads); {} for none, and then the spec has no `model`. Called by the evaluate
        stage's spec."""
        return {}

    def metric_libraries(self, model_spec: dict) -> dict[str, str]:
        """{library: version} of the libraries that compute the task's per-item scores, given
        the evaluate spec's model part: the evaluate key holds them (a new version rescores);
        {} for none. Called by the evaluate stage's key view."""
        return {}

    def metric_code(self, model_spec: dict, root) -> list:
        """The files of user code that computes the per-item scores (a user metric's module),
        the evaluate stage's metric_code input; [] for none. Called by evaluate_inputs."""
        return []

    def check_metric(self, model: dict, root) -> None:
        """`campaign validate`'s check that the per-item metric resolves as the evaluate stage
        resolves it (one line naming the key); nothing for a task without one."""

    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # (and what plan, quantize and guards ask of a task: its model's parts, its own settings)
    # What the task's trained model has, that a quantization variant (its NEEDS) or a guard may
    # need: "classification_head" (a head giving each label's probability: what an ONNX export
    # serves), "kv_cache" (it decodes token by token through a KV cache, which a KV-cache
    # variant quantizes), "judged_on_generation" (it is scored on the text it generates, so a
    # broken cache shows in its scores), "lm_harness" (a causal LM that lm-evaluation-harness
    # can score: evaluation.guards), "chat_format" (its jobs format conversations: they read
    # data.special_tokens).
    model_offers: tuple[str, ...] = ()

    def offers(self, need: str) -> bool:
        """Whether the task's model has `need` (one of model_offers' words): the quantize
        phase's variant placement, the guards' check and the run spec ask it."""
        return need in self.model_offers

    # The task's own model settings: model.<settings_key> (None: the task has none), the keys
    # of it that only score what was generated (no job that trains or generates reads them),
    # and its defaults (core/defaults.py: a key at its default counts as absent).
    settings_key: str | None = None
    scoring_only_settings: tuple[str, ...] = ()
    settings_defaults: dict = {}  # read only (a task's is a MappingProxyType)

    def own_settings(self, model: dict, scoring: bool = True) -> dict:
        """{settings_key: section} of the task's own model settings as `model` gives them ({}:
        the task has none, or they are absent); scoring=False leaves out scoring_only_settings.
        plan/ids.py (run specs, run ids) and the quantize selection's spec read it."""
        if self.settings_key is None or self.settings_key not in model:
            return {}
        section = model[self.settings_key]
        if not scoring and section:
            section = {k: v for k, v in section.items() if k not in self.scoring_only_settings}
        return {self.settings_key: section}

    def settings_in_ids(self, model: dict) -> dict:
        """The task's own settings as a run id hashes them (plan/ids.py generating_keys):
        own_settings(scoring=False) with each key at its default left out (an absent key and
        its default are one run), and a section left empty dropped."""
        out = {}
        for key, section in self.own_settings(model, scoring=False).items():
            defaults = self.settings_defaults
            kept = {
                k: v for k, v in (section or {}).items() if not (k in defaults and v == defaults[k])
            }
            if kept:
                out[key] = kept
        return out

    def quantize_settings(self, section: dict) -> dict:
        """The task's part of a quantize job's spec (hashed into its key), from the
        `quantization` section: e.g. the label tasks' sample generation a job shows
        ("generation": quantization.generation, or None where the task's runs show none); {}
        for a task that reads nothing there. No default: every task says what it reads."""
        self._undecided("quantize_settings")

    def selection_metric(self, metric: str | None, model: dict) -> str | None:
        """The metric the quantize selection (quantization.runs representative or best_seed)
        ranks runs by: evaluation.metric (`metric`) for a task decided on it (the label
        tasks); a task decided on its own settings names its per-item metric from `model`
        (its metric_of). No default: every task says which metric decides it."""
        self._undecided("selection_metric")

    def quantized(self, job):
        """Judge a quantized variant of one of the task's runs (campaign.quantize.stage calls
        it with its Job: spec, inputs, root, ctx, variant): ({split: predictions frame with the
        run's columns}, the quantized model, result fields, measurements fields). A label task
        returns job.label_scores(); a task scored in one forward pass times its variant with
        job.measured(model)."""
        self._unsupported("quantization")

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
        model.tokenizer.lowercase applies); False where case is part of what is scored. No
        default: a task `campaign init` supports says whether case counts. Called by
        campaign.tools.init_tokenizers."""
        self._undecided("init_lowercase")

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
    def report_data(self, splits: dict, model_folder, specs: list, root):
        """The report's data facts this task shows instead of the records per label, as a
        pandas frame with one row per split (a task without labels: records, prompt and
        response lengths in tokens, the truncated share at train.max_length), or None: the
        data section draws the records per label. splits: {split: its split file}; model_folder:
        a finished run's model folder (its saved tokenizer); specs: the runs' spec.json
        contents; root: the repository root. Called by campaign.data.section."""
        return None

    # ------------------------------------------------------------------ end report


def module_of(name: str) -> TaskModule:
    """The TaskModule of task `name` (its module's TASK), or a one-line error naming the known
    tasks. Every module under campaign.tasks counts in the code version of a stage that can call
    this (core/code.py follows `discover_member`), so editing a task's module reruns its stages."""
    task = discover_member("campaign.tasks", get(name).module).TASK
    undecided = [m for m in UNDECIDED if getattr(type(task), m) is getattr(TaskModule, m)]
    if undecided:  # when the DAG is built or the params validated, not after the runs trained
        raise CampaignError(
            f"task {name}: {type(task).__name__} must define {', '.join(undecided)} "
            "(TaskModule has no default for them; see their docstrings)"
        )
    return task


# The TaskModule methods without a default: every task decides them (module_of checks).
UNDECIDED = ("quantize_settings", "selection_metric", "init_lowercase")


def discover_member(package: str, module: str):
    """Import `module`, a member of `package` chosen at run time."""
    from importlib import import_module

    if not module.startswith(package + "."):
        raise CampaignError(f"{module} is not a member of {package}")
    return import_module(module)


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
