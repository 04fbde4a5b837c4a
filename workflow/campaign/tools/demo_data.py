"""Deterministic generator of the synthetic, labelled demo corpus (data/raw/demo.jsonl).

The corpus is small enough to commit but has the structure that later phases must cope with:

- topic labels learned from overlapping vocabularies, with a little label noise and some
  records that mix two topics;
- authors as groups: each writes several records, often under more than one label, with
  favourite phrases and a sign-off, so a split that leaks authors inflates scores;
- planted exact duplicates (identical, or differing only in case, whitespace or punctuation),
  near duplicates (a few words changed), some with a conflicting label or another author;
- timestamps over two years, clustered per author;
- a few fake e-mail addresses and API-key-like strings drawn from the generator's RNG.

``generate_corpus_with_truth`` also returns what was planted, keyed by record id, so tests of
later phases can check what they find against what is there. Only the standard library and
numpy are imported: the command-line entry imports this module and must start fast.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import numpy as np

from campaign.core.fsutil import atomic_write_bytes

DEFAULT_SEED = 7
DEFAULT_N_RECORDS = 3000
MIN_N_RECORDS = 40
MAX_N_RECORDS = 300_000  # ten records per author; the handle space has 36,000 names

FIELDS = ("id", "text", "label", "author", "created_at")

# Rates, as fractions of n_records unless said otherwise.
_RECORDS_PER_AUTHOR = 10
_EXACT_DUP_RATE = 0.03
_NEAR_DUP_RATE = 0.02
_SECRET_RATE = 0.005
_LABEL_NOISE_RATE = 0.03  # of base records: label replaced by another topic
_MIXED_TOPIC_RATE = 0.15  # of base records: a second topic supplies a share of the words
_CROSS_TOPIC_WORD_RATE = 0.12  # of content words: drawn from any topic's vocabulary
_CONFLICT_RATE = 0.25  # of planted copies: label differs from the original's
_CROSS_AUTHOR_RATE = 0.3  # of planted copies: posted by another author
_PHRASE_RATE = 0.6  # of an author's records: opens a sentence with a favourite phrase
_SIGNOFF_RATE = 0.5  # of an author's records: ends with the author's sign-off

_START = datetime(2023, 1, 1, tzinfo=UTC)
_SPAN_S = 730 * 86_400  # two years, in seconds
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
_UPPER_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

T = TypeVar("T")
Verb = tuple[str, str]  # (base form, past form)


@dataclass(frozen=True)
class _Vocab:
    nouns: tuple[str, ...]
    verbs: tuple[Verb, ...]
    adjectives: tuple[str, ...]


def _verbs(spec: str) -> tuple[Verb, ...]:
    """'bake:baked fry:fried' -> (('bake', 'baked'), ('fry', 'fried'))."""
    return tuple(tuple(pair.split(":")) for pair in spec.split())  # type: ignore[misc]


# Ambiguous words (pitch, scale, stock, record, field, season, ...) sit in several topics on
# purpose: the labels overlap, as real topics do.
TOPICS: dict[str, _Vocab] = {
    "astronomy": _Vocab(
        nouns=tuple(
            "telescope planet galaxy nebula comet asteroid eclipse orbit moon meteor "
            "constellation star lens observatory horizon crater satellite spectrum supernova "
            "quasar mirror eyepiece field band dish chart cluster light sky tripod".split()
        ),
        verbs=_verbs(
            "observe:observed track:tracked photograph:photographed measure:measured "
            "align:aligned calibrate:calibrated spot:spotted map:mapped focus:focused "
            "log:logged point:pointed scan:scanned"
        ),
        adjectives=tuple(
            "bright faint distant cosmic lunar solar clear dark orbital stellar".split()
        ),
    ),
    "cooking": _Vocab(
        nouns=tuple(
            "oven recipe sauce skillet garlic onion dough flour butter broth stock knife "
            "plate dish spoon pan soup bread pepper salt kitchen mixer batter range oil crust "
            "stew grill season beat".split()
        ),
        verbs=_verbs(
            "bake:baked simmer:simmered roast:roasted chop:chopped whisk:whisked "
            "season:seasoned taste:tasted stir:stirred grill:grilled boil:boiled fry:fried "
            "slice:sliced"
        ),
        adjectives=tuple(
            "crispy tender savory spicy golden fresh creamy salty sweet smoky".split()
        ),
    ),
    "finance": _Vocab(
        nouns=tuple(
            "portfolio dividend bond stock equity budget loan mortgage interest ledger "
            "invoice asset bank note yield return trade market fund index chart scale broker "
            "account tax hedge share balance credit spread".split()
        ),
        verbs=_verbs(
            "invest:invested trade:traded hedge:hedged audit:audited borrow:borrowed "
            "diversify:diversified price:priced rebalance:rebalanced repay:repaid tax:taxed "
            "forecast:forecasted budget:budgeted"
        ),
        adjectives=tuple(
            "volatile profitable fiscal liquid bearish bullish taxable annual quarterly sharp"
            "".split()
        ),
    ),
    "gardening": _Vocab(
        nouns=tuple(
            "seed soil compost tomato shovel rose tulip root weed mulch greenhouse trowel bed "
            "shrub vine harvest crop field bank yield season fertilizer seedling hose leaf "
            "branch orchard lawn pot hedge".split()
        ),
        verbs=_verbs(
            "plant:planted water:watered prune:pruned weed:weeded harvest:harvested "
            "mulch:mulched compost:composted repot:repotted trim:trimmed rake:raked "
            "sow:sowed fertilize:fertilized"
        ),
        adjectives=tuple(
            "leafy fertile shady organic perennial muddy blooming hardy green fresh".split()
        ),
    ),
    "music": _Vocab(
        nouns=tuple(
            "guitar piano melody chord rhythm drum tempo note scale pitch record band bar "
            "track album song lyric amplifier mixer verse chorus violin concert beat range "
            "chart key string microphone stage".split()
        ),
        verbs=_verbs(
            "play:played tune:tuned record:recorded strum:strummed compose:composed "
            "rehearse:rehearsed arrange:arranged mix:mixed practice:practiced sample:sampled "
            "hum:hummed perform:performed"
        ),
        adjectives=tuple(
            "melodic loud acoustic harmonic rhythmic catchy soft live sweet bright".split()
        ),
    ),
    "sports": _Vocab(
        nouns=tuple(
            "coach team match goal referee stadium pitch field season record score trophy "
            "league player ball racket tournament seed star plate return trade training "
            "sprint defense helmet whistle court net bench".split()
        ),
        verbs=_verbs(
            "train:trained score:scored pass:passed tackle:tackled defend:defended "
            "coach:coached sprint:sprinted kick:kicked block:blocked dribble:dribbled "
            "stretch:stretched play:played"
        ),
        adjectives=tuple(
            "athletic fast defensive competitive tired winning final strong fit live".split()
        ),
    ),
}
LABELS: tuple[str, ...] = tuple(sorted(TOPICS))

SHARED = _Vocab(
    nouns=tuple(
        "thing weekend neighbour table idea plan result morning friend group project list book "
        "window box bag method detail question problem change corner evening picture story "
        "notebook car door phone".split()
    ),
    verbs=_verbs(
        "check:checked compare:compared prepare:prepared notice:noticed adjust:adjusted "
        "plan:planned finish:finished start:started watch:watched change:changed clean:cleaned "
        "move:moved open:opened share:shared describe:described count:counted fix:fixed "
        "test:tested ignore:ignored repeat:repeated"
    ),
    adjectives=tuple(
        "good small large new old simple strange careful quiet busy perfect early late long "
        "short nice odd cheap rough steady".split()
    ),
)
_ALL_NOUNS = frozenset(SHARED.nouns).union(*(v.nouns for v in TOPICS.values()))
_TIMES = (
    "last week",
    "this morning",
    "on Sunday",
    "after lunch",
    "yesterday",
    "before dawn",
    "over the weekend",
    "late at night",
    "on Friday",
    "at noon",
    "in the evening",
    "every day",
)
_ADVERBS = tuple("quickly slowly carefully easily again badly gently twice early neatly".split())
_NUMBERS = tuple("two three four five six seven eight nine ten twelve".split())

# Slots: {n} {n2} noun, {v} past verb, {vb} base verb, {a} adjective, {t} time, {adv}, {num}.
_TEMPLATES = (
    "The {a} {n} {v} the {n2} {t}.",
    "I {v} the {n} {adv} and it looked {a}.",
    "We {v} a {a} {n} with the {n2}.",
    "Nobody expected the {n} to {vb} the {n2} so {adv}.",
    "After the {n}, we {v} the {a} {n2}.",
    "There was a {a} {n} near the {n2}, so I {v} it.",
    "If you {vb} the {n} first, the {n2} stays {a}.",
    "The {n2} was {a}, but the {n} {v} anyway.",
    "Have you ever {v} a {n} like that?",
    "Everyone at the {n2} wanted to {vb} the {a} {n}.",
    "It took {num} hours to {vb} the {n} properly.",
    "The {n} and the {n2} both {v} {t}.",
    "I still think the {a} {n} is the best part of the {n2}.",
    "Next time I will {vb} the {n} before the {n2}.",
    "My {a} {n} {v} the {n2} {t}.",
    "She {v} the {n} and then {v2} the {n2}.",
)
_PHRASES = (
    "honestly",
    "to be fair",
    "as always",
    "believe it or not",
    "long story short",
    "for what it is worth",
    "no kidding",
    "mark my words",
    "between you and me",
    "funny enough",
    "truth be told",
    "as my grandmother used to say",
    "in my humble experience",
    "once again",
    "for the record",
    "like clockwork",
    "as luck would have it",
    "no surprise there",
    "all things considered",
    "by the way",
    "without a doubt",
    "lo and behold",
    "as usual",
    "in hindsight",
)
_SIGNOFFS = ("cheers,", "best,", "later,", "thanks,", "ciao,", "yours,", "peace,", "regards,")
_HANDLE_ADJ = tuple(
    "quiet brave lucky sunny rusty misty clever gentle swift happy salty windy bold calm "
    "jolly proud shy tiny wild witty".split()
)
_HANDLE_ANIMAL = tuple(
    "heron otter falcon badger lynx moose panda raven robin seal stoat tapir walrus wren "
    "yak bison crane gecko hare koala".split()
)
_SYLLABLES = tuple(
    "ba be bi bo da de di do ka ke ki ko la le li lo ma me mi mo na ne ni no ra re ri ro "
    "sa se si so ta te ti to va ve vi vo za ze zi zo".split()
)
_FAKE_FIRST = tuple("alex sam jordan casey riley morgan taylor jamie robin avery".split())
_FAKE_LAST = tuple("example sample tester dummy placeholder fakename".split())
_SECRET_KINDS = ("email", "stripe_key", "aws_key", "github_token")
_SECRET_SENTENCES = {
    "email": "You can reach me at {s} if you want the details.",
    "stripe_key": "Oops, my config still had {s} in it, please ignore that.",
    "aws_key": "The script printed {s} when it crashed, which seems bad.",
    "github_token": "I pasted {s} into the wrong window again.",
}
_EXACT_KINDS = ("identical", "case", "whitespace", "punctuation")
_ARTICLE = re.compile(r"\b([Aa]) (?=[aeiou])")
_PUNCT = re.compile(r"[^\w\s]")
_SENTENCE_BREAK = re.compile(r"(?<=[.?!]) ")


@dataclass(frozen=True)
class _Author:
    handle: str
    nickname: str
    topics: tuple[str, ...]
    topic_weights: tuple[float, ...]
    phrases: tuple[str, ...]
    signoff: str
    window_start_s: int  # seconds after _START
    window_len_s: int


@dataclass
class _Draft:
    """A record before ids are assigned; ``topic`` is the topic the words were drawn from."""

    text: str
    label: str
    author: int
    time_s: int
    topic: str


def _pick(rng: np.random.Generator, items: Sequence[T]) -> T:
    return items[int(rng.integers(len(items)))]


def _normalize(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed: equal for exact-duplicate variants."""
    return " ".join(_PUNCT.sub("", text.lower()).split())


