"""The data phase: read and validate the sources (manifest); scan them for private data, find
exact and near duplicates, join leak units and split them without leaks (split, audit)."""

from campaign.core.declare import files_in, outputs_of, sections_by
from campaign.core.lazy import exports
from campaign.core.stage import (
    Derived,
    EachRun,
    File,
    Findings,
    From,
    Phase,
    Stage,
)

# What other phases and tools may use; everything else in this folder is the phase's own.
_PUBLIC = {
    "ROLES": "conversations",
    "MESSAGE_KEYS": "conversations",
    "UNSTRATIFIED": "conversations",
    "parse_messages": "conversations",
    "from_prompt_response": "conversations",
    "prompt_messages": "conversations",
    "reference": "conversations",
    "dedup_text": "conversations",
    "dump_messages": "conversations",
    "split_conversations": "control_tokens",
    "check_special_tokens": "control_tokens",
    "scan_special_tokens": "control_tokens",
    "special_token_refusal": "control_tokens",
    "special_token_findings": "control_tokens",
    "escape_conversation": "control_tokens",
    "expand_sources": "sources",
    "load_records": "readers",
    "find_salt": "salt",
    "scan_text": "privacy",
    "scan_artifacts": "artifacts",
    "vocab_tokens": "artifacts",
}
__getattr__, __dir__ = exports(__name__, _PUBLIC)


# The split's files, as every stage that reads them names them.
SPLIT_FILES = {name: From("split", name) for name in ("train", "validation", "test")}


def _manifest_spec(params: dict) -> dict:
    # data.special_tokens is read where the tokenizer is known (the generation task's formatting).
    return {k: v for k, v in params["data"].items() if k != "special_tokens"}


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


_SECTION = sections_by("campaign.data.section", figure="1. Data")

PHASE = Phase(
    name="data",
    order=10,
    report=(
        _SECTION(
            "data",
            "Data",
            10,
            {
                "manifest": From("manifest", "manifest"),
                "privacy": From("split", "privacy"),
                "artifact_findings": From("artifact_scan", "findings"),
                # the records that spell a special token of the run's tokenizer, as the
                # preflight's tokenization check found them (the first stage that has one)
                "preflight_report": From("preflight", "report"),
                # a task without labels (its report_data) shows each split's prompt and
                # response lengths with the tokenizer a run saved and the runs' specs
                "split_train": From("split", "train"),
                "split_validation": From("split", "validation"),
                "split_test": From("split", "test"),
                "run_models": EachRun("train", "model"),
                "run_specs": EachRun("run_spec", "spec"),
            },
        ),
        _SECTION("leakage", "Leakage audit", 11, {"leakage_audit": From("split", "audit")}),
    ),
    findings=(
        Findings({"privacy": From("split", "privacy")}, "campaign.data.findings:privacy_findings"),
        Findings(
            {"artifact_findings": From("artifact_scan", "findings")},
            "campaign.data.findings:artifact_findings",
        ),
        Findings(
            {"leakage_audit": From("split", "audit")}, "campaign.data.findings:audit_findings"
        ),
    ),
    stages=(
        Stage(
            name="manifest",
            entry="campaign.data.manifest:stage",
            help="read the data sources, validate them, write the manifest",
            inputs={"sources": Derived(), "previous": Derived()},
            outputs=files_in(
                "results/data",
                "manifest.parquet",
                "summary.json",
                diff="manifest_diff.json",
            ),
            final=True,
            spec=_manifest_spec,
            libraries=("pandas", "pyarrow", "blake3"),
            key_view=_manifest_key,
            derive_inputs="campaign.data.sources:derive_inputs",
        ),
        Stage(
            name="split",
            entry="campaign.data.split:stage",
            help="privacy scan, leak-free train/validation/test split, leakage audit",
            # previous: an earlier run's split files (split.previous), for the moved-record report.
            inputs={"sources": Derived(), "previous": Derived()},
            # The manifest is not hashed into the split's key (the sources are): it orders the
            # split after it, so a bad record is reported once, by the manifest stage.
            after={"manifest": From("manifest", "manifest")},
            outputs={
                **files_in(
                    "results/data/splits",
                    "train.parquet",
                    "validation.parquet",
                    "test.parquet",
                ),
                **files_in(
                    "results/data",
                    audit="leakage_audit.json",
                    audit_table="leakage_audit.txt",
                    privacy="privacy_report.json",
                ),
            },
            final=True,
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
            # A tokenizer trained on text holding a key can hold it as a token; predictions and
            # reports can quote records. Logs are not DAG outputs: `campaign scan-artifacts`
            # scans them.
            inputs={
                "models": EachRun("train", "model"),
                **outputs_of("train", "predictions_validation", "predictions_test", each=EachRun),
                "summary": From("evaluate", "summary"),
                # every variant's and floor's answer (a retrieval floor quotes training records)
                "scored_items": From("evaluate", "scored_items"),
                "audit_table": From("split", "audit_table"),
                "preflight_report": From("preflight", "report_text"),
            },
            outputs={"findings": File("results/data/artifact_findings.json")},
            final=True,
            spec=_scan_spec,
            libraries=("pyarrow", "phonenumbers", "detect-secrets"),
        ),
    ),
    check_params=_check_params,
)
