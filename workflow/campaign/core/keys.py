"""Content keys: what a stage's result depends on, hashed, and nothing else.

key = BLAKE3 of the canonical JSON of
    format        KEY_FORMAT (bumped when the key's meaning changes)
    algorithm     "blake3"
    stage         the stage's name
    code          the stage's code version: its import closure inside the package, each module's
                  syntax tree without docstrings (campaign.core.code)
    params        the stage's params subset, less what does not change its bytes (Stage.key_view:
                  operational settings such as checkpoint_every, path strings, licence text)
    inputs        the content hash of every input file or folder, in the order given, by name;
                  never their paths (for an input in Stage.input_views, the hash of its view)
    libraries     the installed versions of the libraries the stage's result depends on
    execution     for stages that compute with torch: device type, thread count, deterministic
                  algorithms, and on CUDA the torch CUDA and cuDNN versions (Stage.execution)

Timings, hosts and other facts that differ between identical computations are recorded in the
entry (and in a stage's volatile outputs) but are not part of the key.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

from campaign.core.code import code_version as module_code_version
from campaign.core.errors import CampaignError
from campaign.core.hashcache import HashCache
from campaign.core.hashing import ALGORITHM, hash_tree, hash_value
from campaign.core.io import resolve
from campaign.core.stage import EachLook, PreviousLook, Stage
from campaign.core.versions import installed_versions

KEY_FORMAT = 2


def code_version(stage: Stage) -> str:
    """The stage's import closure inside the package, docstrings and comments aside."""
    return module_code_version(*stage.code_modules)


def library_versions(stage: Stage) -> dict[str, str]:
    return installed_versions(stage.libraries)


def execution_module(stage: Stage):
    """The module that pins and describes how the stage computes (None for plain stages)."""
    return None if stage.execution is None else importlib.import_module(stage.execution)


def execution_settings(stage: Stage, threads: int) -> dict | None:
    """What the result of a computing stage depends on about the machine (part of the key)."""
    module = execution_module(stage)
    return None if module is None else module.settings(threads)


def same_path(a: str | os.PathLike, b: str | os.PathLike) -> bool:
    return os.path.normpath(str(a)) == os.path.normpath(str(b))


def resolve_inputs(
    stage: Stage, spec: Any, given: dict[str, list[Path]], root: Path
) -> dict[str, list[Path]]:
    """The inputs a stage reads, all of them, so that they are all hashed into its key.

    Inputs its params name (data files, an earlier manifest, a pretrained model folder) are
    derived from the spec; when also given (`--in`, what the rules pass), they must be the same
    paths, so a stage can never hash one file and read another. Every other declared input must
    be given. An input name the stage does not declare is an error.
    """
    unknown = sorted(set(given) - set(stage.inputs))
    if unknown:
        raise CampaignError(
            f"{stage.name}: unknown input(s) {', '.join(unknown)} (it reads: "
            f"{', '.join(stage.inputs) or 'none'})"
        )
    derived: dict[str, list[Path]] = {}
    if stage.derive_inputs is not None:
        derived = resolve(stage.derive_inputs)(spec, root)
    resolved: dict[str, list[Path]] = {}
    for name in stage.inputs:
        if name in derived:
            want = [Path(p) for p in derived[name]]
            if name in given:
                got = [Path(p) for p in given[name]]
                if len(got) != len(want) or not all(map(same_path, got, want)):
                    raise CampaignError(
                        f"{stage.name}: input '{name}': the params name "
                        f"{', '.join(map(str, want)) or 'nothing'} but --in gave "
                        f"{', '.join(map(str, got)) or 'nothing'}"
                    )
                want = got
            resolved[name] = want
        elif name in given:
            resolved[name] = [Path(p) for p in given[name]]
        elif isinstance(stage.inputs[name], (EachLook, PreviousLook)):
            resolved[name] = []  # a campaign without looks (ablation.adaptive off, look 1)
        else:
            raise CampaignError(f"{stage.name}: missing input '{name}' (--in {name}=PATH)")
    return resolved


def input_hash(path: str | os.PathLike, cache: HashCache | None, view: str | None = None) -> str:
    """The content hash of an input, or of its view ("module:function", see Stage.input_views);
    without a cache the content is hashed afresh."""
    if view is None:
        return hash_tree(path) if cache is None else cache.hash_tree(path)
    value = resolve(view)(Path(path))
    return hash_value({"view": view, "value": value})


def hash_inputs(
    inputs: dict[str, list[Path]], cache: HashCache, views: dict[str, str] | None = None
) -> dict[str, list[dict]]:
    """{name: [{path, hash}, ...]} with paths as given (relative to the project); an input with
    a view (`views`: name -> "module:function") has its view's hash and the view recorded."""
    views = views or {}
    out = {}
    for name, paths in sorted(inputs.items()):
        rows = []
        for p in paths:
            if not Path(p).exists():
                raise CampaignError(f"input '{name}': {p} does not exist")
            row = {"path": str(p), "hash": input_hash(p, cache, views.get(name))}
            if name in views:
                row["view"] = views[name]
            rows.append(row)
        out[name] = rows
    return out


def content_key(
    stage: Stage,
    spec: Any,
    input_hashes: dict[str, list[dict]],
    execution: dict | None = None,
) -> tuple[str, dict]:
    """The key and the material it hashes. Input paths are left out: content decides."""
    material = {
        "format": KEY_FORMAT,
        "algorithm": ALGORITHM,
        "stage": stage.name,
        "code": code_version(stage),
        "params": stage.key_params(spec),
        "inputs": {name: [r["hash"] for r in rows] for name, rows in input_hashes.items()},
        "libraries": library_versions(stage),
    }
    if execution is not None:
        material["execution"] = execution
    return hash_value(material), material
