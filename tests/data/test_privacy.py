"""Tests for campaign.data.privacy: validators, recall on planted secrets, false alarms on clean
prose, reports that hold no values, redaction, the three policies, the demo corpus, and speed."""

from __future__ import annotations

import base64
import json
import random
import string
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest

from campaign.core.errors import CampaignError
from campaign.data.privacy import (
    KINDS,
    Finding,
    apply_policy,
    card_number_plausible,
    iban_valid,
    luhn_valid,
    redact_text,
    scan_records,
    scan_text,
)
from campaign.tools.demo_data import generate_corpus_with_truth

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "privacy"
SEED = 20240601
ALNUM = string.ascii_letters + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits


# --- hand-checked validators -----------------------------------------------------------------


@pytest.mark.parametrize(
    "number",
    ["79927398713", "4111111111111111", "5500000000000004", "378282246310005", "6011111111111117"],
)
def test_luhn_accepts_known_valid_numbers(number):
    assert luhn_valid(number)


@pytest.mark.parametrize(
    "number", ["79927398710", "4111111111111112", "378282246310006", "", "4111-1111", "١٢٣"]
)
def test_luhn_rejects_wrong_check_digits_and_non_digits(number):
    assert not luhn_valid(number)


def test_luhn_by_hand():
    # From the right, every second digit is doubled (10-18 count as their digit sum).
    assert luhn_valid("0")
    assert luhn_valid("18")  # 1 doubled is 2; 2 + 8 = 10
    assert not luhn_valid("19")  # 2 + 9 = 11
    assert luhn_valid("59")  # 5 doubled is 10, counted as 1; 1 + 9 = 10
    assert luhn_valid("7992739871" + "3")  # 7+9+9+4+7+6+9+7+7+2 = 67 (doubled), + 3 = 70


def test_card_plausibility_needs_an_issuer_prefix_and_its_length():
    assert card_number_plausible("4111111111111111")  # Visa, 16
    assert card_number_plausible("378282246310005")  # Amex, 15
    assert not card_number_plausible("1234567812345670")  # Luhn-valid, no issuer starts with 1
    assert not card_number_plausible("0000000000000000")
    assert not card_number_plausible("3782822463100050")  # Amex prefix with 16 digits
    assert not card_number_plausible("4111111111111112")  # Luhn fails


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 32",
        "GB82WEST12345698765432",
        "DE89 3704 0044 0532 0130 00",
        "FR14 2004 1010 0505 0001 3M02 606",
        "NL91 ABNA 0417 1643 00",
        "BE68 5390 0754 7034",
        "CH93 0076 2011 6238 5295 7",
        "NO93 8601 1117 947",
    ],
)
def test_iban_accepts_published_examples(iban):
    assert iban_valid(iban)


@pytest.mark.parametrize(
    "iban",
    [
        "GB82 WEST 1234 5698 7654 33",  # check digits do not match
        "GB82 WEST 1234 5698 7654 3",  # one character short for GB
        "DE89 3704 0044 0532 0130 000",  # one character long for DE
        "XX82 WEST 1234 5698 7654 32",  # no such country
        "gb82west12345698765432",  # lower case
        "GB8 WEST 1234 5698 7654 32",
    ],
)
def test_iban_rejects_wrong_check_length_country_or_case(iban):
    assert not iban_valid(iban)


# --- the planted set -------------------------------------------------------------------------


@dataclass(frozen=True)
class Planted:
    kind: str
    subtype: str
    value: str  # the secret itself: exactly what must be found and removed


