"""The train phase: one job per planned run. Models from a config or a local folder, tokenizers
trained on the train split only, batches with loss masks, the loop with exact resume from
checkpoints, and the device lease. The preflight phase runs the same machinery on a sample."""

from campaign.core.declare import files_in, sections_by
from campaign.core.lazy import exports
from campaign.core.stage import Derived, EachRun, Folder, From, Phase, Stage
from campaign.data import SPLIT_FILES
from campaign.plan import run_spec_of

# What a training job's result depends on besides its code, params and data.
LIBRARIES = (
    "torch",
    "transformers",
    "tokenizers",
    "safetensors",
    "peft",
    "torchao",  # train.base_quantization's int8 base (basequant.py)
    "numpy",
    "pandas",
    "pyarrow",
)
# Inputs of a training job (and of the preflight, which trains on a sample of the same splits).
# base_model: the pretrained folder model.source names (none for from_config).
# chat_template: the Jinja file model.chat_template names (none for model or none).
# command_files: what train.command declares (campaign.train.command; the preflight's command
# check runs the same commands), hashed. All found by TRAIN_INPUTS.
INPUTS = {
    **SPLIT_FILES,
    "base_model": Derived(),
    "chat_template": Derived(),
    "command_files": Derived(),
    # A user metric's module, for a run judged on its generations while training (eval_items).
    "metric_code": Derived(),
}
# A run's predictions on the evaluation splits, as the stages that read them name them
# (outputs_of("train", *PREDICTIONS, each=EachRun): every kept run's).
PREDICTIONS = ("predictions_validation", "predictions_test")