def _make_authors(rng: np.random.Generator, n_authors: int) -> list[_Author]:
    handle_ids = rng.choice(len(_HANDLE_ADJ) * len(_HANDLE_ANIMAL) * 90, n_authors, replace=False)
    nick_ids = rng.choice(len(_SYLLABLES) ** 3, n_authors, replace=False)
    authors = []
    for handle_id, nick_id in zip(handle_ids.tolist(), nick_ids.tolist(), strict=True):
        pair, number = divmod(handle_id, 90)
        adj, animal = divmod(pair, len(_HANDLE_ANIMAL))
        s = len(_SYLLABLES)
        nickname = (
            _SYLLABLES[nick_id // s**2] + _SYLLABLES[nick_id // s % s] + _SYLLABLES[nick_id % s]
        )
        n_topics = int(rng.choice([1, 2, 3], p=[0.55, 0.35, 0.10]))
        topic_ids = rng.choice(len(LABELS), n_topics, replace=False).tolist()
        weights = np.array([1.0] + [float(rng.uniform(0.15, 0.5)) for _ in range(n_topics - 1)])
        window_len = int(rng.integers(60 * 86_400, 400 * 86_400))
        authors.append(
            _Author(
                handle=f"{_HANDLE_ADJ[adj]}_{_HANDLE_ANIMAL[animal]}{number + 10}",
                nickname=nickname,
                topics=tuple(LABELS[i] for i in topic_ids),
                topic_weights=tuple((weights / weights.sum()).tolist()),
                phrases=tuple(_PHRASES[i] for i in rng.choice(len(_PHRASES), 2, replace=False)),
                signoff=_pick(rng, _SIGNOFFS),
                window_start_s=int(rng.integers(0, _SPAN_S - window_len)),
                window_len_s=window_len,
            )
        )
    return authors


def _records_per_author(rng: np.random.Generator, n_authors: int, n_base: int) -> np.ndarray:
    """(n_authors,) counts summing to n_base: at least two each, the rest heavy-tailed."""
    weights = rng.lognormal(mean=0.0, sigma=0.8, size=n_authors)
    extra = rng.multinomial(n_base - 2 * n_authors, weights / weights.sum())
    return extra + 2


def _source(rng: np.random.Generator, topics: Sequence[str], probs: Sequence[float]) -> _Vocab:
    """Where one content word comes from: topics[i] with probs[i], else any topic or shared."""
    u = float(rng.random())
    for topic, p in zip(topics, probs, strict=True):
        if u < p:
            return TOPICS[topic]
        u -= p
    if u < _CROSS_TOPIC_WORD_RATE:
        return TOPICS[_pick(rng, LABELS)]
    return SHARED


def _sentence(rng: np.random.Generator, topics: Sequence[str], probs: Sequence[float]) -> str:
    template = _pick(rng, _TEMPLATES)
    verb = _pick(rng, _source(rng, topics, probs).verbs)
    verb2 = _pick(rng, _source(rng, topics, probs).verbs)
    text = template.format(
        n=_pick(rng, _source(rng, topics, probs).nouns),
        n2=_pick(rng, _source(rng, topics, probs).nouns),
        v=verb[1],
        v2=verb2[1],
        vb=verb[0],
        a=_pick(rng, _source(rng, topics, probs).adjectives),
        t=_pick(rng, _TIMES),
        adv=_pick(rng, _ADVERBS),
        num=_pick(rng, _NUMBERS),
    )
    return _ARTICLE.sub(r"\1n ", text)


def _text(rng: np.random.Generator, author: _Author, topic: str) -> str:
    """3-6 sentences on `topic`; sometimes a second topic, the author's phrase and sign-off."""
    if rng.random() < _MIXED_TOPIC_RATE:
        topics, probs = (topic, _pick(rng, [t for t in LABELS if t != topic])), (0.35, 0.25)
    else:
        topics, probs = (topic,), (0.55,)
    sentences = [_sentence(rng, topics, probs) for _ in range(int(rng.integers(3, 7)))]
    if rng.random() < _PHRASE_RATE:
        i = int(rng.integers(len(sentences)))
        first = sentences[i]
        phrase = _pick(rng, author.phrases)
        sentences[i] = f"{phrase[0].upper()}{phrase[1:]}, {first[0].lower()}{first[1:]}"
        sentences[i] = sentences[i].replace(", i ", ", I ")
    if rng.random() < _SIGNOFF_RATE:
        sentences.append(f"{author.signoff[0].upper()}{author.signoff[1:]} {author.nickname}")
    return " ".join(sentences)


def _time_in_window(rng: np.random.Generator, author: _Author) -> int:
    return author.window_start_s + int(rng.integers(author.window_len_s))


def _base_drafts(rng: np.random.Generator, authors: list[_Author], n_base: int) -> list[_Draft]:
    """Base records grouped by author; a few have their label replaced (label noise)."""
    counts = _records_per_author(rng, len(authors), n_base)
    drafts: list[_Draft] = []
    seen: set[str] = set()
    for author_idx, (author, count) in enumerate(zip(authors, counts.tolist(), strict=True)):
        for _ in range(count):
            topic = author.topics[int(rng.choice(len(author.topics), p=author.topic_weights))]
            text = _text(rng, author, topic)
            while _normalize(text) in seen:  # keeps planted duplicates the only duplicates
                text = _text(rng, author, topic)
            seen.add(_normalize(text))
            time_s = _time_in_window(rng, author)
            drafts.append(_Draft(text, topic, author_idx, time_s, topic))
    n_noise = round(_LABEL_NOISE_RATE * n_base)
    for i in rng.choice(n_base, n_noise, replace=False).tolist():
        drafts[i].label = _pick(rng, [t for t in LABELS if t != drafts[i].topic])
    return drafts


def _exact_variant(rng: np.random.Generator, text: str, kind: str) -> str:
    """A text equal to `text` after _normalize; `kind` says what differs."""
    if kind == "identical":
        return text
    if kind == "case":
        return _pick(rng, [str.lower, str.upper, str.title])(text)
    if kind == "whitespace":
        words = text.split(" ")
        gaps = [_pick(rng, [" ", " ", "  ", "\n", "\t"]) for _ in words[1:]]
        body = words[0] + "".join(g + w for g, w in zip(gaps, words[1:], strict=True))
        return f"  {body} \n"
    # punctuation: drop it, or double each mark
    if rng.random() < 0.5:
        return _PUNCT.sub("", text)
    return re.sub(r"([.,?!])", r"\1\1", text)


def _near_variant(rng: np.random.Generator, text: str, topic: str) -> str:
    """`text` with 2-4 nouns replaced by other nouns of its topic or the shared vocabulary."""
    words = text.split(" ")
    nouns = [i for i, w in enumerate(words) if w.rstrip(".,?!") in _ALL_NOUNS]
    n_change = min(len(nouns), max(2, min(4, round(0.05 * len(words)))))
    pool = TOPICS[topic].nouns + SHARED.nouns
    for i in sorted(rng.choice(nouns, n_change, replace=False).tolist()):
        core = words[i].rstrip(".,?!")
        words[i] = _pick(rng, [w for w in pool if w != core]) + words[i][len(core) :]
    return " ".join(words)


def _copy_meta(
    rng: np.random.Generator, original: _Draft, authors: list[_Author]
) -> tuple[str, int, int]:
    """(label, author, time_s) of a planted copy: maybe another label, maybe another author."""
    label = original.label
    if rng.random() < _CONFLICT_RATE:
        label = _pick(rng, [t for t in LABELS if t != original.label])
    if rng.random() < _CROSS_AUTHOR_RATE:
        author = _pick(rng, [a for a in range(len(authors)) if a != original.author])
        return label, author, _time_in_window(rng, authors[author])
    delay_s = int(rng.integers(3_600, 60 * 86_400))
    return label, original.author, min(original.time_s + delay_s, _SPAN_S - 1)


def _secret(rng: np.random.Generator, kind: str) -> str:
    def chars(alphabet: str, n: int) -> str:
        return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=n).tolist())

    if kind == "email":
        number = int(rng.integers(10, 100))
        domain = _pick(rng, ["example.com", "example.org", "example.net"])
        return f"{_pick(rng, _FAKE_FIRST)}.{_pick(rng, _FAKE_LAST)}{number}@{domain}"
    if kind == "stripe_key":
        return "sk_live_" + chars(_ALNUM, 24)
    if kind == "aws_key":
        return "AKIA" + chars(_UPPER_ALNUM, 16)
    return "ghp_" + chars(_ALNUM, 36)