def _chars(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _digits(rng: random.Random, n: int) -> str:
    return _chars(rng, string.digits, n)


def _with_luhn_digit(payload: str) -> str:
    """Append the check digit (computed here, independently of the module under test)."""
    total = 0
    for i, ch in enumerate(reversed(payload)):
        d = int(ch)
        if i % 2 == 0:  # these digits are doubled once the check digit is appended
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return payload + str((10 - total % 10) % 10)


# (name, prefixes, length, grouping of the printed number)
CARD_BRANDS = [
    ("visa", ["4"], 16, (4, 4, 4, 4)),
    ("visa13", ["4"], 13, None),
    ("mastercard", ["51", "52", "53", "54", "55"], 16, (4, 4, 4, 4)),
    ("mastercard2", ["2221", "2500", "2720"], 16, (4, 4, 4, 4)),
    ("amex", ["34", "37"], 15, (4, 6, 5)),
    ("discover", ["6011", "65"], 16, (4, 4, 4, 4)),
    ("jcb", ["3528", "3566", "3589"], 16, (4, 4, 4, 4)),
    ("unionpay", ["62"], 16, (4, 4, 4, 4)),
    ("diners", ["36"], 14, (4, 6, 4)),
]


def make_card(rng: random.Random, brand: tuple) -> str:
    _, prefixes, length, grouping = brand
    prefix = rng.choice(prefixes)
    number = _with_luhn_digit(prefix + _digits(rng, length - len(prefix) - 1))
    style = rng.choice(["plain", "space", "dash"]) if grouping else "plain"
    if style == "plain":
        return number
    parts, pos = [], 0
    for size in grouping:
        parts.append(number[pos : pos + size])
        pos += size
    return (" " if style == "space" else "-").join(parts)


# Country -> BBAN layout: n digits, a upper-case letters, c upper-case letters or digits.
IBAN_LAYOUTS = {
    "DE": "18n",
    "GB": "4a14n",
    "FR": "10n11c2n",
    "NL": "4a10n",
    "ES": "20n",
    "IT": "1a10n12c",
    "BE": "12n",
    "CH": "5n12c",
    "AT": "16n",
    "PL": "24n",
    "SE": "20n",
    "NO": "11n",
    "IE": "4a14n",
    "PT": "21n",
}


def make_iban(rng: random.Random, country: str) -> str:
    bban = ""
    for count, cls in _layout_parts(IBAN_LAYOUTS[country]):
        alphabet = {"n": string.digits, "a": string.ascii_uppercase, "c": UPPER_ALNUM}[cls]
        bban += _chars(rng, alphabet, count)
    numeric = "".join(str(int(ch, 36)) for ch in bban + country + "00")
    iban = f"{country}{98 - int(numeric) % 97:02d}{bban}"
    if rng.random() < 0.6:
        return " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
    return iban


def _layout_parts(layout: str) -> list[tuple[int, str]]:
    parts, number = [], ""
    for ch in layout:
        if ch.isdigit():
            number += ch
        else:
            parts.append((int(number), ch))
            number = ""
    return parts


# Assigned North American area codes: phonenumbers confirms a number is VALID (in an assigned
# range), and a random three-digit area code is unassigned about half the time.
AREA_CODES = ["212", "213", "305", "312", "404", "415", "503", "512", "617", "646", "702", "713",
              "808", "917", "919", "206"]  # fmt: skip


def make_phone(rng: random.Random, i: int) -> str:
    def d(n: int) -> str:
        return _digits(rng, n)

    def nxx() -> str:
        return str(rng.randint(2, 9)) + d(2)

    def london() -> str:  # London numbers are 020 3xxx, 7xxx or 8xxx
        return rng.choice("378") + d(3)

    a, b, c = rng.choice(AREA_CODES), nxx(), d(4)
    formats = [
        f"+1 {a} {b} {c}",
        f"+1-{a}-{b}-{c}",
        f"+1 ({a}) {b}-{c}",
        f"({a}) {b}-{c}",
        f"{a}-{b}-{c}",
        f"{a}.{b}.{c}",
        f"1-800-{b}-{c}",
        f"{a} {b} {c}",  # format-7, spaces only: a phone only after a phone word
        f"+44 20 {london()} {d(4)}",
        f"+44 7{rng.choice('45789')}{d(2)} {d(6)}",
        f"+44 (0)20 {london()} {d(4)}",
        f"020 {london()} {d(4)}",
        f"07{rng.choice('45789')}{d(2)} {d(6)}",
        f"+49 30 {d(8)}",
        f"+49 151 {d(8)}",
        f"030 {d(8)}",
        f"0151 {d(8)}",
        f"+33 1 {d(2)} {d(2)} {d(2)} {d(2)}",
        f"+33 6 {d(2)} {d(2)} {d(2)} {d(2)}",
        f"0{rng.randint(1, 7)} {d(2)} {d(2)} {d(2)} {d(2)}",
        f"+49151{d(8)}",
        f"+91 9{d(4)} {d(5)}",
        f"+81 3-{d(4)}-{d(4)}",
        f"+61 2 {d(4)} {d(4)}",
        f"+55 11 9{d(4)}-{d(4)}",
        f"+34 6{d(2)} {d(3)} {d(3)}",
        f"0044 20 {london()} {d(4)}",  # format-26, "00" + country code: the same
    ]
    return formats[i % len(formats)]


NEEDS_PHONE_WORD = ("format-7", "format-26")


def make_email(rng: random.Random, i: int) -> str:
    first = rng.choice(["anna", "jonas", "priya", "kenji", "fatima", "lucas", "mei", "omar"])
    last = rng.choice(["schmidt", "okafor", "tanaka", "silva", "novak", "haddad", "lindqvist"])
    domain = rng.choice(
        ["gmail.com", "mail.example.org", "uni-hamburg.de", "company.co.uk", "outlook.fr", "x.io"]
    )
    local = [
        f"{first}.{last}",
        f"{first}_{last}{rng.randint(1, 99)}",
        f"{first}+news{i}",
        f"{first[0]}{last}",
        f"{first.capitalize()}.{last.capitalize()}",
    ][i % 5]
    return f"{local}@{domain}"


def make_message_id(rng: random.Random, i: int) -> str:
    """Message-IDs as mail and news software writes them (without the angle brackets)."""
    host = rng.choice(["wall.org", "netlabs.com", "mail.gmail.com", "lists.debian.org", "cs.uu.nl"])
    month = rng.choice(["Jan", "Feb", "Mar", "Jul", "Nov"])
    return [
        f"1997{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{_digits(rng, 4)}."
        f"{_chars(rng, string.ascii_uppercase, 3)}{_digits(rng, 5)}@{host}",
        f"199{rng.randint(0, 9)}{month}{rng.randint(1, 28)}.{_digits(rng, 6)}.{_digits(rng, 5)}"
        f"@{host}",
        f"2003{_digits(rng, 10)}.GA{_digits(rng, 5)}@{host}",
        f"CA{_chars(rng, ALNUM, 20)}={_chars(rng, ALNUM, 10)}@{host}",
    ][i % 4]


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def make_jwt(rng: random.Random) -> str:
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    claims = {
        "sub": _digits(rng, 8),
        "name": "Test User",
        "iat": rng.randint(1_600_000_000, 1_800_000_000),
    }
    payload = _b64url(json.dumps(claims).encode())
    return f"{header}.{payload}.{_b64url(rng.randbytes(32))}"


def make_private_key(rng: random.Random, i: int) -> str:
    label = ["RSA ", "EC ", "OPENSSH ", "DSA ", "", "ENCRYPTED "][i % 6]
    lines = [_chars(rng, ALNUM + "+/", 64) for _ in range(rng.randint(3, 10))]
    body = "\n".join(lines) + "\n" + _chars(rng, ALNUM + "+/", rng.randint(8, 60)) + "=="
    if i % 7 == 6:  # a PGP block
        return (
            f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n-----END PGP PRIVATE KEY BLOCK-----"
        )
    if i % 13 == 12:  # truncated paste: no END line
        return f"-----BEGIN {label}PRIVATE KEY-----\n{body}"
    return f"-----BEGIN {label}PRIVATE KEY-----\n{body}\n-----END {label}PRIVATE KEY-----"


def make_password(rng: random.Random, symbols: str = "!#%&*@^-_=+") -> str:
    return _chars(rng, ALNUM + symbols, rng.randint(10, 16))


# api_key subtype -> (value maker, sentence around the value)
TOKEN_SUBTYPES = {
    "aws_access_key_id": (
        lambda r: rng_choice(r, ["AKIA", "ASIA"]) + _chars(r, UPPER_ALNUM, 16),
        "The deploy log printed {s} right before it failed.",
    ),
    "aws_secret": (
        lambda r: _chars(r, ALNUM + "+/", 40),
        "My AWS secret access key is {s} so please rotate it.",
    ),
    "google_api_key": (
        lambda r: "AIza" + _chars(r, ALNUM + "_-", 35),
        "The maps widget loads with key {s} in the page source.",
    ),
    "stripe": (
        lambda r: (
            rng_choice(r, ["sk_live_", "sk_test_", "rk_live_"])
            + _chars(r, ALNUM, r.randint(24, 34))
        ),
        "Oops, the config still had {s} in it.",
    ),
    "slack": (
        lambda r: (
            f"xox{rng_choice(r, 'bp')}-{_digits(r, 12)}-{_digits(r, 13)}-{_chars(r, ALNUM, 24)}"
        ),
        "The bot token {s} was in the screenshot.",
    ),
    "github": (
        lambda r: rng_choice(r, ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]) + _chars(r, ALNUM, 36),
        "I pasted {s} into the wrong window again.",
    ),
    "github_pat": (
        lambda r: f"github_pat_{_chars(r, ALNUM, 22)}_{_chars(r, ALNUM, 59)}",
        "The fine-grained token {s} expires next month.",
    ),
    "gitlab": (
        lambda r: "glpat-" + _chars(r, ALNUM + "_-", 20),
        "Use {s} for the mirror job.",
    ),
    "huggingface": (
        lambda r: "hf_" + _chars(r, ALNUM, 34),
        "Log in with {s} before downloading the gated model.",
    ),
    "jwt": (make_jwt, "The request carried the session {s} in a cookie."),
    "assigned_hex": (
        lambda r: _chars(r, "0123456789abcdef", 32),
        "In the old settings file: api_key = {s}",
    ),
    "assigned_base62": (
        lambda r: _chars(r, ALNUM, r.randint(20, 40)),
        'The JSON had "client_secret": "{s}", in plain text.',
    ),
    "password": (make_password, "The notes said password={s} for the staging box."),
    "bearer": (
        lambda r: _chars(r, ALNUM + "-._~", r.randint(24, 48)),
        "curl sent Authorization: Bearer {s} to the API.",
    ),
    "basic_auth": (
        lambda r: base64.b64encode(f"deploy:{make_password(r)}".encode()).decode(),
        "The proxy log shows Authorization: Basic {s} on every request.",
    ),
    "url_password": (
        lambda r: make_password(r, "-._~!*"),  # what a URL allows unescaped
        "The connection string was postgres://admin:{s}@db.internal:5432/app yesterday.",
    ),
    "standalone": (
        lambda r: _chars(r, ALNUM, r.randint(32, 48)),
        "Somebody posted {s} in the channel by mistake.",
    ),
}


