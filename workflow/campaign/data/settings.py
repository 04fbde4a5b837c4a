"""The `split` section of params, checked: one-line errors naming the key. Light (standard
library only): params validation runs it when the Snakefile builds the DAG."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime
from typing import Any

from campaign.core.errors import CampaignError

TRAIN = "train"


METHODS = ("group_hash", "temporal")


CFG_KEYS = (
    "method",
    "fractions",
    "salt",
    "stratify_tolerance",
    "size_tolerance",
    "temporal_cutoff",
    "dedup",
    "audit",
    "previous",
    "assign",
    "solve",
)


# Keys added after splits were made, at the value that means "as before" (a params file without
# them splits as it did; the split key leaves them out at these values).
OPTIONAL_DEFAULTS = {
    "assign": "hash",
    "solve": {"time_limit_s": 120, "node_limit": 500, "max_units": 1000, "improve_steps": 1},
}


# hash: by the salted position; solve: the integer program of solve.py; auto: the hash when the
# current salt's split passes the balance checks, else solve.
ASSIGN_MODES = ("hash", "solve", "auto")


SOLVE_KEYS = ("time_limit_s", "node_limit", "max_units", "improve_steps")


NEAR_KEYS = ("threshold", "num_perm", "shingle_size")


DEDUP_KEYS = ("policy", "near")


# unite: duplicates join their records' units (chains too); drop: one representative of each
# duplicate cluster stays where it falls and its copies leave the evaluation splits.
DEDUP_POLICIES = ("unite", "drop")


POLICY_KEYS = ("max_group_overlap", "max_cross_split_duplicates", "allow_label_conflicts")


FRACTION_SUM_TOLERANCE = 1e-9


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_cutoff(value: Any) -> datetime:
    """``split.temporal_cutoff`` as an aware UTC datetime: an ISO 8601 string, or the datetime
    or date YAML makes of an unquoted one; a time without an offset is UTC."""
    if isinstance(value, datetime):
        cutoff = value
    elif isinstance(value, date):
        cutoff = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            cutoff = datetime.fromisoformat(value)
        except ValueError:
            raise CampaignError(
                f"split.temporal_cutoff: {value!r} is not an ISO 8601 time "
                "(e.g. '2024-06-01T00:00:00Z')"
            ) from None
    else:
        raise CampaignError(
            "split.temporal_cutoff: expected an ISO 8601 time such as '2024-06-01T00:00:00Z', "
            f"got {value!r}"
        )
    return cutoff.replace(tzinfo=UTC) if cutoff.tzinfo is None else cutoff.astimezone(UTC)


def check_near_params(threshold: float, num_perm: int, shingle_size: int) -> None:
    """CampaignError naming the params key when a near-duplicate setting is out of range."""
    key = "split.dedup.near"
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise CampaignError(f"{key}.threshold: expected a number in (0, 1], got {threshold!r}")
    if not 0.0 < threshold <= 1.0:
        raise CampaignError(f"{key}.threshold: expected a number in (0, 1], got {threshold!r}")
    for name, value in (("num_perm", num_perm), ("shingle_size", shingle_size)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CampaignError(f"{key}.{name}: expected a positive integer, got {value!r}")


def _unknown_key(mapping: dict, where: str, keys: tuple[str, ...]) -> None:
    """Refuse the first key of `mapping` (at params key `where`) that is not one of `keys`."""
    for key in mapping:
        if key not in keys:
            raise CampaignError(f"{where}.{key}: unknown key; expected {', '.join(keys)}")


def _known_mapping(value: Any, where: str, keys: tuple[str, ...]) -> None:
    """Refuse a `value` (at params key `where`) that is not a mapping of some of `keys`."""
    if not isinstance(value, dict):
        raise CampaignError(f"{where}: expected a mapping with {', '.join(keys)}")
    _unknown_key(value, where, keys)


def check_policy(policy: Any) -> None:
    """Raise CampaignError naming the ``split.audit.<key>`` unless policy is well formed."""
    _known_mapping(policy, "split.audit", POLICY_KEYS)
    for key in POLICY_KEYS:
        if key not in policy:
            raise CampaignError(f"split.audit.{key}: missing")
    for key in ("max_group_overlap", "max_cross_split_duplicates"):
        value = policy[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise CampaignError(f"split.audit.{key}: expected an integer >= 0, got {value!r}")
    if not isinstance(policy["allow_label_conflicts"], bool):
        raise CampaignError(
            "split.audit.allow_label_conflicts: expected true or false, "
            f"got {policy['allow_label_conflicts']!r}"
        )


def check_cfg(cfg: Any) -> None:
    """Raise CampaignError (one line naming the ``split.<key>``) unless cfg has the shape
    described in ``make_splits``."""
    _check_keys(cfg)
    _check_fractions(cfg["fractions"])
    _check_settings(cfg)
    check_assign(cfg)
    _check_dedup(cfg["dedup"])
    check_policy(cfg["audit"])


def _check_keys(cfg: Any) -> None:
    """split is a mapping of CFG_KEYS (the optional ones may be left out) with a known
    method."""
    _known_mapping(cfg, "split", CFG_KEYS)
    for key in CFG_KEYS:
        if key not in cfg and key not in OPTIONAL_DEFAULTS:
            hint = " (use null unless method is 'temporal')" if key == "temporal_cutoff" else ""
            raise CampaignError(f"split.{key}: missing{hint}")
    if cfg["method"] not in METHODS:
        raise CampaignError(f"split.method: {cfg['method']!r} is not one of {', '.join(METHODS)}")


def _check_fractions(fractions: Any) -> None:
    """split.fractions: train and at least one other split, each > 0, summing to 1."""
    if not isinstance(fractions, dict) or len(fractions) < 2 or TRAIN not in fractions:
        raise CampaignError(
            "split.fractions: expected a mapping of split name to fraction with 'train' and at "
            f"least one other split, got {fractions!r}"
        )
    for name, value in fractions.items():
        if not isinstance(name, str) or not name:
            raise CampaignError(f"split.fractions: split names must be strings, got {name!r}")
        if not _number(value) or value < 0:
            raise CampaignError(f"split.fractions.{name}: expected a fraction >= 0, got {value!r}")
        if value == 0:
            raise CampaignError(
                f"split.fractions.{name}: is 0, so split {name!r} would be empty; give it a "
                "positive fraction or remove it"
            )
    total = math.fsum(fractions.values())
    if abs(total - 1.0) > FRACTION_SUM_TOLERANCE:
        raise CampaignError(
            f"split.fractions: sum to {total:.12g}, expected 1 (within {FRACTION_SUM_TOLERANCE})"
        )


def _check_settings(cfg: dict) -> None:
    """split.salt, the two tolerances, split.previous, and a temporal cutoff exactly when the
    method is temporal."""
    if not isinstance(cfg["salt"], str) or not cfg["salt"]:
        raise CampaignError(f"split.salt: expected a non-empty string, got {cfg['salt']!r}")
    for key in ("stratify_tolerance", "size_tolerance"):
        tolerance = cfg[key]
        if not _number(tolerance) or not 0 < tolerance <= 1:
            raise CampaignError(
                f"split.{key}: expected an absolute share in (0, 1], got {tolerance!r}"
            )
    previous = cfg["previous"]
    if previous is not None and (not isinstance(previous, str) or not previous):
        raise CampaignError(
            "split.previous: expected null or the folder of an earlier run's split files "
            f"(train.parquet, ...), got {previous!r}"
        )
    if cfg["method"] == "temporal":
        if cfg["temporal_cutoff"] is None:
            raise CampaignError("split.temporal_cutoff: method 'temporal' needs a cutoff time")
        parse_cutoff(cfg["temporal_cutoff"])
    elif cfg["temporal_cutoff"] is not None:
        raise CampaignError(
            f"split.temporal_cutoff: only used by method 'temporal' (method is "
            f"{cfg['method']!r}); set it to null"
        )


def _check_dedup(dedup: Any) -> None:
    """split.dedup: a known policy and the near-duplicate search's settings."""
    if not isinstance(dedup, dict):
        raise CampaignError(f"split.dedup: expected a mapping with {', '.join(DEDUP_KEYS)}")
    for key in DEDUP_KEYS:
        if key not in dedup:
            raise CampaignError(f"split.dedup.{key}: missing")
    _unknown_key(dedup, "split.dedup", DEDUP_KEYS)
    if dedup["policy"] not in DEDUP_POLICIES:
        raise CampaignError(
            f"split.dedup.policy: {dedup['policy']!r} is not one of {', '.join(DEDUP_POLICIES)}"
        )
    if not isinstance(dedup["near"], dict):
        raise CampaignError("split.dedup.near: expected a mapping with threshold, num_perm, ...")
    _unknown_key(dedup["near"], "split.dedup.near", NEAR_KEYS)
    for key in NEAR_KEYS:
        if key not in dedup["near"]:
            raise CampaignError(f"split.dedup.near.{key}: missing")
    check_near_params(**dedup["near"])