def _timestamp(time_s: int) -> str:
    return (_START + timedelta(seconds=time_s)).strftime("%Y-%m-%dT%H:%M:%SZ")


def generate_corpus_with_truth(seed: int, n_records: int) -> tuple[list[dict], dict]:
    """The corpus and a table of what was planted in it.

    Records are dicts with exactly the keys in FIELDS, in a random order, with ids
    ``doc-000000`` ... in file order. The truth dict has (id pairs are ``(original, copy)``,
    all lists sorted):

    - ``exact_duplicates``: pairs equal after lower-casing, dropping punctuation and
      collapsing whitespace; ``exact_variant`` maps each copy id to identical / case /
      whitespace / punctuation;
    - ``near_duplicates``: pairs with 2-4 words changed;
    - ``conflicting_labels``: the duplicate pairs (exact or near) whose labels differ;
    - ``cross_author_duplicates``: the duplicate pairs whose authors differ;
    - ``secret_ids`` and ``secrets`` (id -> (kind, value)): records holding a fake e-mail
      address or API-key-like string; none of them takes part in a duplicate pair;
    - ``label_noise_ids``: records whose label is not the topic their words were drawn from.
    """
    if not MIN_N_RECORDS <= n_records <= MAX_N_RECORDS:
        raise ValueError(
            f"n_records must be between {MIN_N_RECORDS} and {MAX_N_RECORDS}, got {n_records}"
        )
    rng = np.random.default_rng(seed)
    n_exact = round(_EXACT_DUP_RATE * n_records)
    n_near = round(_NEAR_DUP_RATE * n_records)
    n_secret = max(len(_SECRET_KINDS), round(_SECRET_RATE * n_records))
    n_base = n_records - n_exact - n_near
    authors = _make_authors(rng, max(3, n_records // _RECORDS_PER_AUTHOR))
    drafts = _base_drafts(rng, authors, n_base)

    # Originals, copies' originals and secret holders are all distinct base records, so each
    # duplicate cluster is one (original, copy) pair and no secret is duplicated.
    chosen = rng.choice(n_base, n_exact + n_near + n_secret, replace=False).tolist()
    exact_src, near_src = chosen[:n_exact], chosen[n_exact : n_exact + n_near]
    secret_src = chosen[n_exact + n_near :]
    exact_pairs, near_pairs, exact_kinds = [], [], {}
    for j, src in enumerate(exact_src):
        kind = _EXACT_KINDS[j % len(_EXACT_KINDS)]
        label, author, time_s = _copy_meta(rng, drafts[src], authors)
        text = _exact_variant(rng, drafts[src].text, kind)
        drafts.append(_Draft(text, label, author, time_s, drafts[src].topic))
        exact_pairs.append((src, len(drafts) - 1))
        exact_kinds[len(drafts) - 1] = kind
    for src in near_src:
        label, author, time_s = _copy_meta(rng, drafts[src], authors)
        text = _near_variant(rng, drafts[src].text, drafts[src].topic)
        drafts.append(_Draft(text, label, author, time_s, drafts[src].topic))
        near_pairs.append((src, len(drafts) - 1))
    secrets: dict[int, tuple[str, str]] = {}
    for j, src in enumerate(secret_src):
        kind = _SECRET_KINDS[j % len(_SECRET_KINDS)]
        value = _secret(rng, kind)
        sentences = _SENTENCE_BREAK.split(drafts[src].text)
        sentences.insert(int(rng.integers(len(sentences))), _SECRET_SENTENCES[kind].format(s=value))
        drafts[src].text = " ".join(sentences)
        secrets[src] = (kind, value)

    order = rng.permutation(len(drafts)).tolist()
    id_of = {draft_idx: f"doc-{pos:06d}" for pos, draft_idx in enumerate(order)}
    records = [
        {
            "id": id_of[i],
            "text": drafts[i].text,
            "label": drafts[i].label,
            "author": authors[drafts[i].author].handle,
            "created_at": _timestamp(drafts[i].time_s),
        }
        for i in order
    ]

    def ids(pairs: list[tuple[int, int]]) -> list[tuple[str, str]]:
        return sorted((id_of[a], id_of[b]) for a, b in pairs)

    all_pairs = exact_pairs + near_pairs
    truth = {
        "exact_duplicates": ids(exact_pairs),
        "exact_variant": {id_of[i]: kind for i, kind in sorted(exact_kinds.items())},
        "near_duplicates": ids(near_pairs),
        "conflicting_labels": ids(
            [p for p in all_pairs if drafts[p[0]].label != drafts[p[1]].label]
        ),
        "cross_author_duplicates": ids(
            [p for p in all_pairs if drafts[p[0]].author != drafts[p[1]].author]
        ),
        "secret_ids": sorted(id_of[i] for i in secrets),
        "secrets": {id_of[i]: secrets[i] for i in sorted(secrets, key=id_of.__getitem__)},
        "label_noise_ids": sorted(id_of[i] for i, d in enumerate(drafts) if d.label != d.topic),
    }
    return records, truth


def generate_corpus(seed: int, n_records: int) -> list[dict]:
    """n_records records (see generate_corpus_with_truth); same seed, same records."""
    return generate_corpus_with_truth(seed, n_records)[0]


def corpus_bytes(records: Sequence[dict]) -> bytes:
    """JSON Lines, one record a line, keys in FIELDS order, UTF-8."""
    lines = (
        json.dumps({k: r[k] for k in FIELDS}, ensure_ascii=False, separators=(",", ":"))
        for r in records
    )
    return "".join(line + "\n" for line in lines).encode("utf-8")


def write_corpus(path: str | os.PathLike, seed: int, n_records: int) -> None:
    """Write generate_corpus(seed, n_records) to path as JSON Lines, atomically."""
    # 0644: the corpus is committed and meant to be read by others.
    atomic_write_bytes(Path(path), corpus_bytes(generate_corpus(seed, n_records)), mode=0o644)