def rng_choice(rng: random.Random, options):
    return rng.choice(list(options))


SENTENCES = {
    "email": [
        "You can reach me at {s} if you want the details.",
        "Send the slides to {s} before Friday.",
        "Contact: {s}",
    ],
    "phone": [
        "Call me at {s} after six.",
        "My number is {s} if anything changes.",
        "The front desk ({s}) is staffed until noon.",  # no phone word
        "Text {s} when you are outside.",
    ],
    "credit_card": [
        "Charge it to {s}, expiry 04/27.",
        "The card number {s} was saved in the form.",
        "He read out {s} over the phone.",
    ],
    "iban": [
        "Please transfer the deposit to {s} by Monday.",
        "IBAN: {s}",
        "The refund goes to account {s}, as agreed.",
    ],
    "private_key": [
        "Here is the deploy key:\n{s}\nDo not share it.",
        "{s}",
    ],
    "message_id": [
        "Perl is designed to give you several ways to do anything.\n\t-- Larry Wall in <{s}>",
        "Message-ID: <{s}>",
        "In article <{s}> somebody wrote that it works.",
    ],
}
# Around each planted sentence: ordinary prose, so a finding elsewhere is a false alarm.
FILLERS = [
    "The meeting ran long again.",
    "We moved the release to 2024-06-14 after the 3.2.1 regression.",
    "Lunch was at 12:30, and it cost 14.50.",
    "",
    "Version 2.13.0 fixed it, see commit 9fceb02d0ae598e95dc970b74767f19372d61af8.",
]


