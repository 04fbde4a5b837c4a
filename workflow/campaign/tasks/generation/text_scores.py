"""Per-item scores of generated text against the reference response, each a float in [0, 1]:
what the statistics (seeds x items) see for a generative task.

- exact_match: 1 when the two texts are equal after normalization (normalize: SQuAD v1.1's
  answer normalization, letter for letter on ASCII text, extended to every script without
  erasing a letter; so "The Paris." matches "paris" and दिन does not match दान).
- token_f1: the harmonic mean of precision and recall of the normalized tokens (split on
  whitespace), counted as multisets (SQuAD's token F1): partial credit for a partly right
  answer. Two texts that both normalize to nothing score 1 (SQuAD's f1 gives 0 there, though
  its exact match gives 1). A script written without spaces (Thai, Chinese, Japanese) makes a
  phrase one token: no partial credit there; similarity is the character-level score.
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
import string
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
_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


# Characters normalize deletes besides punctuation: marks that ordinary writing leaves out, so
# their presence is the writer's style, not another word (Arabic harakat, superscript alef and
# tatweel; Hebrew points and cantillation), presentation selectors (variation selectors: the
# emoji and the text glyph of one character) and invisible format characters (Unicode Cf: soft
# hyphen, byte-order mark, direction marks) but the joiners and emoji tags, which pick between
# distinct emoji (a family, a flag) or a word's written shape.
_DROPPED = (
    (0x0591, 0x05C7),  # Hebrew points and cantillation (its punctuation is punctuation)
    (0x0640, 0x0640),  # Arabic tatweel (a stretch of the line)
    (0x064B, 0x065F),  # Arabic harakat: fatha, damma, kasra, tanwin, shadda, sukun, ...
    (0x0670, 0x0670),  # Arabic superscript alef
    (0xFE00, 0xFE0F),  # variation selectors
    (0xE0100, 0xE01EF),  # variation selectors supplement
)
_KEPT_FORMAT = frozenset({0x200C, 0x200D, *range(0xE0020, 0xE0080)})  # joiners, emoji tags
_ASCII_PUNCTUATION = frozenset(string.punctuation)  # SQuAD's set: ASCII symbols included
_SPACE = frozenset({0x200B})  # the zero-width space separates words (Thai, Khmer, Lao texts)
# Vietnamese writes a tone over either vowel of oa, oe, uy ending a syllable (hòa and hoà, thủy
# and thuỷ: one word): normalized to the second vowel, on the decomposed text.
_TONES = "\u0300\u0301\u0303\u0309\u0323"  # grave, acute, tilde, hook above, dot below
# {"òa": "oà", ...}: each old-style syllable end (composed text) and its new-style spelling.
_VI_MOVES = {
    unicodedata.normalize("NFC", first + tone + second): first
    + unicodedata.normalize("NFC", second + tone)
    for first, seconds in (("o", "ae"), ("u", "y"))
    for second in seconds
    for tone in _TONES
}
# One of them ending a syllable: no letter and no combining mark after it.
_VI_TONE = re.compile(f"(?:{'|'.join(_VI_MOVES)})(?![^\\W\\d_]|[\u0300-\u036f])")


def _char(ch: str) -> str:
    """What normalize makes of one (NFKC, lower-cased) character: itself, "" or a space."""
    code = ord(ch)
    if code in _SPACE:
        return " "
    if ch in _ASCII_PUNCTUATION or unicodedata.category(ch).startswith("P"):
        return ""
    if any(low <= code <= high for low, high in _DROPPED):
        return ""
    if unicodedata.category(ch) == "Cf" and code not in _KEPT_FORMAT:
        return ""
    return ch


class _Table(dict):
    """_char as a str.translate table, filled as characters are met (a dict hit is C speed)."""

    def __missing__(self, code: int) -> str | None:
        value = _char(chr(code)) or None  # None: translate deletes the character
        self[code] = value
        return value


_TRANSLATE = _Table()


def _vietnamese_tones(text: str) -> str:
    """hòa -> hoà, thủy -> thuỷ: a tone on oa, oe or uy ending a syllable moved to the second
    vowel (lower-cased, composed text)."""
    if text.isascii():
        return text
    return _VI_TONE.sub(lambda m: _VI_MOVES[m.group(0)], text)


def _drop_articles(text: str) -> str:
    """SQuAD's article removal (English a, an, the as whole words), where a combining mark
    counts as part of a word (so "a" with a mark under it is a letter, not an article)."""

    def article(m: re.Match) -> str:
        before = text[m.start() - 1] if m.start() else ""
        after = text[m.end()] if m.end() < len(text) else ""
        marked = any(c and unicodedata.category(c).startswith("M") for c in (before, after))
        return m.group(0) if marked else " "

    if text.isascii():  # no combining mark: SQuAD's own substitution
        return _ARTICLES.sub(" ", text)
    return _ARTICLES.sub(article, text) if _ARTICLES.search(text) else text


def normalize(text: str) -> str:
    """The answer normalization every text metric here uses; on ASCII text exactly SQuAD v1.1's
    normalize_answer (lower case, string.punctuation deleted, a/an/the dropped, whitespace
    collapsed). Beyond ASCII, in order: Unicode NFKC (compatibility forms folded, Hangul jamo and
    accented letters composed); lower case; Vietnamese tones on oa/oe/uy put on the second
    vowel; every punctuation character (Unicode category P) deleted like ASCII's; the marks and
    characters _DROPPED and _char say deleted; a zero-width space made a space. Every other
    character stays: letters with their accents, every combining mark that spells a vowel, a
    tone or a consonant (Devanagari, Thai, ...), digits, symbols and emoji. The articles are
    English's, dropped from a text in any language (Vietnamese an, "peace", too), as SQuAD
    does: a campaign in such a language picks a metric of its own (a dotted name)."""
    text = _vietnamese_tones(unicodedata.normalize("NFKC", text).lower())
    text = text.translate(_TRANSLATE)
    text = _drop_articles(text)
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