def assign_mode(cfg: dict) -> str:
    """``split.assign`` (hash when a params file predates it)."""
    return cfg.get("assign", OPTIONAL_DEFAULTS["assign"])


def solve_cfg(cfg: dict) -> dict:
    """``split.solve`` (its defaults when a params file predates it)."""
    return cfg.get("solve", OPTIONAL_DEFAULTS["solve"])


def check_assign(cfg: dict) -> None:
    """``split.assign`` one of ASSIGN_MODES (solve and auto only with group_hash), and
    ``split.solve`` a mapping of SOLVE_KEYS with positive values."""
    mode = assign_mode(cfg)
    if mode not in ASSIGN_MODES:
        raise CampaignError(f"split.assign: {mode!r} is not one of {', '.join(ASSIGN_MODES)}")
    if mode != "hash" and cfg["method"] != "group_hash":
        raise CampaignError(
            f"split.assign: {mode!r} needs method group_hash (a temporal split's train is set "
            "by the cutoff); use hash"
        )
    solve = solve_cfg(cfg)
    _known_mapping(solve, "split.solve", SOLVE_KEYS)
    for key in SOLVE_KEYS:
        if key not in solve:
            raise CampaignError(f"split.solve.{key}: missing")
        value = solve[key]
        whole = key != "time_limit_s"
        if (
            isinstance(value, bool)
            or not (isinstance(value, int) if whole else _number(value))
            or (value < 0 if key == "improve_steps" else value <= 0)
        ):
            kind = "a number of seconds > 0" if not whole else "a whole number >= 1"
            kind = "a whole number >= 0" if key == "improve_steps" else kind
            raise CampaignError(f"split.solve.{key}: expected {kind}, got {value!r}")