def planted_records(seed: int = SEED) -> tuple[list[str], list[str], list[list[tuple]]]:
    """ids, texts, and per record the (Planted, start, end) it holds: 338 secrets, 30+ per kind."""
    rng = random.Random(seed)
    planted: list[Planted] = []
    seen: set[str] = set()

    def plant(kind: str, subtype: str, make, *args) -> None:
        value = make(rng, *args)
        while value in seen:  # every value distinct, so "is it still there?" has one answer
            value = make(rng, *args)
        seen.add(value)
        planted.append(Planted(kind, subtype, value))

    countries = sorted(IBAN_LAYOUTS)
    for i in range(30):
        plant("email", "email", make_email, i)
    for i in range(54):
        plant("phone", f"format-{i % 27}", make_phone, i)
    for i in range(36):
        brand = CARD_BRANDS[i % len(CARD_BRANDS)]
        plant("credit_card", brand[0], make_card, brand)
    for i in range(42):
        country = countries[i % len(countries)]
        plant("iban", country, make_iban, country)
    for i in range(6 * len(TOKEN_SUBTYPES)):
        subtype = list(TOKEN_SUBTYPES)[i % len(TOKEN_SUBTYPES)]
        plant("api_key", subtype, TOKEN_SUBTYPES[subtype][0])
    for i in range(32):
        plant("message_id", f"style-{i % 4}", make_message_id, i)
    for i in range(42):
        header = "BEGIN " + ["RSA ", "EC ", "OPENSSH ", "DSA ", "", "ENCRYPTED "][i % 6]
        plant("private_key", "PGP" if i % 7 == 6 else header, make_private_key, i)

    ids, texts, truth = [], [], []
    for n, p in enumerate(planted):
        if p.kind == "api_key":
            sentence = TOKEN_SUBTYPES[p.subtype][1]
        else:
            sentence = rng.choice(SENTENCES[p.kind])
        before, after = rng.choice(FILLERS), rng.choice(FILLERS)
        head = (before + " " if before else "") + sentence[: sentence.index("{s}")]
        text = (
            head + p.value + sentence[sentence.index("{s}") + 3 :] + (" " + after if after else "")
        )
        ids.append(f"rec-{n:04d}")
        texts.append(text)
        truth.append([(p, len(head), len(head) + len(p.value))])
    return ids, texts, truth


