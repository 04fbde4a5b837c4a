"""The quantize stage's derived input, apart from the stage body: computing a job's key (a store
hit, `campaign status`) then needs no torch import (about 2 s)."""

from __future__ import annotations

from pathlib import Path


def derive_inputs(spec: dict, root: Path) -> dict[str, list[Path]]:
    """The base_model input (Stage.derive_inputs): the pretrained folder a run was trained on, or
    nothing for a from_config run. A LoRA run's model folder holds only the adapter."""
    from campaign.core.tasks import template_files

    source = spec.get("base_source")
    return {
        "base_model": [] if source is None else [Path(root) / source],
        # a generation run's variants format their prompts with its chat template file
        "chat_template": template_files(spec.get("model") or {}, root),
    }