_PUBLIC = {
    "logits_of": "steps",
    "generate": "engine",
    "cache_bytes": "engine",
    "cache_estimate": "engine",
    "read_curves": "section",
    # the loop and its pieces
    "Data": "loop",
    "EVAL_SPLITS": "loop",
    "Trainer": "loop",
    "read_data": "loop",
    "Recipe": "recipe",
    "pack_rows": "batches",
    "accumulate": "steps",
    "accumulated_gradients": "steps",
    "loss_sum": "steps",
    "run_manifest": "stage",
    "run_training": "stage",
    "timings": "stage",
    "write_parquet": "stage",
    # scoring a finished run's model (the quantize phase scores its variants the same way)
    "SavedModel": "scoring",
    "prediction_frame": "scoring",
    # the label tasks' scores (campaign.tasks picks one per task)
    "classifier_scores": "scoring",
    "causal_scores": "scoring",
    # models and tokenizers
    "check_model_spec": "models",
    "label_names": "models",
    "load_tokenizer": "models",
    "make_tokenizer": "models",  # the run's tokenizer (campaign init sizes lengths with it)
    "save_model": "models",
    "safetensors_header": "models",
    # a run's model folder, plain or a LoRA adapter over its base (merged in memory)
    "load_run_model": "models",
    # train.optimizer: why a low-bit optimizer cannot run on a device (the preflight's levers)
    "optimizer_unavailable": "optim",
    # fine-tuning on a quantized base (train.base_quantization; the memory estimate reads it)
    "base_quantization_method": "basequant",
    "quantized_linear_bytes": "basequant",
    "tensor_bytes": "basequant",
    # the base a quantized-base run generates with (the generation task's prompted floors)
    "quantize_base": "basequant",
    "is_quantized": "basequant",
    "dequantize_all": "basequant",
    "judged_positions": "judged",
    # batches
    "IGNORE": "batches",
    "DataOrder": "batches",
    "Split": "batches",
    "read_split": "batches",
    "causal_example": "batches",
    # how the label tasks' records become examples (campaign.tasks picks one per task)
    "CausalFormat": "batches",
    "encode_causal": "batches",
    "encode_classification": "batches",
    "collate": "batches",
    "count_targets": "batches",
    # checkpoints
    "save_checkpoint": "checkpoint",
    "load_latest": "checkpoint",
    # devices
    "autocast": "devices",
    "check_precision": "devices",
    "device_info": "devices",
    "lease_from_env": "devices",
    "select_device": "devices",
    # an outside trainer's command (train.command; the preflight's command check runs it)
    "PROGRESS_LINES": "command",
    "CHECKPOINTS": "command",
    "WORK_FILES": "command",
    "Command": "command",
    "check_outputs": "command",
    "check_adapter": "command_adapter",
    "commands_of": "command",
    "last_per_step": "command",
    "prepare": "command",
    "read_progress_lines": "command",
    "run_command": "command",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


# How a training (or preflight, or prediction) job computes: settings in its key, pinned in it.
EXECUTION = "campaign.train.execution"
# The pretrained model folder model.source names, hashed as the base_model input.
MODEL_INPUTS = "campaign.train.models:derive_inputs"
# A training job's: that folder, and the files train.command declares.
TRAIN_INPUTS = "campaign.train.command:derive_inputs"


def _run_key(spec: dict) -> dict:
    from campaign.train.command import key_view

    return key_view(spec)


def scores_beside_optimizer(train: dict) -> bool:
    """Whether a run's final validation and test scores are computed beside its optimizer state:
    the built-in loop scores (a generation task: generates) in its training process after the
    last step, AdamW's state still allocated (Trainer.final_scores); a train.command run's model
    is scored by the campaign in a process of its own once the command has exited
    (command.score), with no optimizer. The memory check's generate phase reads it."""
    from campaign.plan import command_of

    return command_of(train) is None


def _check_params(params: dict) -> None:
    from campaign.core.errors import CampaignError
    from campaign.core.tasks import packing_refusal
    from campaign.train.models import check_model_spec

    check_model_spec(params["model"])  # tokenizer source vs model source, causal_lm needs gpt2
    train = params["train"]
    refusal = packing_refusal(params["model"]["task"])
    if train.get("packing") and refusal is not None:
        raise CampaignError(f"train.packing: {refusal}; set false")
    # train.select: best_generated needs generated scores (model.generation.eval_items), in the
    # baseline and in every level an ablation gives it.
    from campaign.core.tasks import module_of
    from campaign.train.judged import check_select

    factors = ((params.get("ablation") or {}).get("factors") or {}).get("train") or {}
    eval_items = module_of(params["model"]["task"]).eval_items(params["model"])
    for select in {train.get("select", "last"), *factors.get("select", ())}:
        check_select(select, eval_items)
    commands = [c for c in (train.get("command"), *factors.get("command", ())) if c is not None]
    if eval_items is not None and any(c != "builtin" for c in commands):
        raise CampaignError(
            "model.generation.eval_items: a train.command run's trainer does not generate "
            "while it trains (no curve, and the key would retrain every run); unset it"
        )
    if train["warmup_steps"] > train["max_steps"]:
        raise CampaignError(
            f"train.warmup_steps: {train['warmup_steps']} is more than train.max_steps "
            f"({train['max_steps']})"
        )


_SECTION = sections_by("campaign.train.section", figure="3. Training")

PHASE = Phase(
    name="train",
    order=40,
    report=(
        _SECTION("curves", "Training curves", 40, {"run_metrics": EachRun("train", "metrics")}),
    ),
    stages=(
        Stage(
            name="train",
            # the built-in loop, or train.command's (campaign.train.command dispatches)
            entry="campaign.train.command:stage",
            help="fine-tune one planned run (resumes from its last checkpoint)",
            inputs=INPUTS,
            # Training waits for a passed preflight and a plan that fits its limits. ancient():
            # a plan table redone for a bigger plan does not make the runs already trained stale.
            after={"plan": From("plan_table", "runs", ancient=True)},
            outputs={
                "model": Folder("results/runs/{run}/model"),
                **files_in(
                    "results/runs/{run}",
                    "metrics.parquet",
                    "predictions_validation.parquet",
                    "predictions_test.parquet",
                    "run_manifest.json",
                    "timings.json",
                ),
            },
            final=True,
            spec=run_spec_of,
            libraries=LIBRARIES,
            key_view=_run_key,
            volatile=("timings",),
            derive_inputs=TRAIN_INPUTS,
            execution=EXECUTION,
        ),
    ),
    check_params=_check_params,
)