@pytest.fixture(scope="module")
def planted():
    ids, texts, truth = planted_records()
    return ids, texts, truth, scan_records(ids, texts)


def _found(findings, p: Planted, start: int, end: int) -> bool:
    return any(f.kind == p.kind and f.start <= start and f.end >= end for f in findings)


def test_planted_set_is_deterministic_and_covers_every_kind():
    a, b = planted_records(), planted_records()
    assert a[1] == b[1]
    assert planted_records(SEED + 1)[1] != a[1]
    kinds = Counter(p.kind for spans in a[2] for p, _, _ in spans)
    assert set(kinds) == set(KINDS) and min(kinds.values()) >= 30 and sum(kinds.values()) >= 100
    values = [p.value for spans in a[2] for p, _, _ in spans]
    assert len(set(values)) == len(values)
    # The generators are right: every planted card and IBAN passes the published checks.
    for spans in a[2]:
        for p, _, _ in spans:
            if p.kind == "credit_card":
                assert luhn_valid(p.value.replace(" ", "").replace("-", "")), p.value
            if p.kind == "iban":
                assert iban_valid(p.value), p.value


def test_recall_on_planted_secrets(planted):
    """Recall: a planted secret counts as found when one finding of its kind covers all of it.

    Measured at SEED on 338 planted secrets: 1.000 overall. Over seeds 0-29 (10,140 secrets):
    0.995 overall; phone 0.976 (the two formats that need a phone word, as before, and a few
    +81/+61/+55 numbers outside the assigned ranges phonenumbers knows), api_key 0.997, every
    other kind 1.000, message_id included. Phone numbers are drawn from assigned ranges
    (AREA_CODES, London 020 3/7/8): phonenumbers confirms validity, and a random area code is
    unassigned about half the time. The same person wrote the generators and the rules, so
    read these as upper bounds for real data: tests/data/test_privacy_real.py measures on
    hand-labelled real text.
    Bounds: >= 0.95 overall and >= 0.9 per kind; and no other sub-type (token type, card brand,
    IBAN country, phone format, key header) may lose half its examples, which the per-kind
    bound alone would allow."""
    ids, texts, truth, report = planted
    hits: dict[str, list[bool]] = defaultdict(list)
    by_subtype: dict[str, list[bool]] = defaultdict(list)
    missed = []
    for text, findings, spans in zip(texts, report.findings, truth, strict=True):
        for p, start, end in spans:
            ok = _found(findings, p, start, end)
            hits[p.kind].append(ok)
            if not ok:
                missed.append(f"{p.kind}/{p.subtype}")
            if p.subtype in NEEDS_PHONE_WORD:
                assert ok == ("front desk" not in text), text
            else:
                by_subtype[f"{p.kind}/{p.subtype}"].append(ok)
    per_kind = {kind: sum(h) / len(h) for kind, h in hits.items()}
    overall = sum(sum(h) for h in hits.values()) / sum(len(h) for h in hits.values())
    print(
        f"\nrecall overall {overall:.3f}; " + ", ".join(f"{k} {v:.3f}" for k, v in per_kind.items())
    )
    assert overall >= 0.95, f"overall recall {overall:.3f}; missed {missed}"
    for kind, recall in per_kind.items():
        assert recall >= 0.9, f"{kind} recall {recall:.3f}; missed {missed}"
    lost = [name for name, h in by_subtype.items() if sum(h) * 2 <= len(h)]
    assert lost == [], f"half or more missed for {lost}"


