"""The text scores (tasks/generation/text_scores.py) beside the official SQuAD v1.1 evaluation's
normalize_answer, exact match and F1, written out below from the public script
(`evaluate-v1.1.py` of the SQuAD explorer, https://rajpurkar.github.io/SQuAD-explorer/; the
same file as squad/evaluate-v1.1.py in github.com/allenai/bi-att-flow).

(a) ASCII pairs: answers with seeded random edits (case, ASCII punctuation anywhere in a word,
    articles, whitespace, dropped, repeated, swapped, replaced and hyphen-joined words) and
    random strings over a small alphabet of letters, articles, punctuation and whitespace.
    Goal: exact_match and token_f1 equal SQuAD's on every pair, but one documented case (both
    texts normalize to nothing: token_f1 1, SQuAD's f1 0).
(b) Pairs beyond ASCII, one per deliberate difference, with the reason (DIFFERENCES), and the
    words of other scripts that must stay apart or match (SCRIPTS).

    .venv/bin/python benchmarks/bench_text_scores.py            # the tables
    .venv/bin/python benchmarks/bench_text_scores.py --pairs 2000 --seed 1
"""

from __future__ import annotations

import argparse
import re
import string
from collections import Counter

import numpy as np

from campaign.tasks.generation.text_scores import exact_match, token_f1


