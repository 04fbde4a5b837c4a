"""Per-item scores of generated text against the reference response, each a float in [0, 1]:
what the statistics (seeds x items) see for a generative task.

- exact_match: 1 when the two texts are equal after normalization (Unicode NFKC, lower case,
  punctuation to spaces, the articles a/an/the dropped, whitespace collapsed: SQuAD's answer
  normalization, so "The Paris." matches "paris").
- token_f1: the harmonic mean of precision and recall of the normalized tokens, counted as
  multisets (SQuAD's token F1): partial credit for a partly right answer.
- similarity: rapidfuzz's normalized Indel similarity of the normalized texts (character level:
  a typo costs a little, a different answer a lot).
- json_fields: for extraction, the F1 of the top-level fields of a JSON object: a field is correct
  (same value), wrong (other value), missing (in the reference only) or spurious (in the
  prediction only); a prediction that is not a JSON object scores 0 and is counted invalid.
  String values are compared normalized, other values exactly. A ```json fence is tolerated.
- A user metric: a dotted Python name (`package.module.function` or `package.module:function`)
  of a function (prediction, reference) -> float in [0, 1].

What computes the scores is part of the evaluation's content key, so a change rescores instead
of reusing stored scores: the package's own code (the stage's code version), the versions of the
libraries a built-in metric computes with (METRIC_LIBRARIES), and a user metric's module file by
its content (metric_source: an input of the evaluate stage).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import inspect
import json
import numbers
import re
import sys
import unicodedata
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rapidfuzz.distance import Indel

from campaign.core.errors import CampaignError

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_NOT_WORD = re.compile(r"[^\w\s]")
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def normalize(text: str) -> str:
    """The answer normalization every text metric here uses (see the module docstring)."""
    text = unicodedata.normalize("NFKC", text).lower()
    text = _NOT_WORD.sub(" ", text)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, reference: str) -> float:
    return float(normalize(prediction) == normalize(reference))


def token_f1(prediction: str, reference: str) -> float:
    pred, ref = normalize(prediction).split(), normalize(reference).split()
    if not pred or not ref:
        return float(pred == ref)  # both empty: agreed on nothing to say
    common = sum((Counter(pred) & Counter(ref)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(pred), common / len(ref)
    return 2 * precision * recall / (precision + recall)


def similarity(prediction: str, reference: str) -> float:
    return float(Indel.normalized_similarity(normalize(prediction), normalize(reference)))


@dataclass
class FieldCounts:
    """Field outcomes of JSON extraction, summed over items (or of one item)."""

    correct: Counter = field(default_factory=Counter)
    wrong: Counter = field(default_factory=Counter)
    missing: Counter = field(default_factory=Counter)
    spurious: Counter = field(default_factory=Counter)
    invalid: int = 0  # predictions that are not a JSON object
    items: int = 0

    def add(self, other: FieldCounts) -> None:
        for name in ("correct", "wrong", "missing", "spurious"):
            getattr(self, name).update(getattr(other, name))
        self.invalid += other.invalid
        self.items += other.items


def parse_object(text: str) -> dict | None:
    """The JSON object a text holds (a ```json fence stripped), or None when it holds none."""
    fenced = _FENCE.match(text)
    try:
        value = json.loads(fenced.group(1) if fenced else text)
    except (json.JSONDecodeError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def _same_value(a, b) -> bool:
    if isinstance(a, str) and isinstance(b, str):
        return normalize(a) == normalize(b)
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def field_counts(prediction: str, reference: str) -> FieldCounts:
    """One item's field outcomes. The reference must be a JSON object (a data error if not)."""
    ref = parse_object(reference)
    if ref is None:
        raise CampaignError(f"json_fields: the reference is not a JSON object: {reference[:80]!r}")
    out = FieldCounts(items=1)
    pred = parse_object(prediction)
    if pred is None:
        out.invalid = 1
        pred = {}
    for name, value in ref.items():
        if name not in pred:
            out.missing[name] += 1
        elif _same_value(pred[name], value):
            out.correct[name] += 1
        else:
            out.wrong[name] += 1
    for name in pred.keys() - ref.keys():
        out.spurious[name] += 1
    return out


def json_fields(prediction: str, reference: str) -> float:
    counts = field_counts(prediction, reference)
    if counts.invalid:
        return 0.0
    correct = sum(counts.correct.values())
    wrong = sum(counts.wrong.values())
    predicted = correct + wrong + sum(counts.spurious.values())
    expected = correct + wrong + sum(counts.missing.values())
    if predicted + expected == 0:
        return 1.0  # {} for {}: nothing to extract, nothing extracted
    return 2 * correct / (predicted + expected)


def json_field_table(predictions: Sequence[str], references: Sequence[str]) -> FieldCounts:
    """The field outcomes over all items: the per-field confusions of an extraction report."""
    total = FieldCounts()
    for i, (p, r) in enumerate(zip(predictions, references, strict=True)):
        try:
            total.add(field_counts(p, r))
        except CampaignError as e:
            raise CampaignError(f"item {i}: {e}") from None
    return total


METRICS: dict[str, Callable[[str, str], float]] = {
    "exact_match": exact_match,
    "token_f1": token_f1,
    "similarity": similarity,
    "json_fields": json_fields,
}


# The libraries whose code computes a built-in metric's scores (a new rapidfuzz may score the
# same texts differently): their versions are part of the evaluation's content key.
METRIC_LIBRARIES: dict[str, tuple[str, ...]] = {"similarity": ("rapidfuzz",)}


def metric_libraries(metric: str) -> dict[str, str]:
    """{library: installed version} of what computes `metric` (empty: the package's own code,
    or a user metric, whose module counts by content instead)."""
    out = {}
    for name in METRIC_LIBRARIES.get(metric, ()):
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def _module_and_attr(metric: str) -> tuple[str, str]:
    """A user metric's (module, function name); one line when it is not a dotted name."""
    module_name, sep, attr = metric.partition(":")
    if not sep:
        module_name, _, attr = metric.rpartition(".")
    if not module_name or not attr:
        raise CampaignError(
            f"{KEY}: {metric!r}: not one of {sorted(METRICS)} nor a dotted Python name "
            f"(package.module.function)"
        )
    return module_name, attr


KEY = "model.generation.metric"


def _standard_library(module_name: str) -> bool:
    return module_name.partition(".")[0] in sys.stdlib_module_names


def _inside(path: Path, root: Path) -> bool:
    return Path(path).resolve().is_relative_to(Path(root).resolve())


def metric_source(metric: str, root: Path) -> Path | None:
    """The file of a user metric's module (None for a built-in metric), found as the stage's
    import finds it (the project folder first, then the installed packages) without running
    it. The evaluate stage hashes this file by content, so an edited metric rescores; code the
    module imports from elsewhere is not followed. A module of the standard library (os,
    subprocess, shutil, builtins) is refused: a metric is a function a user wrote."""
    if metric in METRICS:
        return None
    module_name, _ = _module_and_attr(metric)
    parts = module_name.split(".")
    stem = Path(root).joinpath(*parts)
    for path in (stem.with_suffix(".py"), stem / "__init__.py"):
        if path.is_file():
            return path
    if _standard_library(module_name):
        raise CampaignError(
            f"{KEY}: {metric!r} is in the standard library's {module_name}; name a function "
            "(prediction, reference) -> float of a module in the project or an installed package"
        )
    for base in (Path(p) for p in sys.path if p):
        stem = base.joinpath(*parts)
        for path in (stem.with_suffix(".py"), stem / "__init__.py"):
            if path.is_file():
                return path
    try:
        spec = importlib.util.find_spec(module_name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.origin or not Path(spec.origin).is_file():
        raise CampaignError(
            f"{KEY}: {metric!r}: no module {module_name} in the project "
            "folder or the installed packages"
        )
    return Path(spec.origin)


def _signature_problem(fn) -> str | None:
    """Why `fn` is not a function (prediction, reference) -> float (None: it is one)."""
    if not inspect.isfunction(fn):
        return f"is a {type(fn).__name__}, not a Python function"
    params = list(inspect.signature(fn).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) != 2 or any(p.kind not in positional for p in params):
        shown = ", ".join(p.name for p in params)
        return f"takes ({shown}), not two positional parameters (prediction, reference)"
    return None


def resolve(metric: str, root: Path | None = None) -> Callable[[str, str], float]:
    """A built-in metric by name, or a user's function by its dotted Python name: a function
    of two positional parameters (prediction, reference) defined in a module of the project
    (`root`, the working folder when None) or of an installed package, never of the standard
    library. Anything else is refused in one line naming the key."""
    if metric in METRICS:
        return METRICS[metric]
    root = Path.cwd() if root is None else Path(root)
    source = metric_source(metric, root)
    module_name, attr = _module_and_attr(metric)
    # The project folder importable, as the stage's `python -m campaign` (run in it) has it:
    # a `campaign` console script started there does not.
    if Path(root).resolve() not in {Path(p or ".").resolve() for p in sys.path}:
        sys.path.insert(0, str(Path(root).resolve()))
    try:
        fn = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as e:
        raise CampaignError(f"{KEY}: {metric!r}: cannot import it ({e})") from None
    except Exception as e:  # noqa: BLE001 - the user's module failed while it was imported
        raise CampaignError(
            f"{KEY}: {metric!r}: importing {module_name} raised {type(e).__name__}: {e}"
        ) from None
    defined = getattr(fn, "__module__", None) or ""
    home = getattr(sys.modules.get(defined), "__file__", None)
    if defined and _standard_library(defined) and not (home and _inside(Path(home), root)):
        raise CampaignError(
            f"{KEY}: {metric!r} is the standard library's {defined}.{attr} (through "
            f"{source}); name a function (prediction, reference) -> float a user wrote"
        )
    problem = _signature_problem(fn)
    if problem is not None:
        raise CampaignError(
            f"{KEY}: {metric!r} {problem}; a metric is a function "
            "(prediction: str, reference: str) -> float"
        )
    return fn


def score_items(
    metric: str,
    predictions: list[str],
    references: list[str],
    ids: Sequence[str] | None = None,
) -> np.ndarray:
    """scores: (n_items,) floats in [0, 1], item i scoring predictions[i] against references[i]
    (`ids`: the items' ids, which a refusal names; their positions when None). A user metric
    that raises, or returns anything but a real number in [0, 1] (NaN, a string "0.5"), is
    refused in one line naming the metric, the item and what it did."""
    if len(predictions) != len(references):
        raise CampaignError(
            f"metric {metric}: {len(predictions)} predictions for {len(references)} references"
        )
    fn = resolve(metric)
    out = np.empty(len(predictions), dtype=np.float64)
    for i, (p, r) in enumerate(zip(predictions, references, strict=True)):
        item = f"item {ids[i]}" if ids is not None else f"item {i}"
        try:
            value = fn(p, r)
        except CampaignError as e:
            raise CampaignError(f"metric {metric}, {item}: {e}") from None
        except Exception as e:  # noqa: BLE001 - a user's metric failed: one line, no traceback
            message = " ".join(str(e).split())[:200]
            raise CampaignError(
                f"metric {metric}, {item}: raised {type(e).__name__}: {message}"
            ) from None
        # a string "0.5" is no score; NaN fails the range too
        if not isinstance(value, numbers.Real) or not 0.0 <= float(value) <= 1.0:
            raise CampaignError(
                f"metric {metric}, {item}: returned {value!r}, not a number in [0, 1]"
            )
        out[i] = float(value)
    return out