def test_no_false_alarms_around_planted_secrets(planted):
    """Every finding in the planted records is one of the planted secrets, of its kind."""
    ids, texts, truth, report = planted
    extra = []
    for text, findings, spans in zip(texts, report.findings, truth, strict=True):
        for f in findings:
            if not any(f.kind == p.kind and f.start < e and f.end > s for p, s, e in spans):
                extra.append((f.kind, text[f.start : f.end]))
    assert extra == []


def test_clean_prose_false_alarm_rate():
    """False alarms on tests/fixtures/privacy/clean_prose.txt: 1,003 lines of ordinary English
    (153 written by hand, 850 from templates full of look-alikes: dates in nine formats, times,
    prices, version numbers, order, invoice and tracking numbers, 7-64 character hex hashes,
    UUIDs, ISBN-10/13, 16-digit numbers that fail Luhn, IBAN-shaped strings that fail mod-97,
    URLs without credentials, IPs and MACs, long words, camelCase names, model ids, and
    "key:", "token", "secret is", "password" in prose).

    Measured: 0 flagged lines of 1,003 (0 per 1,000). Bound: at most 1 flagged line per 1,000.
    Also measured, not committed: 27,200 more template lines from 32 other seeds, 0 flagged
    (after one fix: tails of invalid IBANs read as phones, 5 in the first 17,000); Python's
    pydoc topics (8,716 lines) and the Debian licence texts (4,824 lines), 0; 600,888 lines of
    Debian changelogs, 0 apart from the maintainers' real e-mail addresses.
    Why that bound: the demo corpus plants secrets in 1 record in 200, and a scanner that
    flags clean text at a tenth of that rate would already make `fail` stop campaigns for
    nothing and `redact` mangle numbers a model should learn from."""
    lines = [line for line in (FIXTURES / "clean_prose.txt").read_text().splitlines() if line]
    assert len(lines) >= 1000
    flagged = [(line, scan_text(line)) for line in lines]
    flagged = [(line, fs) for line, fs in flagged if fs]
    rate = len(flagged) / len(lines)
    print(f"\nclean prose: {len(flagged)} of {len(lines)} lines flagged ({1000 * rate:.2f}/1000)")
    shown = [[(f.kind, line[f.start : f.end]) for f in fs] for line, fs in flagged]
    assert rate <= 0.001, f"{len(flagged)} of {len(lines)} lines flagged: {shown}"


# --- reports never hold values ---------------------------------------------------------------


def test_report_counts_ids_and_holds_no_secret_value(planted):
    ids, texts, truth, report = planted
    data = report.as_dict()
    serialized = report.to_json()
    assert json.loads(serialized) == data
    found = _found_ids(planted)
    assert data["n_records"] == len(ids)
    assert data["flagged_ids"] == sorted(set().union(*found.values()))
    assert data["n_flagged"] == len(data["flagged_ids"])
    assert set(data["kinds"]) == set(KINDS)
    for kind in KINDS:
        assert data["kinds"][kind]["ids"] == sorted(found[kind])
        assert data["kinds"][kind]["records"] == len(found[kind])
    for spans in truth:
        for p, _, _ in spans:
            for piece in {p.value, p.value.replace(" ", ""), p.value.replace("-", "")}:
                assert piece not in serialized
            for line in p.value.splitlines():
                assert not line or line.startswith("-----") or line not in serialized
    # No masked previews either: nothing but kinds, counts and ids.
    assert set(data) == {"n_records", "n_flagged", "flagged_ids", "kinds"}
    assert all(set(v) == {"records", "findings", "ids"} for v in data["kinds"].values())


