"""The preflight phase: one cheap pass over the baseline recipe, before any training job spends
money, that fails loudly when the recipe is broken.

The checks (`campaign.preflight.checks`, one module each) run on a seeded sample of the splits,
each independent of the others (a check builds its own throwaway Trainer; a broken piece fails
its own check, not the rest). `preflight.blocking` names the checks whose failure stops the
campaign. Tests break one piece at a time through `Hooks` (campaign.preflight.bench).

The report is a snapshot: throughput and free disk are measured when the stage runs, and the
store reuses the report until the spec, the data or the code change (the key does not hold the
host). Numbers come from the sample: a tokenizer trained on the sample (model.tokenizer.source
train_split) can hold fewer tokens than one trained on the full split, so the memory comparison
uses the model actually built, and the fit table the configured vocabulary size.
"""

from campaign.core.declare import files_in, sections_by
from campaign.core.lazy import exports
from campaign.core.stage import Findings, From, Phase, Stage
from campaign.train import EXECUTION, TRAIN_INPUTS
from campaign.train import INPUTS as TRAINING_INPUTS
from campaign.train import LIBRARIES as TRAINING_LIBRARIES

_PUBLIC = {
    "failed_blocking": "report",
    "format_report": "report",
    # a model folder's tokenizer, checked by init and validate before any job (tokenizer_folder)
    "check_model_folder": "tokenizer_folder",
    "tokenizer_problem": "tokenizer_folder",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def _preflight_spec(params: dict) -> dict:
    """The baseline recipe (first seed) and the checks' settings."""
    from campaign.plan import resolved_spec

    spec = {
        "run": resolved_spec(params, {}, params["ablation"]["seeds"][0]),
        "preflight": params["preflight"],
    }
    if _builtin_beside_a_command(params):
        spec["builtin_generates"] = True
    return spec


def _builtin_beside_a_command(params: dict) -> bool:
    """Whether the baseline is a train.command while some planned run takes the built-in loop
    (a factor or an explicit cell on train.command) of a generation task: the memory check
    sizes the baseline's recipe, and a built-in run generates beside its optimizer state, a
    command's run does not (campaign.train.scores_beside_optimizer), so the check holds the
    state for it too."""
    from campaign.core.tasks import TASKS, module_of
    from campaign.plan import command_of, trainer_levels

    task, train = params["model"]["task"], params["train"]
    if command_of(train) is None or task not in TASKS or not module_of(task).generates_text():
        return False  # a task that scores in one forward: no generate phase to size
    return any(command_of({**train, "command": lvl}) is None for _, lvl in trainer_levels(params))


def _preflight_key(spec: dict) -> dict:
    """What changes the report: the run's identity (not its checkpoint settings), and the checks'
    settings but max_hours (the plan table holds the projected plan against it)."""
    from campaign.plan import identity

    checks = {k: v for k, v in spec["preflight"].items() if k != "max_hours"}
    key = {"run": identity(spec["run"]), "preflight": checks}
    if spec.get("builtin_generates"):  # absent: the key of a report made before it
        key["builtin_generates"] = True
    # The commands its `command` check runs (none: the key of a report made before it).
    commands = _commands(spec["run"]["train"])
    return {**key, "commands": commands} if commands else key


def _commands(train: dict) -> dict:
    from campaign.train import commands_of

    return {
        name: {k: v for k, v in raw.items() if k != "grace_seconds"}
        for name, (_, raw) in commands_of(train).items()
    }


_SECTION = sections_by("campaign.preflight.section", figure="2. Preflight")

PHASE = Phase(
    name="preflight",
    order=20,
    report=(
        _SECTION(
            "preflight",
            "Preflight and memory fit",
            20,
            {"preflight_report": From("preflight", "report")},
        ),
    ),
    findings=(
        Findings(
            {
                "preflight_report": From("preflight", "report"),
                "preflight_measurements": From("preflight", "measurements"),
            },
            "campaign.preflight.findings:preflight_findings",
        ),
    ),
    stages=(
        Stage(
            name="preflight",
            entry="campaign.preflight.stage:stage",
            help="the checks that must pass before any training job runs",
            # What a training job reads (the commands it checks declare command_files).
            inputs=TRAINING_INPUTS,
            outputs=files_in(
                "results/preflight",
                "report.json",
                "measurements.json",
                report_text="report.txt",
            ),
            final=True,
            spec=_preflight_spec,
            libraries=TRAINING_LIBRARIES,
            key_view=_preflight_key,
            volatile=("measurements", "report_text"),
            derive_inputs=TRAIN_INPUTS,
            # One thread a check, the job's cores: checks at once; it pins through the training
            # jobs' module (EXECUTION), whose code decides the result too.
            execution="campaign.preflight.execution",
            code=(EXECUTION,),
        ),
    ),
)
