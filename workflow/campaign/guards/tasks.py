"""The guard tasks a campaign names (evaluation.guards): each one's margin, its local files, and
the refusals `campaign validate` says in one line naming the key (a missing task YAML, a
dataset that is not a local file, a from_config or label model with no base to guard).

A guard is {task, include?, margin?}: an lm-evaluation-harness task name, optionally a local
task YAML (project-relative) whose `dataset_kwargs.data_files` name local files relative to the
YAML's folder. `include` is required: a registry task reads the Hugging Face datasets cache,
which no content key can hash; a YAML that includes another YAML is refused for the same reason.
"""

from __future__ import annotations

from pathlib import Path

from campaign.core.errors import CampaignError

# The dataset builders that read local files (the Hugging Face `datasets` packaged loaders).
LOCAL_BUILDERS = ("json", "csv", "parquet", "text")
NEEDS_HARNESS = (
    "guards need lm-evaluation-harness: pip install 'lm-eval==0.4.13' 'accelerate==1.16.0'"
)


def guarded_tasks() -> list[str]:
    """The model tasks whose trained model is a causal LM the harness can score (the task's
    model offers "lm_harness": core/tasks.py TaskModule), in the order of TASKS."""
    from campaign.core.tasks import TASKS, module_of

    return [t for t in TASKS if module_of(t).offers("lm_harness")]


def guards_of(params: dict) -> list[dict]:
    """evaluation.guards, each with its margin resolved: the guard's own, else
    evaluation.guards_margin, else evaluation.max_quality_loss."""
    evaluation = params["evaluation"]
    default = evaluation.get("guards_margin", evaluation["max_quality_loss"])
    return [
        {"task": g["task"], "include": g.get("include"), "margin": g.get("margin", default)}
        for g in evaluation.get("guards") or []
    ]


def guard_names(params: dict) -> list[str]:
    return [g["task"] for g in guards_of(params)]


def guard_of(params: dict, name: str) -> dict:
    for g in guards_of(params):
        if g["task"] == name:
            return g
    raise CampaignError(f"evaluation.guards: no guard task '{name}'")


def read_task_yaml(path: Path, key: str) -> dict:
    """A local task YAML as a dict; one line naming `key` when it is missing or unreadable."""
    import yaml

    if not path.is_file():
        raise CampaignError(f"{key}: {path}: no such task YAML")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CampaignError(f"{key}: {path}: not a readable YAML ({first})") from None
    if not isinstance(config, dict):
        raise CampaignError(f"{key}: {path}: not a task YAML (a mapping)")
    if "include" in config:  # another YAML the key would not hash, nor the job's copy find
        raise CampaignError(
            f"{key}: {path}: includes {config['include']!r}; write the guard task in one YAML"
        )
    return config


def data_files(config: dict, folder: Path, key: str) -> dict[str, list[Path]]:
    """{split: [local files]} of a task YAML whose dataset is local (dataset_path json, csv,
    parquet or text; dataset_kwargs.data_files relative to its folder); refused in one line
    naming `key` otherwise: a remote dataset needs the network at run time."""
    builder = config.get("dataset_path")
    if builder not in LOCAL_BUILDERS:
        raise CampaignError(
            f"{key}: dataset_path {builder!r} is not a local file loader ("
            f"{', '.join(LOCAL_BUILDERS)}): a guard runs without network; point "
            "dataset_kwargs.data_files at a local file"
        )
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    if isinstance(files, (str, list)):
        files = {"train": files}
    if not isinstance(files, dict) or not files:
        raise CampaignError(f"{key}: dataset_kwargs.data_files: required (local files by split)")
    out: dict[str, list[Path]] = {}
    for split, names in files.items():
        for name in [names] if isinstance(names, str) else list(names):
            if "://" in str(name):
                raise CampaignError(f"{key}: data_files {name}: a URL; a guard reads local files")
            path = folder / str(name)
            if not path.is_file():
                raise CampaignError(f"{key}: data_files {name}: no such file in {folder}")
            out.setdefault(str(split), []).append(path)
    return out


def check_guards(params: dict) -> None:
    """The rules the schema cannot state (Phase.check_params): a pretrained causal LM to guard,
    distinct task names."""
    guards = params["evaluation"].get("guards") or []
    if not guards:
        return
    model = params["model"]
    if model["task"] not in guarded_tasks():
        raise CampaignError(
            f"evaluation.guards: model.task {model['task']} trains no causal LM the harness can "
            f"score; guards need {' or '.join(guarded_tasks())}"
        )
    if model["source"] == "from_config":
        raise CampaignError(
            "evaluation.guards: model.source is from_config: the base is random weights, "
            "nothing a fine-tune could forget; name a pretrained model folder"
        )
    names = [g["task"] for g in guards]
    if len(set(names)) != len(names):
        raise CampaignError("evaluation.guards: a task is named twice")
    for i, g in enumerate(guards):
        if g.get("include") is None:  # the registry's data lives in a cache no key can hash
            raise CampaignError(
                f"evaluation.guards[{i}].include: required: a registry task ({g['task']}) reads "
                "the Hugging Face datasets cache, which the guard's content key cannot hash; "
                "name a local task YAML over local data files"
            )


def check_guard_files(params: dict, root: Path = Path(".")) -> None:
    """Each local task YAML readable, naming its task, over local data files (`campaign
    validate`; a file check, so not in check_params, whose passes are cached by content), and
    the harness installed."""
    import importlib.util

    if (params["evaluation"].get("guards") or []) and importlib.util.find_spec("lm_eval") is None:
        raise CampaignError(f"evaluation.guards: {NEEDS_HARNESS}")
    for i, g in enumerate(params["evaluation"].get("guards") or []):
        if g.get("include") is None:
            continue
        key = f"evaluation.guards[{i}].include"
        path = Path(root) / g["include"]
        config = read_task_yaml(path, key)
        if config.get("task") != g["task"]:
            raise CampaignError(
                f"{key}: {path} defines task {config.get('task')!r}, not {g['task']!r}"
            )
        data_files(config, path.parent, key)


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """A guard job's files (Stage.derive_inputs): the base model folder, the task YAML and its
    data files (none for a registry task)."""
    guard = spec["guard"]
    base = [Path(root) / spec["base_source"]]
    if guard["include"] is None:
        return {"base_model": base, "task_yaml": [], "task_data": []}
    path = Path(root) / guard["include"]
    key = "evaluation.guards.include"
    config = read_task_yaml(path, key)
    found = data_files(config, path.parent, key)
    return {
        "base_model": base,
        "task_yaml": [path],
        "task_data": [f for split in sorted(found) for f in found[split]],
    }