def _found_ids(planted) -> dict[str, set[str]]:
    """Kind -> ids of the records whose planted secret of that kind was found."""
    ids, texts, truth, report = planted
    found: dict[str, set[str]] = {kind: set() for kind in KINDS}
    for rid, findings, spans in zip(ids, report.findings, truth, strict=True):
        for p, start, end in spans:
            if _found(findings, p, start, end):
                found[p.kind].add(rid)
    return found


def test_finding_holds_positions_only():
    text = "mail anna.schmidt@gmail.com now"
    (finding,) = scan_text(text)
    assert finding == Finding("email", 5, 27)
    assert set(vars(finding)) == {"kind", "start", "end"}
    with pytest.raises(AttributeError):
        finding.kind = "phone"  # frozen


# --- redaction and policies ------------------------------------------------------------------


def test_redaction_removes_every_planted_secret(planted):
    """Every secret the scan found is gone; the only survivors are the ones recall missed
    (none at SEED; test_recall_on_planted_secrets bounds how many there may be)."""
    ids, texts, truth, report = planted
    redacted = apply_policy("redact", texts, report)
    survivors, misses = 0, 0
    for original, text, findings, spans in zip(
        texts, redacted, report.findings, truth, strict=True
    ):
        for p, start, end in spans:
            if _found(findings, p, start, end):
                assert p.value not in text
                assert f"[REDACTED:{p.kind}]" in text
                # What comes before the secret is kept.
                assert text.split("[REDACTED:")[0] == original[:start]
            else:
                misses += 1
            survivors += p.value in text
        assert scan_text(text) == []  # nothing left, and markers are not findings
    assert survivors == misses


def test_redact_text_by_hand():
    text = "key AKIAIOSFODNN7EXAMPLE and mail bob@example.org."
    assert redact_text(text) == "key [REDACTED:api_key] and mail [REDACTED:email]."
    assert redact_text("nothing here") == "nothing here"
    # Overlapping findings given by a caller are merged, so no character survives.
    merged = redact_text("abcdefghij", [Finding("email", 2, 6), Finding("phone", 4, 8)])
    assert merged == "ab[REDACTED:email]ij"


def test_report_policy_changes_nothing(planted):
    ids, texts, truth, report = planted
    before = list(texts)
    assert apply_policy("report", texts, report) == before
    assert texts == before


def test_fail_policy_raises_one_line_with_counts_and_ids():
    ids = ["doc-3", "doc-1", "doc-2"]
    texts = ["write to bob@example.org", "nothing to see", "token ghp_" + "a1B2" * 9]
    report = scan_records(ids, texts)
    with pytest.raises(CampaignError) as err:
        apply_policy("fail", texts, report)
    assert str(err.value) == (
        "data.privacy is 'fail': 2 records contain secrets or personal data "
        "(api_key: 1, email: 1; first ids: doc-2, doc-3)"
    )
    assert "bob@" not in str(err.value) and "ghp_" not in str(err.value)


def test_fail_policy_message_on_planted_set_is_one_line(planted):
    ids, texts, truth, report = planted
    with pytest.raises(CampaignError) as err:
        apply_policy("fail", texts, report)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"data.privacy is 'fail': {report.n_flagged} records contain")
    assert report.n_flagged >= 0.95 * len(ids)
    assert "first ids: rec-0000, rec-0001, rec-0002, rec-0003, rec-0004, ...)" in message
    for kind in KINDS:
        assert f"{kind}: {len(report.ids_by_kind[kind])}" in message


def test_fail_policy_passes_clean_texts_and_unknown_policy_is_an_error():
    texts = ["all quiet", "version 1.2.3 on 2024-01-05"]
    report = scan_records(["a", "b"], texts)
    assert apply_policy("fail", texts, report) == texts
    with pytest.raises(CampaignError, match="data.privacy must be one of report, redact, fail"):
        apply_policy("mask", texts, report)
    with pytest.raises(ValueError):
        apply_policy("report", texts[:1], report)
    with pytest.raises(ValueError):
        scan_records(["a"], texts)


# --- rules by hand: the tricky cases ---------------------------------------------------------