# --- SQuAD v1.1's reference formula (evaluate-v1.1.py), unchanged in what it computes -------
def squad_normalize(s: str) -> str:
    s = s.lower()
    s = "".join(ch for ch in s if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def squad_f1(prediction: str, ground_truth: str) -> float:
    pred = squad_normalize(prediction).split()
    truth = squad_normalize(ground_truth).split()
    common = Counter(pred) & Counter(truth)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(pred)
    recall = 1.0 * num_same / len(truth)
    return (2 * precision * recall) / (precision + recall)


def squad_em(prediction: str, ground_truth: str) -> bool:
    return squad_normalize(prediction) == squad_normalize(ground_truth)


# ---------------------------------------------------------------------------------------------
ANSWERS = [
    "Denver Broncos", "Santa Clara, California", "the Eiffel Tower", "Super Bowl L",
    "February 7, 2016", "24-10", "an apple a day", "Paris", "Marie Curie", "1,000 km",
    "the U.S. Army", "O'Neill", "3.14", "New York City", "state-of-the-art", "a cat",
    "The Beatles", "$5.00", "Levi's Stadium", "gold-themed initiatives", "C++ and C#",
    "e-mail", "Dr. Who", "the 50th", "rock & roll", "x_y", "well known", "A", "",
]  # fmt: skip
ALPHABET = list("aen th") + [" a ", " an ", " the ", "-", "_", ".", ",", "!", "'", "\t", "\n", "$"]


def _edit(text: str, rng: np.random.Generator) -> str:
    """One random ASCII edit of `text`."""
    words = text.split()
    kind = int(rng.integers(10))
    if kind == 0:
        return text.upper() if rng.random() < 0.5 else text.swapcase()
    if kind == 1:  # punctuation anywhere, a word's middle included
        at = int(rng.integers(len(text) + 1))
        return text[:at] + str(rng.choice(list(string.punctuation))) + text[at:]
    if kind == 2:
        return f"{rng.choice(['a', 'an', 'the', 'The', 'AN'])} {text}"
    if kind == 3:
        return "  " + "\t".join(words) + " \n"
    if kind == 4 and words:
        return " ".join(np.delete(np.array(words, dtype=object), int(rng.integers(len(words)))))
    if kind == 5 and words:
        return " ".join([*words, str(rng.choice(words))])
    if kind == 6 and len(words) > 1:
        return " ".join(reversed(words))
    if kind == 7 and words:
        words[int(rng.integers(len(words)))] = str(rng.choice(ANSWERS)).split(" ")[0] or "x"
        return " ".join(words)
    if kind == 8 and len(words) > 1:
        return "-".join(words)
    return str(rng.choice(ANSWERS))  # another answer altogether


def ascii_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """n (prediction, reference) pairs of ASCII text: half edited answers, half random strings."""
    rng = np.random.default_rng(seed)
    pairs = []
    for i in range(n):
        if i % 2 == 0:
            ref = str(rng.choice(ANSWERS))
            pred = ref
            for _ in range(int(rng.integers(1, 4))):
                pred = _edit(pred, rng)
        else:
            pred, ref = ("".join(rng.choice(ALPHABET, int(rng.integers(0, 8)))) for _ in "pr")
        pairs.append((pred, ref))
    return pairs


def both_empty(prediction: str, reference: str) -> bool:
    return not squad_normalize(prediction) and not squad_normalize(reference)


def ascii_agreement(pairs: list[tuple[str, str]]) -> dict[str, int]:
    """How many pairs agree with SQuAD, on exact match and on F1 (float equality)."""
    out = {"pairs": len(pairs), "em": 0, "f1": 0, "f1_both_empty": 0, "f1_other": 0}
    for p, r in pairs:
        out["em"] += exact_match(p, r) == float(squad_em(p, r))
        if token_f1(p, r) == float(squad_f1(p, r)):
            out["f1"] += 1
        elif both_empty(p, r):
            out["f1_both_empty"] += 1
        else:
            out["f1_other"] += 1
    return out


# (prediction, reference, why the scores differ from SQuAD's): each a deliberate difference.
DIFFERENCES = [
    ("The.", "a", "both normalize to nothing: token_f1 1 (agreed on nothing), SQuAD's f1 0"),
    ("ｆｕｌｌ width", "full width", "NFKC folds full-width letters"),
    ("ﬁnal", "final", "NFKC folds the ligature fi"),
    ("x²", "x2", "NFKC folds a superscript digit"),
    ("“Paris”", "Paris", "Unicode punctuation (curly quotes) is deleted like ASCII's"),
    ("¿Dónde?", "dónde", "Unicode punctuation (inverted question mark)"),
    ("東京。", "東京", "Unicode punctuation (ideographic full stop)"),
    ("दिन।", "दिन", "Unicode punctuation (Devanagari danda)"),
    ("«oui»", "oui", "Unicode punctuation (guillemets)"),
    ("كَتَبَ", "كتب", "Arabic harakat are dropped: optional in ordinary writing"),
    ("الـكتاب", "الكتاب", "Arabic tatweel is dropped (a stretch of the line)"),
    ("שָׁלוֹם", "שלום", "Hebrew points are dropped: optional in ordinary writing"),
    ("❤️", "❤", "a variation selector is dropped (emoji or text glyph of one character)"),
    ("so\u00adft", "soft", "an invisible format character (soft hyphen) is dropped"),
    ("\ufeffParis", "Paris", "a byte-order mark is dropped"),
    ("ab\u200bcd", "ab cd", "a zero-width space separates words"),
    ("Hòa Bình", "Hoà Bình", "a Vietnamese tone on oa/oe/uy is put on the second vowel"),
    ("thủy", "thuỷ", "a Vietnamese tone on uy is put on the second vowel"),
]

# (prediction, reference, same word?): words of other scripts the scores must keep apart (False)
# or match (True). Deleting combining marks scored the Devanagari, Thai, Arabic, emoji and the
# hòa pair wrongly; mà / má and the Hangul pairs guard the choices to keep Latin accents and
# to compose jamo (NFKC).
SCRIPTS = [
    ("दिन", "दान", False, "Devanagari vowel signs: day / donation"),
    ("किला", "केला", False, "Devanagari vowel signs: fort / banana"),
    ("ดู", "ดี", False, "Thai vowels below and above: look / good"),
    ("ป่า", "ป้า", False, "Thai tone marks: forest / aunt"),
    ("كَتَبَ", "كتب", True, "Arabic with and without harakat: one written word"),
    ("ذَهَبَ الوَلَدُ", "ذهب الولد", True, "an Arabic sentence with harakat"),
    ("hòa", "hoà", True, "Vietnamese: one word, the tone on either vowel"),
    ("mà", "má", False, "Vietnamese tones: but / mother"),
    ("\u1112\u1161\u11ab\u1100\u116e\u11a8", "한국", True, "Hangul jamo compose (NFKC)"),
    ("달", "돌", False, "Hangul syllables: moon / stone"),
    ("👍", "👎", False, "emoji: thumbs up / down"),
    ("I love 🍕", "I love 🍣", False, "emoji in a sentence"),
]


def tables(n: int, seed: int) -> str:
    agree = ascii_agreement(ascii_pairs(n, seed))
    lines = [
        f"(a) ASCII pairs: {agree['pairs']}; exact match agrees on {agree['em']}; F1 agrees on "
        f"{agree['f1']}, differs on {agree['f1_both_empty']} where both normalize to nothing "
        f"(deliberate) and on {agree['f1_other']} other pairs (goal: 0)",
        "",
        "(b) deliberate differences: prediction | reference | EM ours/SQuAD | F1 ours/SQuAD | why",
    ]
    for p, r, why in DIFFERENCES:
        lines.append(
            f"  {p!r} | {r!r} | {exact_match(p, r):.0f}/{float(squad_em(p, r)):.0f} | "
            f"{token_f1(p, r):.2f}/{squad_f1(p, r):.2f} | {why}"
        )
    lines += ["", "(c) other scripts: prediction | reference | same word | EM | F1 | what"]
    for p, r, same, what in SCRIPTS:
        lines.append(
            f"  {p} | {r} | {same} | {exact_match(p, r):.0f} | {token_f1(p, r):.2f} | {what}"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(tables(args.pairs, args.seed))


if __name__ == "__main__":
    main()
