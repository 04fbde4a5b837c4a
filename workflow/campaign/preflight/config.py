"""The `preflight` section of params, checked: one-line errors naming the key."""

from __future__ import annotations

from campaign.core.errors import CampaignError
from campaign.preflight.checks import names as check_names

# The `preflight` section: key -> sub-keys (None: a plain value).
CONFIG_KEYS: dict[str, tuple[str, ...] | None] = {
    "blocking": None,
    "sample": ("train_examples", "validation_examples"),
    "inspect_examples": None,
    "target_cards": None,
    "memory_margin": None,
    "activation_tolerance": None,
    "overfit": ("examples", "steps", "max_final_loss"),
    "grad_accum_tolerance": None,
    "resume": ("steps_before", "steps_after"),
    "throughput": ("warmup_steps", "window_steps"),
    "max_hours": None,
    "disk_margin": None,
    "max_unknown_token_share": None,
}


def _whole(cfg: dict, key: str, where: str, minimum: int = 1) -> int:
    value = cfg[key]
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise CampaignError(f"{where}.{key}: expected a whole number >= {minimum}, got {value!r}")
    return value


def _number(cfg: dict, key: str, where: str, low: float, high: float | None = None) -> float:
    value = cfg[key]
    ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= low
    if ok and high is not None:
        ok = value < high
    if not ok:
        bound = f"in [{low}, {high})" if high is not None else f">= {low}"
        raise CampaignError(f"{where}.{key}: expected a number {bound}, got {value!r}")
    return float(value)


def check_config(cfg: dict) -> None:
    """The `preflight` section, checked: one-line errors naming the key."""
    if not isinstance(cfg, dict):
        raise CampaignError("preflight: expected a mapping")
    for key, sub in CONFIG_KEYS.items():
        if key not in cfg:
            raise CampaignError(f"preflight.{key}: missing (the preflight stage reads it)")
        if sub is not None:
            if not isinstance(cfg[key], dict):
                raise CampaignError(f"preflight.{key}: expected a mapping with {', '.join(sub)}")
            for s in sub:
                if s not in cfg[key]:
                    raise CampaignError(f"preflight.{key}.{s}: missing")
            extra = sorted(set(cfg[key]) - set(sub))
            if extra:
                raise CampaignError(f"preflight.{key}.{extra[0]}: not a key preflight knows")
    extra = sorted(set(cfg) - set(CONFIG_KEYS))
    if extra:
        raise CampaignError(f"preflight.{extra[0]}: not a key preflight knows")
    blocking = cfg["blocking"]
    known = check_names()
    if not isinstance(blocking, list) or any(b not in known for b in blocking):
        bad = [b for b in blocking if b not in known] if isinstance(blocking, list) else blocking
        raise CampaignError(
            f"preflight.blocking: {bad!r} is not a list of check names ({', '.join(known)})"
        )
    for key in ("train_examples", "validation_examples"):
        _whole(cfg["sample"], key, "preflight.sample")
    _whole(cfg, "inspect_examples", "preflight", 0)
    cards = cfg["target_cards"]
    if not isinstance(cards, list) or not cards:
        raise CampaignError(
            "preflight.target_cards: expected a non-empty list of {name, memory_gib}"
        )
    for n, card in enumerate(cards):
        if not isinstance(card, dict) or set(card) != {"name", "memory_gib"}:
            raise CampaignError(f"preflight.target_cards[{n}]: expected {{name, memory_gib}}")
        if not isinstance(card["name"], str) or not card["name"]:
            raise CampaignError(f"preflight.target_cards[{n}].name: expected a card name")
        gib = card["memory_gib"]
        if isinstance(gib, bool) or not isinstance(gib, int | float) or gib <= 0:
            raise CampaignError(
                f"preflight.target_cards[{n}].memory_gib: expected a number > 0, got {gib!r}"
            )
    _number(cfg, "memory_margin", "preflight", 0.0, 1.0)
    _number(cfg, "activation_tolerance", "preflight", 0.0)
    for key in ("examples", "steps"):
        _whole(cfg["overfit"], key, "preflight.overfit")
    _number(cfg["overfit"], "max_final_loss", "preflight.overfit", 0.0)
    _number(cfg, "grad_accum_tolerance", "preflight", 0.0)
    for key in ("steps_before", "steps_after"):
        _whole(cfg["resume"], key, "preflight.resume")
    _whole(cfg["throughput"], "warmup_steps", "preflight.throughput", 0)
    _whole(cfg["throughput"], "window_steps", "preflight.throughput")
    if cfg["max_hours"] is not None:
        _number(cfg, "max_hours", "preflight", 0.0)
    _number(cfg, "disk_margin", "preflight", 0.0)
    _number(cfg, "max_unknown_token_share", "preflight", 0.0, 1.0)
