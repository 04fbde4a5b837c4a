"""A variant as the phase uses it: its declaration (campaign.quantize.variants), what its content
key holds (method and the installed version of its library), and where it runs or why not.

Nothing here imports torch or a quantization library: keys are built when the Snakefile builds
the DAG.
"""

from __future__ import annotations

import importlib.metadata
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from campaign.core.errors import CampaignError
from campaign.quantize import variants

# The model file each format writes into a variant's model folder (what a user would ship).
WEIGHT_FILES = {
    "safetensors": "model.safetensors",
    "state_dict": "state_dict.pt",
    "onnx": "model.onnx",  # an ONNX Runtime variant (campaign.quantize.onnxrt)
}
FORMATS = tuple(WEIGHT_FILES)
INFERENCE = ("no_grad", "inference_mode")


@dataclass(frozen=True)
class Variant:
    name: str
    method: str
    library: str
    devices: tuple[str, ...]
    format: str
    calibration: bool
    needs: tuple[str, ...]
    cache: dict | None
    inference: str
    module: ModuleType
    also_libraries: tuple[str, ...] = ()
    tasks_note: str | None = None

    def apply(self, model, ctx):
        return self.module.apply(model, ctx)

    @property
    def tasks(self) -> tuple[str, ...]:
        """The tasks it applies to: those whose model offers everything it NEEDS (core/tasks.py
        TaskModule.offers), in the order of TASKS."""
        from campaign.core.tasks import TASKS, module_of

        return tuple(t for t in TASKS if all(module_of(t).offers(n) for n in self.needs))

    def cache_factory(self):
        """`config -> cache` for the generation engine (campaign.train.engine), or None for
        its default full-precision cache: the module's own make_cache(config) where it defines
        one, else transformers' QuantizedCache configured by CACHE."""
        make = getattr(self.module, "make_cache", None)
        if make is not None or self.cache is None:
            return make
        settings = dict(self.cache)

        def quantized(config):
            from transformers import QuantizedCache

            return QuantizedCache(config=config, **settings)

        return quantized

    @property
    def canary(self) -> bool:
        """A variant built to be rejected (CANARY: kv_corrupt's broken cache): the evaluation
        says whether its scores caught it, and never adopts, keeps or prices it."""
        return bool(getattr(self.module, "CANARY", False))

    @property
    def kind(self) -> str:
        """ "kv_cache" (the generation cache is quantized, or replaced, the weights are not) or
        "weights"."""
        if self.cache is not None or hasattr(self.module, "make_cache"):
            return "kv_cache"
        return "weights"


def get_variant(name: str) -> Variant:
    """The declared variant `name`, its declaration checked."""
    module = variants.get(name)

    def need(attr: str) -> Any:
        if not hasattr(module, attr):
            raise CampaignError(f"variant {name}: its module does not define {attr}")
        return getattr(module, attr)

    out = Variant(
        name=name,
        method=need("METHOD"),
        library=need("LIBRARY"),
        devices=tuple(need("DEVICES")),
        format=need("FORMAT"),
        calibration=bool(getattr(module, "CALIBRATION", False)),
        needs=tuple(getattr(module, "NEEDS", ())),
        cache=getattr(module, "CACHE", None),
        inference=getattr(module, "INFERENCE", "no_grad"),
        module=module,
        also_libraries=tuple(getattr(module, "ALSO_LIBRARIES", ())),
        tasks_note=getattr(module, "NEEDS_NOTE", None),
    )
    need("apply")
    _check_needs(name, module, out.needs)
    if out.format not in FORMATS:
        raise CampaignError(f"variant {name}: FORMAT {out.format!r} is not one of {FORMATS}")
    if out.inference not in INFERENCE:
        raise CampaignError(f"variant {name}: INFERENCE {out.inference!r} not in {INFERENCE}")
    if not set(out.devices) <= {"cpu", "cuda"} or not out.devices:
        raise CampaignError(f"variant {name}: DEVICES must be a non-empty subset of cpu, cuda")
    return out


def _check_needs(name: str, module: ModuleType, needs: tuple[str, ...]) -> None:
    """A variant names what the run's model must have (NEEDS), in the words the tasks' models
    offer (core/tasks.py TaskModule.model_offers); a list of task names (TASKS) is refused, as
    is a word no task offers (the variant would be skipped for every run)."""
    if hasattr(module, "TASKS"):
        raise CampaignError(
            f"variant {name}: its module defines TASKS (task names); declare NEEDS instead, "
            "what the run's model must have (core/tasks.py TaskModule.model_offers)"
        )
    if not needs:
        return
    from campaign.core.tasks import TASKS, module_of

    offered = sorted({word for t in TASKS for word in module_of(t).model_offers})
    unknown = [n for n in needs if n not in offered]
    if unknown:
        raise CampaignError(
            f"variant {name}: NEEDS {unknown[0]!r} is offered by no task's model "
            f"(offered: {', '.join(offered)})"
        )


def library_version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def key_info(name: str) -> dict:
    """What a job's content key holds about its variant: name, method, library and version.

    Upgrading torchao changes the keys of the torchao variants only; a training change changes
    the model input of that run's jobs only.
    """
    v = get_variant(name)
    info = {
        "name": v.name,
        "method": v.method,
        "library": v.library,
        "library_version": library_version(v.library),
        "format": v.format,
        "cache": v.cache,
    }
    if v.also_libraries:  # only where declared: the other variants' keys stay as they were
        info["libraries"] = {lib: library_version(lib) for lib in v.also_libraries}
    return info


def placement(v: Variant, job_device: str, task: str) -> tuple[str | None, str | None]:
    """(device to run on, None) or (None, the reason it is skipped).

    A job on CUDA runs a CPU-only variant on the CPU (its row says so); a CUDA-only variant in
    a job without CUDA is skipped with the reason.
    """
    if task not in v.tasks:
        note = f" ({v.tasks_note})" if v.tasks_note else ""
        return None, f"applies to {' and '.join(v.tasks)} runs; this run is {task}{note}"
    # The device first: on a CPU job a CUDA-only variant is skipped for that, whether or not its
    # library happens to be installed (the reason is the same on every CPU machine).
    if job_device in v.devices:
        device = job_device
    elif "cpu" in v.devices:
        device = "cpu"
    else:
        return None, f"needs CUDA (this job runs on {job_device})"
    for library in (v.library, *v.also_libraries):
        if library_version(library) == "absent":
            return None, f"{library} is not installed"
    return device, None