@pytest.mark.parametrize(
    "text,kinds",
    [
        ("call 415-555-2671 today", ["phone"]),
        ("the values 317 893 6654 appear in column 3", []),  # spaces only, no phone word
        ("call me on 317 893 6654", ["phone"]),
        ("released 2024-03-15, version 10.15.7", []),
        ("ISBN 978-0-306-40615-7", []),
        ("card 4111 1111 1111 1111 on file", ["credit_card"]),
        ("card 4111 1111 1111 1112 on file", []),  # Luhn fails
        ("order 4111111111111111 shipped", []),  # an id after an id word
        ("IBAN DE89 3704 0044 0532 0130 00.", ["iban"]),
        ("IBAN DE89 3704 0044 0532 0130 01.", []),  # mod-97 fails
        ("see icon@2x.png", []),
        ("password: correct horse", []),
        ("password: Summer2024!", ["api_key"]),
        ("the update-passwd is single-threaded", []),
        ("tokenizer: meta-llama/Llama-2-7b-hf", []),
        ("api_key = os.environ['API_KEY']", []),
        ("api_key: [REDACTED:api_key]", []),
        ("commit 9fceb02d0ae598e95dc970b74767f19372d61af8 fixed it", []),
        ("secret = 9fceb02d0ae598e95dc970b74767f19372d61af8", ["api_key"]),  # next to a keyword
        ("getUserAccountSettingsFromDatabase2024 is too long", []),
        ("https://user:hunter2hunter2@example.com/x", ["api_key"]),
        ("-----BEGIN RSA PRIVATE KEY----- is the first line of the file", []),
        ("Authorization: Basic dXNlcjpodW50ZXIy", ["api_key"]),  # user:hunter2
        ("the Basic Multilingual Plane", []),
        ("the +000000120 alignment", []),
        ("NL91 ABNA 0417 1643 01 has a typo", []),  # not an IBAN, and its tail is no phone
        ("call 0044 20 7946 0958 from abroad", ["phone"]),
        ("ref 0044 20 7946 0958 from abroad", []),  # "00" + country code needs a phone word
        ("AB76 3674 8417 3755 75", []),  # Luhn-valid Diners digits, but not a card's grouping
    ],
)
def test_rules_by_hand(text, kinds):
    assert [f.kind for f in scan_text(text)] == kinds


# --- the demo corpus -------------------------------------------------------------------------


def test_demo_corpus_finds_exactly_the_planted_secrets():
    records, truth = generate_corpus_with_truth(7, 3000)
    report = scan_records([r["id"] for r in records], [r["text"] for r in records])
    assert report.flagged_ids == truth["secret_ids"]
    secrets = truth[
        "secrets"
    ]  # id -> (kind, value); kinds email, stripe_key, aws_key, github_token
    assert report.ids_by_kind["email"] == sorted(i for i, (k, _) in secrets.items() if k == "email")
    assert report.ids_by_kind["api_key"] == sorted(
        i for i, (k, _) in secrets.items() if k != "email"
    )
    for kind in ("credit_card", "iban", "phone", "private_key"):
        assert report.ids_by_kind[kind] == []


# --- speed -----------------------------------------------------------------------------------


def test_scan_speed_on_short_documents():
    """Measured on the 2-core dev machine: 40,000-75,000 demo documents (250 characters) a
    second on one core, so 100k documents take 1.5-2.5 s; documents that each hold a secret
    scan at 10,000-20,000 a second. The bound, 5,000 a second (100k in 20 s), leaves room for a
    busy CI runner and still catches a regex that backtracks."""
    records, _ = generate_corpus_with_truth(7, 3000)
    texts = [r["text"] for r in records] * 4
    start = time.perf_counter()
    for text in texts:
        scan_text(text)
    rate = len(texts) / (time.perf_counter() - start)
    print(f"\nscan speed: {rate:,.0f} docs/s")
    assert rate >= 5_000, f"{rate:,.0f} docs/s"


@pytest.mark.parametrize(
    "text",
    [
        "1 " * 50_000,
        "a." * 50_000,
        "+1 " * 30_000,
        "-----BEGIN RSA PRIVATE KEY-----\n" * 2_000,
        "x" * 100_000 + "@",
        "password=" * 10_000,
        "ABCD" * 25_000,
        "4111 " * 20_000,
        "a_b-" * 25_000 + "key",
    ],
    ids=["digits", "dots", "plus", "begins", "at", "assign", "upper", "cards", "ident"],
)
def test_pathological_inputs_scan_in_linear_time(text):
    start = time.perf_counter()
    scan_text(text)
    assert time.perf_counter() - start < 2.0
