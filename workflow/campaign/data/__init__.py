"""The data phase: read and validate the sources (manifest); scan them for private data, find
exact and near duplicates, join leak units and split them without leaks (split, audit)."""

from campaign.core.lazy import exports
from campaign.core.stage import Phase, Stage

# What other phases and tools may use; everything else in this folder is the phase's own.
_PUBLIC = {
    "expand_sources": "sources",
    "load_records": "readers",
    "find_salt": "salt",
    "scan_text": "privacy",
    "scan_artifacts": "artifacts",
    "vocab_tokens": "artifacts",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


def _manifest_spec(params: dict) -> dict:
    return params["data"]


def _split_spec(params: dict) -> dict:
    data = params["data"]
    return {
        "sources": data["sources"],
        "fields": data["fields"],
        "privacy": data["privacy"],
        "privacy_by_kind": data["privacy_by_kind"],
        "split": params["split"],
        "seed": params["campaign"]["seed"],
    }


def _manifest_key(spec: dict) -> dict:
    """What changes the manifest's bytes: not the privacy policies (the split applies them)."""
    return {k: v for k, v in spec.items() if k not in ("privacy", "privacy_by_kind")}


def _split_key(spec: dict) -> dict:
    """What changes the split's bytes: each source's format (its files count by content, in the
    inputs), not its path, licence or origin; whether an earlier split is compared, not where
    it lies (its files count by content too)."""
    from campaign.data.settings import OPTIONAL_DEFAULTS, assign_mode

    sources = [{"format": s["format"]} for s in spec["sources"]]
    split = {**spec["split"], "previous": spec["split"]["previous"] is not None}
    if assign_mode(split) == "hash":
        # The hash ignores split.solve: the key is the one a params file without either has.
        split.pop("assign", None)
        split.pop("solve", None)
    else:
        from importlib.metadata import version

        # The time limit only decides whether the stage fails, never its bytes; scipy's
        # version is its HiGHS's (not in Stage.libraries: that would change the hash's key).
        solve = split.get("solve", OPTIONAL_DEFAULTS["solve"])
        split["solve"] = {k: v for k, v in solve.items() if k != "time_limit_s"}
        split["solve"]["scipy"] = version("scipy")
    return {**spec, "sources": sources, "split": split}


def _scan_spec(params: dict) -> dict:
    data = params["data"]
    return {"privacy": data["privacy"], "privacy_by_kind": data["privacy_by_kind"]}


def _check_params(params: dict) -> None:
    from campaign.data.settings import check_cfg

    check_cfg(params["split"])  # fractions sum to 1, a cutoff only with method temporal, ...


PHASE = Phase(
    name="data",
    order=10,
    stages=(
        Stage(
            name="manifest",
            entry="campaign.data.manifest:stage",
            help="read the data sources, validate them, write the manifest",
            inputs=("sources", "previous"),
            outputs=("manifest", "summary", "diff"),
            spec=_manifest_spec,
            libraries=("pandas", "pyarrow", "blake3"),
            key_view=_manifest_key,
            derive_inputs="campaign.data.sources:derive_inputs",
        ),
        Stage(
            name="split",
            entry="campaign.data.split:stage",
            help="privacy scan, leak-free train/validation/test split, leakage audit",
            inputs=("sources", "previous"),
            outputs=("train", "validation", "test", "audit", "audit_table", "privacy"),
            spec=_split_spec,
            libraries=("pandas", "pyarrow", "numpy", "blake3", "phonenumbers", "detect-secrets"),
            key_view=_split_key,
            derive_inputs="campaign.data.split:derive_inputs",
        ),
        Stage(
            name="artifact_scan",
            entry="campaign.data.artifacts:stage_scan_artifacts",
            help="privacy scan of the artifacts the campaign wrote (tokenizer vocabularies, "
            "predictions, reports)",
            inputs=(
                "models",
                "predictions_validation",
                "predictions_test",
                "summary",
                "audit_table",
                "preflight_report",
            ),
            outputs=("findings",),
            spec=_scan_spec,
            libraries=("pyarrow", "phonenumbers", "detect-secrets"),
        ),
    ),
    check_params=_check_params,
)
