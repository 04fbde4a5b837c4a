"""Detectors of the privacy scanner: validators, patterns, and one function per kind that
yields ``(kind, start, end)`` candidates; ``campaign.data.privacy`` resolves overlaps, reports
and redacts.

Kinds and what counts as one:

- ``email``: ``local@domain.tld`` with a letter-only TLD (not an image or script extension),
  unless it is a Message-ID.
- ``message_id``: ``<local@domain>`` after a header or citation word, or an id whose local
  part has a shape mail and news software generates, bracketed or not (see ``_message_ids``).
  Not a mailbox: its own kind, with its own policy (``data.privacy_by_kind``).
- ``phone``: ``+CC`` numbers with 8-15 digits (E.164, or split by spaces, dots, dashes and one
  ``(area)`` group). National numbers with one kind of separator: North American with dashes,
  dots or ``(area)`` (``(415) 555-2671``, ``415.555.2671``, ``1-800-555-0199``); trunk-prefixed
  European numbers with 10-12 digits in up to three groups or in pairs (``020 7946 0958``,
  ``030 12345678``, ``01 23 45 67 89``). Other 9-12 digit groupings, spaced ``415 555 2671``
  and ``00`` + country code count only after a phone word (phone, tel, mobile, call, fax,
  "my number", "reach me", ...) in the 40 characters before. Digit runs without separators
  count only with ``+``: plain long numbers are ids. Numbers after "ISBN" or inside an
  account-code-like string (``NL91 ABNA 0417 ...``) are not phones. Every candidate must then
  be a VALID number by the phonenumbers library (an assigned range of its country, national
  numbers read as numbers of ``PHONE_REGIONS``): "(511) 338-0959" has the shape but no area
  code 511 exists.
- ``credit_card``: 13-19 digits, contiguous or printed in the usual groups (4-4-4-4, Amex
  4-6-5, Diners 4-6-4, ...) with one kind of separator, that pass the Luhn check and start with a
  known issuer prefix allowing that length. Contiguous runs right after an id word (order,
  invoice, tracking, ref, ...) are ids, not cards.
- ``iban``: country code with that country's IBAN length, two check digits and the BBAN,
  compact or in groups of four, whose mod-97 check is 1.
- ``api_key``: tokens with a fixed prefix, found by detect-secrets' plugins (AWS, Azure storage,
  Discord, GitHub, GitLab, Mailchimp, OpenAI, PyPI, SendGrid, Slack, Square, Stripe, Telegram,
  Twilio) and by ``_PREFIXED_TOKEN_PATTERNS`` for the formats they lack (Google, Hugging Face,
  npm, Stripe test keys, GitHub fine-grained, OpenAI project and Anthropic keys, JWTs checked
  with detect-secrets' JWT validator); passwords in ``scheme://user:password@host``, HTTP
  ``Basic`` credentials, values assigned to a secret-ish name (``api_key = ...``,
  ``"password": "..."``, ``Bearer ...``) that look random (passwords: that mix letters with
  digits or symbols), 40-character AWS-secret-like strings near "aws"/"secret", and standalone
  strings of 24+ characters mixing upper case, lower case and digits with high entropy, unless
  they lie in a block of base64 lines or in an XML element of encoded data (certificates,
  signatures, digests, ciphertexts). Hex hashes and UUIDs count
  only when assigned to a secret-ish name.
- ``private_key``: ``-----BEGIN ... PRIVATE KEY-----`` through its END line (or, if the END line
  is missing, through the base64 body that follows).
"""

from __future__ import annotations

import base64
import math
import re
from collections import Counter
from collections.abc import Iterator
from functools import cache

# --- validators ------------------------------------------------------------------------------


def luhn_valid(digits: str) -> bool:
    """Luhn (mod 10) check of a string of decimal digits; False for anything else."""
    if not digits.isascii() or not digits.isdigit():
        return False
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Registered IBAN lengths per country (SWIFT IBAN registry).
IBAN_LENGTHS = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22,
    "BI": 27, "BR": 29, "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27,
    "DK": 18, "DO": 28, "EE": 20, "EG": 29, "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27,
    "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28, "HR": 21, "HU": 28, "IE": 22,
    "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28, "LC": 32,
    "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19,
    "MN": 20, "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24,
    "PL": 28, "PS": 29, "PT": 25, "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31,
    "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27, "SO": 23, "ST": 25, "SV": 28, "TL": 23,
    "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip


def iban_valid(iban: str) -> bool:
    """ISO 13616 check: known country, its length, and mod-97 of the rearranged number == 1.

    Spaces are ignored; letters must be upper case.
    """
    compact = iban.replace(" ", "")
    if not re.fullmatch(r"[A-Z]{2}\d{2}[A-Z0-9]+", compact):
        return False
    if IBAN_LENGTHS.get(compact[:2]) != len(compact):
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


# Issuer prefixes (IIN ranges) and the lengths cards with them have.
_CARD_BRANDS: tuple[tuple[tuple[int, int], int, tuple[int, ...]], ...] = (
    ((4, 4), 1, (13, 16, 19)),  # Visa
    ((51, 55), 2, (16,)),  # Mastercard
    ((2221, 2720), 4, (16,)),  # Mastercard 2-series
    ((34, 34), 2, (15,)),  # American Express
    ((37, 37), 2, (15,)),
    ((300, 305), 3, (14, 16, 17, 18, 19)),  # Diners Club
    ((36, 36), 2, (14, 15, 16, 17, 18, 19)),
    ((38, 39), 2, (16, 17, 18, 19)),
    ((6011, 6011), 4, (16, 17, 18, 19)),  # Discover
    ((644, 649), 3, (16, 17, 18, 19)),
    ((65, 65), 2, (16, 17, 18, 19)),
    ((3528, 3589), 4, (16, 17, 18, 19)),  # JCB
    ((62, 62), 2, (16, 17, 18, 19)),  # UnionPay
    ((2200, 2204), 4, (16, 17, 18, 19)),  # Mir
    ((5018, 5018), 4, (12, 13, 14, 15, 16, 17, 18, 19)),  # Maestro
    ((5020, 5020), 4, (12, 13, 14, 15, 16, 17, 18, 19)),
    ((5038, 5038), 4, (12, 13, 14, 15, 16, 17, 18, 19)),
    ((5893, 5893), 4, (12, 13, 14, 15, 16, 17, 18, 19)),
    ((6304, 6304), 4, (12, 13, 14, 15, 16, 17, 18, 19)),
    ((6759, 6763), 4, (12, 13, 14, 15, 16, 17, 18, 19)),
)


def card_number_plausible(digits: str) -> bool:
    """Luhn-valid and starting with a known issuer prefix that allows this length."""
    if not 13 <= len(digits) <= 19 or not luhn_valid(digits):
        return False
    for (low, high), width, lengths in _CARD_BRANDS:
        if len(digits) in lengths and low <= int(digits[:width]) <= high:
            return True
    return False


def shannon_entropy(value: str) -> float:
    """Bits per character of the value's own character distribution."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


_WORDISH = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def _segment_rate(value: str) -> float:
    """Word-like pieces (Capitalized or lower runs, UPPER runs, digit runs) per alphanumeric.

    About 0.55 for random base62 strings, 0.5 for hex, 0.15-0.3 for identifiers and
    camelCase, so it separates generated tokens from names people type.
    """
    pieces = _WORDISH.findall(value)
    alnum = sum(map(len, pieces))
    return len(pieces) / alnum if alnum else 0.0


_LOWER = frozenset("abcdefghijklmnopqrstuvwxyz")
_UPPER = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
_DIGIT = frozenset("0123456789")
_ALNUM = _LOWER | _UPPER | _DIGIT


def _classes(value: str) -> tuple[bool, bool, bool, bool]:
    """Whether the value has ASCII lower case, upper case, digits, anything else."""
    chars = set(value)
    return (
        not chars.isdisjoint(_LOWER),
        not chars.isdisjoint(_UPPER),
        not chars.isdisjoint(_DIGIT),
        not chars <= _ALNUM,
    )


_PLACEHOLDER = re.compile(
    r"(?i)redacted|xxxx|\*\*\*|\.\.\.|your|example|placeholder|changeme|dummy|sample|"
    r"\benv\b|environ|getenv|process\.env|secrets\.|settings\.|config\.|vault|"
    r"^\$[A-Z_][A-Z0-9_]*$|\$\{|\$\(|%s|%\(|\{|<"
)
_PLACEHOLDER_WORDS = {"password", "passwd", "secret", "pass", "none", "null", "true", "false"}


def _placeholder(value: str) -> bool:
    return value.lower() in _PLACEHOLDER_WORDS or bool(_PLACEHOLDER.search(value))


_PART_SPLIT = re.compile(r"[-_./:+@]+")
_WORD_PART = re.compile(r"[A-Z]?[a-z]+|[A-Z]+|\d+|\w{1,3}")


def _wordy(value: str) -> bool:
    """Made of words and short pieces joined by separators: a name, path or model id such as
    ``settings.API_KEY`` or ``meta-llama/Llama-2-7b-hf``, not a generated token."""
    parts = [p for p in _PART_SPLIT.split(value) if p]
    return len(parts) >= 2 and all(_WORD_PART.fullmatch(p) for p in parts)


def _random_token(value: str, min_len: int = 16) -> bool:
    """A value assigned to a secret-ish name that looks generated rather than typed."""
    if len(value) < min_len or _placeholder(value):
        return False
    lower, upper, digit, _ = _classes(value)
    if (lower + upper + digit) < 2:
        return False
    if _wordy(value):
        return False
    return shannon_entropy(value) >= 3.0 and _segment_rate(value) >= 0.3


def _password(value: str) -> bool:
    """A value assigned to a password-ish name: 8+ characters with letters and digits, or three
    character classes and not a hyphenated or CONSTANT_CASE name ("single-threaded")."""
    if len(value) < 8 or _placeholder(value) or len(set(value)) < 4:
        return False
    lower, upper, digit, other = _classes(value)
    if digit and (lower or upper):
        return True
    if lower + upper + digit + other >= 3 and not _wordy(value):
        return True
    # Letters only: mixed case at random ("jSrPZLNrSc"), not Words ("PasswordRequired").
    return lower and upper and not other and _segment_rate(value) >= 0.3


def _basic_credentials(value: str) -> bool:
    """HTTP Basic credentials: base64 of printable ``user:password``."""
    try:
        decoded = base64.b64decode(value, validate=True).decode("ascii")
    except (ValueError, UnicodeDecodeError):
        return False
    user, colon, password = decoded.partition(":")
    return bool(colon and user and password and decoded.isprintable())


_TOKEN_SPLIT = re.compile(r"[/+_-]+")


def _standalone_token(value: str) -> bool:
    """A long string, not next to any keyword, that is almost surely a generated secret."""
    core = value.rstrip("=")
    if len(core) < 24:
        return False
    # The classes must mix inside one piece: "tests/gpgsm/32100C27173EF6E9..." mixes a
    # lower-case path with an upper-case fingerprint, which is not a secret.
    longest = max(_TOKEN_SPLIT.split(core), key=len)
    if len(longest) < 10 or not all(_classes(longest)[:3]):
        return False
    # Thresholds keep ~90% of random base62 strings of 24 characters (99% from 32) and reject
    # camelCase identifiers, whose word-sized pieces give a segment rate of 0.2-0.3 and whose
    # English letters stay near 4.1 bits per character however long they get.
    entropy, segments = shannon_entropy(core), _segment_rate(core)
    if entropy < min(4.0, math.log2(len(core)) - 0.65):
        return False
    return segments >= 0.38 or (segments >= 0.3 and entropy >= 4.5)


_FOLDED_RUN = re.compile(r"[a-z0-9]{20,}")
_HEX = frozenset("0123456789abcdef")


def folded_tokens(value: str) -> Iterator[tuple[int, int]]:
    """Spans of generated secrets as a lowercasing tokenizer stores them: runs of 20+ lower-case
    letters and digits that mix both at random (``akiaq7zl2mxn4tkb8rwc``, the tail of a
    lower-cased GitHub token). Case was the main sign of a generated string; without it, the
    run's entropy, its digits in more than one place and its few vowels still tell it from
    words run together with numbers (``windows10professional64bit``: 40% of its letters are
    vowels, as in English; 19% of random letters are). Hex-only runs are hashes (the rule for
    hashes elsewhere: they count only when assigned to a secret name).

    Random base62 strings lower-cased: 90% found at 20 characters, 96% at 32 (the others have no
    digit, digits in one place, or many vowels by chance); none of the 30,522 tokens of BERT's
    uncased vocabulary."""
    for m in _FOLDED_RUN.finditer(value):
        run = m.group()
        lower, _, digit, _ = _classes(run)
        if not (lower and digit) or set(run) <= _HEX:
            continue
        letters = [c for c in run if c in _LOWER]
        vowels = sum(c in "aeiou" for c in letters) / len(letters)
        entropy_floor = min(3.3, math.log2(len(run)) - 1.0)
        pieces = len(_WORDISH.findall(run))  # letter and digit runs: 3+ is digits in 2 places
        if vowels <= 0.34 and pieces >= 3 and shannon_entropy(run) >= entropy_floor:
            yield m.start(), m.end()


# --- patterns --------------------------------------------------------------------------------

_KEY_HEADER = r"-----BEGIN (?:[A-Z0-9]+ ){0,2}PRIVATE KEY(?: BLOCK)?-----"
# Without its END line (a truncated paste): the base64 lines that follow, up to padding.
_KEY_BODY = r"(?:(?:\s|\\n)*[A-Za-z0-9+/=]{16,})+(?:(?:\s|\\n)*[A-Za-z0-9+/]{0,15}={1,2})?"
_PRIVATE_KEY = re.compile(
    _KEY_HEADER
    + r"(?:.{0,16384}?-----END (?:[A-Z0-9]+ ){0,2}PRIVATE KEY(?: BLOCK)?-----|"
    + _KEY_BODY
    + ")",
    re.DOTALL,
)
_PRIVATE_KEY_NO_END = re.compile(_KEY_HEADER + _KEY_BODY)

# Tokens with a fixed, documented prefix. Most formats come from detect-secrets' plugins
# (``_DETECT_SECRETS``); this list keeps only what they lack or print narrower: Google API keys,
# Stripe test and restricted keys and webhook secrets, Slack tokens with upper case, GitHub
# fine-grained tokens, Hugging Face, bare npm tokens, OpenAI project and Anthropic keys, and JWT
# spans (validated with detect-secrets' JWT check).
_PREFIXED_TOKEN_PATTERNS = (
    r"AIza[0-9A-Za-z_-]{35}",  # Google API key
    r"(?:sk|rk)_(?:live|test)_[0-9A-Za-z]{24,99}",  # Stripe secret / restricted key
    r"whsec_[0-9A-Za-z]{32,}",  # Stripe webhook secret
    r"xox[abposre]-[0-9A-Za-z]{1,}(?:-[0-9A-Za-z]{1,}){1,5}",  # Slack token
    r"github_pat_[0-9A-Za-z_]{22,255}",  # GitHub fine-grained token
    r"hf_[0-9A-Za-z]{30,}",  # Hugging Face token
    r"npm_[0-9A-Za-z]{36}",  # npm token
    r"sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-)?[0-9A-Za-z_-]{32,}",  # OpenAI, Anthropic
    r"eyJ[0-9A-Za-z_-]{8,}\.eyJ[0-9A-Za-z_-]{8,}\.[0-9A-Za-z_-]*",  # JWT
)
_TOKEN_PREFIXES = (
    "AIza", "sk_", "rk_", "whsec_", "xox", "github_pat_", "hf_", "npm_", "sk-", "eyJ",
)  # fmt: skip
_PREFIXED_TOKEN = re.compile(
    r"(?<![0-9A-Za-z_-])(?:" + "|".join(_PREFIXED_TOKEN_PATTERNS) + r")(?![0-9A-Za-z_-])"
)

# detect-secrets plugins whose patterns find a token by its format alone: (module, class,
# substrings one of which a text must hold before the patterns run, capture group of the
# secret (0: the whole match)). The keyword, entropy and private-key plugins work per line
# without positions; this module's own rules below cover those cases with positions.
_DETECT_SECRETS = (
    ("aws", "AWSKeyDetector", ("AKIA", "ASIA", "A3T", "ABIA", "ACCA", "aws", "AWS"), None),
    ("azure_storage_key", "AzureStorageKeyDetector", ("AccountKey=",), 0),
    ("discord", "DiscordBotTokenDetector", (".",), 0),
    ("github_token", "GitHubTokenDetector", ("gh",), 0),
    ("gitlab_token", "GitLabTokenDetector", ("gl", "GR1348941"), 0),
    ("mailchimp", "MailchimpDetector", ("-us",), 0),
    ("openai", "OpenAIDetector", ("T3BlbkFJ",), 0),
    ("pypi_token", "PypiTokenDetector", ("pypi-",), 0),
    ("sendgrid", "SendGridDetector", ("SG.",), 0),
    ("slack", "SlackDetector", ("xox", "hooks.slack"), 0),
    ("square_oauth", "SquareOAuthDetector", ("sq0csp-",), 0),
    ("stripe", "StripeDetector", ("k_live_",), 0),
    ("telegram_token", "TelegramBotTokenDetector", (":",), 0),
    ("twilio", "TwilioKeyDetector", ("AC", "SK"), 0),
)


@cache
def _detect_secrets_patterns() -> tuple[tuple[tuple[str, ...], re.Pattern, int], ...]:
    """(guard substrings, compiled pattern, group) for each pattern of the plugins above. AWS's
    second pattern (a 40-character secret near "aws" and a key word) reports its group 1."""
    import importlib

    out = []
    for module, name, guards, group in _DETECT_SECRETS:
        plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), name)
        for pattern in plugin.denylist:
            g = group if group is not None else min(pattern.groups, 1)
            out.append((guards, pattern, g))
    return tuple(out)


@cache
def _jwt_check():
    from detect_secrets.plugins.jwt import JwtTokenDetector

    return JwtTokenDetector.is_formally_valid


_TOKEN_CHAR = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _detect_secrets_tokens(text: str) -> Iterator[_Candidate]:
    """Tokens detect-secrets' plugins recognize, where they stand alone (not the middle of a
    longer word)."""
    for guards, pattern, group in _detect_secrets_patterns():
        if not any(g in text for g in guards):
            continue
        for m in pattern.finditer(text):
            start, end = m.span(group)
            if start < 0 or end - start < 16:
                continue
            if (start and text[start - 1] in _TOKEN_CHAR) or (
                end < len(text) and text[end] in _TOKEN_CHAR
            ):
                continue
            yield "api_key", start, end


# A secret-ish name (possibly inside a longer identifier like aws_secret_access_key or
# apiKey), an assignment, and the value.
_SECRET_NAME = (
    r"(?:[A-Za-z0-9]{1,40}[_.-]){0,6}"
    r"(?i:(?P<pw>passw(?:or)?d|pwd|passphrase)|api[_-]?key|apikey|secret|token|credentials?|auth"
    r"|key)"
    r"(?:[_.-][A-Za-z0-9]{1,40}|[A-Z][a-z0-9]{0,40}){0,6}"
)
_SECRET_WORDS = ("pass", "pwd", "key", "secret", "token", "credential", "auth")
_ASSIGNED = re.compile(
    r"(?<![A-Za-z0-9_.-])" + _SECRET_NAME + r"[\"']?[ \t]*(?:=|:=|=>|:|\bis\b)[ \t]*[\"'`]?"
    r"(?P<value>[^\s\"'`,;()<>\[\]{}]+)"
)
_AUTH_HEADER = re.compile(
    r"\b(?:(?P<bearer>[Bb]earer)|Basic)[ \t]+(?P<value>[A-Za-z0-9._~+/-]{12,}=*)(?![\w.~+/=-])"
)
_URL_PASSWORD = re.compile(r"\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]{1,64}:(?P<value>[^\s/@]{1,128})@")
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{40}(?![A-Za-z0-9+/=])")
_STANDALONE = re.compile(r"(?<![A-Za-z0-9+/=_.-])[A-Za-z0-9+/_-]{24,}={0,2}(?![A-Za-z0-9+/=_-])")

_EMAIL = re.compile(
    r"(?<![\w.%+-])[A-Za-z0-9][A-Za-z0-9._%+-]{0,63}@"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+(?P<tld>[A-Za-z]{2,24})"
    r"(?![\w-]|\.[A-Za-z0-9])"
)
_NOT_TLDS = {"png", "jpg", "jpeg", "gif", "svg", "webp", "bmp", "ico", "js", "css", "ts"}

_PHONE_INTL = re.compile(
    r"(?<![\w+])\+[1-9]\d{0,2}[ .-]?(?:\(\d{1,4}\)[ .-]?)?(?:\d[ .-]?){5,13}\d(?![\w]|[.,-]\d)"
)
_PHONE_NATIONAL = re.compile(
    r"(?<![\w+.,/:#-])(?:1[ .-])?(?:\(\d{2,5}\)[ ]?|\d{2,5}[ .-])(?:\d{2,8}[ .-]){0,4}\d{2,8}"
    r"(?![\w]|[.,:/-]\d)"
)
_PHONE_WORD = re.compile(
    r"(?i)(?:\b(?:phone|tel|telephone|mobile|cell|fax|whatsapp|call|text|sms|ring|dial|contact)"
    r"|\b(?:my|our|his|her|their|your) (?:\w+ )?number|\breach (?:me|us|him|her|them))\b"
    r"[^\n\d]{0,24}$"
)
_ISBN_WORD = re.compile(r"(?i)\bisbn(?:-1[03])?\b[^\n\d]{0,6}$")

_CARD = re.compile(
    r"(?<![\w.,+/#-])(?:\d{13,19}|\d{4}(?P<sep>[ -])\d{3,6}(?:(?P=sep)\d{2,6}){1,3})"
    r"(?![\w]|[.,/-]\d)"
)
# How card numbers are printed: 4-4-4-4 (+ 1-3 for 17-19 digits), Amex 4-6-5, Diners 4-6-4,
# 13-digit Visa 4-4-5 or 4-4-4-1.
_CARD_GROUPINGS = {
    (4, 4, 4, 4), (4, 4, 4, 4, 1), (4, 4, 4, 4, 2), (4, 4, 4, 4, 3),
    (4, 6, 5), (4, 6, 4), (4, 4, 5), (4, 4, 4, 1),
}  # fmt: skip
_ID_WORD = re.compile(
    r"(?i)\b(?:order|invoice|tracking|ticket|ref|reference|id|isbn|issn|doi|serial|shipment|"
    r"parcel|transaction)\b[^\n\d]{0,16}$"
)

_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?")


# Two or more consecutive lines of nothing but base64 (the body of a certificate, a public key,
# an XML signature): encoded data, whose lines look random but are no secret. Private keys are
# found by their BEGIN line, not here.
_BASE64_BLOCK = re.compile(
    r"(?m)^[ \t]*[A-Za-z0-9+/]{40,}={0,2}[ \t]*\n(?:[ \t]*[A-Za-z0-9+/]{4,}={0,2}[ \t]*(?:\n|\Z))+"
)
# The base64 content of an XML element that holds encoded data by name (XML-DSig and XML-Enc:
# DigestValue, SignatureValue, CipherValue, X509Certificate, ...).
_XML_DATA = re.compile(
    r"<(?P<tag>[\w:.-]*(?:Value|Certificate|Digest|Signature|Cipher)[\w.-]*)(?:\s[^>]*)?>"
    r"(?P<body>[A-Za-z0-9+/=\s]+)</(?P=tag)>"
)

# --- detectors: each yields (kind, start, end) candidates ------------------------------------

_Candidate = tuple[str, int, int]


def _private_keys(text: str) -> Iterator[_Candidate]:
    if "PRIVATE KEY" in text:
        pattern = _PRIVATE_KEY if "-----END" in text else _PRIVATE_KEY_NO_END
        for m in pattern.finditer(text):
            yield "private_key", m.start(), m.end()


def _tokens(text: str) -> Iterator[_Candidate]:
    # Substring tests first: they are ~10x cheaper than the regexes they guard.
    if any(prefix in text for prefix in _TOKEN_PREFIXES):
        for m in _PREFIXED_TOKEN.finditer(text):
            value = m.group()
            if value.startswith("sk-") and not all(_classes(value[3:])[:3]):
                continue  # "sk-" + a long hyphenated phrase is prose, not a key
            if value.startswith("eyJ") and not _jwt_check()(value):
                continue  # not base64url JSON: not a JWT
            yield "api_key", m.start(), m.end()
    yield from _detect_secrets_tokens(text)
    low = text.lower()
    if any(word in low for word in _SECRET_WORDS):
        for m in _ASSIGNED.finditer(text):
            value = m.group("value").rstrip(".:?")  # a sentence's end; "!" is common in passwords
            check = _password(value) if m.group("pw") else _random_token(value)
            if check:
                yield "api_key", m.start("value"), m.start("value") + len(value)
    if "earer" in text or "Basic" in text:
        for m in _AUTH_HEADER.finditer(text):
            value = m.group("value")
            if _random_token(value) if m.group("bearer") else _basic_credentials(value):
                yield "api_key", m.start("value"), m.end("value")
    if "://" in text:
        for m in _URL_PASSWORD.finditer(text):
            if not _placeholder(m.group("value")):
                yield "api_key", m.start("value"), m.end("value")
    if "aws" in low or "secret" in low:
        for m in _AWS_SECRET.finditer(text):
            window = low[max(0, m.start() - 80) : m.end() + 40]
            value = m.group()
            near = "aws" in window or "secret" in window
            if near and all(_classes(value)[:3]) and _random_token(value):
                yield "api_key", m.start(), m.end()
    blocks = [(b.start(), b.end()) for b in _BASE64_BLOCK.finditer(text)]
    if "</" in text:
        blocks += [(b.start("body"), b.end("body")) for b in _XML_DATA.finditer(text)]
    for m in _STANDALONE.finditer(text):
        if any(a <= m.start() < b for a, b in blocks):
            continue  # a line of encoded data (certificate, signature): not a secret
        if _standalone_token(m.group()):
            yield "api_key", m.start(), m.end()


def _emails(text: str) -> Iterator[_Candidate]:
    for m in _EMAIL.finditer(text):
        if m.group("tld").lower() not in _NOT_TLDS:
            yield "email", m.start(), m.end()


_MESSAGE_ID = re.compile(
    r"<(?P<local>[^<>\s@\"(),;:]{1,250})@(?P<domain>[^<>\s@\"(),;:]{1,250})"
    r"(?:>|(?=[ \t]*(?:\n|\Z)))"
)
_MESSAGE_ID_WORD = re.compile(
    r"(?i)(?:message-?id|references|in-reply-to|article|news:?|\bin|\bid)[\s:]{0,10}$"
)
# Local parts as mail and news software generates them (never a person's mailbox): sendmail
# queue ids, C News, mutt, Thunderbird, Gnus, Evolution, KMail, Eudora, git send-email, UUIDs,
# and long digit runs.
_MACHINE_LOCAL = re.compile(
    r"\d{12,14}\.[A-Z]{3}\d{5}"  # 199708261932.MAA05218
    r"|\d{4}[A-Z][a-z]{2}\d{1,2}\.\d{6}\.\d+"  # 1991Jul13.010945.19157
    r"|\d{14}\.G[A-Z]\d+"  # 20030905221055.GA22354
    r"|[0-9A-F]{8}\.\d{5,}"  # 514B5D8A.6040705
    r"|[\w.-]+\.(?:fsf|camel)"  # 87obi8u4h2.fsf, 1334571250.5056.52.camel
    r"|\d{6,8}\.[0-9A-Za-z]{8,}"  # 2008899.25OeoelVVA
    r"|\d+(?:\.\d+){3,}"  # 5.2.0.9.0.20030528094229.02924780
    r"|\d{14}\.\d+-\d+-.+"  # 20220210133844.46581-1-name
    r"|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"  # a UUID
    r"|\d{13,}"  # 2794651562684255
    r"|.*[$%=].*\d.*|.*\d.*[$%=].*"  # CAxxxx=yyyy (Gmail), digits with $ or %
)
_BARE_ID = re.compile(
    r"(?<![\w.+=$%-])(?P<local>[\w.$%=+-]{8,250})@(?P<domain>[\w-]+(?:\.[\w-]+)+)"
)


def _message_ids(text: str) -> Iterator[_Candidate]:
    """Message-IDs: ``<local@domain>`` after a header or citation word ("Message-ID:",
    "References:", "-- Larry Wall in <...>", "article <...>"; the closing bracket may be cut
    off at a line's end), and ``local@domain`` with or without brackets whose local part has a
    shape mail and news software generates (``_MACHINE_LOCAL``: ``199708261932.MAA05218``,
    ``1992Jul2.222039.26476``, ``514B5D8A.6040705``, ``87obi8u4h2.fsf``, a UUID, ...). A
    mailbox with digits in it (``s24211045@uni.example``) stays an e-mail address. The span is
    the id without the angle brackets; it is not an e-mail address."""
    seen = set()
    for m in _MESSAGE_ID.finditer(text):
        machine = _MACHINE_LOCAL.fullmatch(m.group("local"))
        if machine or _MESSAGE_ID_WORD.search(text, max(0, m.start() - 24), m.start()):
            seen.add(m.start("local"))
            yield "message_id", m.start("local"), m.end("domain")
    if "@" in text:
        for m in _BARE_ID.finditer(text):
            if m.start() not in seen and _MACHINE_LOCAL.fullmatch(m.group("local")):
                yield "message_id", m.start("local"), m.end("domain")


def _ibans(text: str) -> Iterator[_Candidate]:
    for m in _IBAN.finditer(text):
        raw = m.group()
        length = IBAN_LENGTHS.get(raw[:2])
        if length is None:
            continue
        # Cut at the country's length; the cut must fall where the printed number ends.
        end, seen = m.start(), 0
        while seen < length and end < m.end():
            seen += text[end] != " "
            end += 1
        if seen < length or (end < len(text) and text[end].isalnum()):
            continue
        if iban_valid(text[m.start() : end]):
            yield "iban", m.start(), end


# The start of an account code printed in groups ("NL91 ABNA "): digits after it belong to it.
_ACCOUNT_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: [A-Z0-9]{4}){0,6} $")


def _after_account_head(text: str, start: int) -> bool:
    return bool(_ACCOUNT_HEAD.search(text, max(0, start - 40), start))


def _cards(text: str) -> Iterator[_Candidate]:
    for m in _CARD.finditer(text):
        raw = m.group()
        digits = raw.replace(" ", "").replace("-", "")
        if not card_number_plausible(digits):
            continue
        if m.group("sep") and tuple(map(len, raw.split(m.group("sep")))) not in _CARD_GROUPINGS:
            continue
        if raw.isdigit() and _ID_WORD.search(text, max(0, m.start() - 24), m.start()):
            continue
        if _after_account_head(text, m.start()):
            continue
        yield "credit_card", m.start(), m.end()


def _phone_like_groups(groups: list[str]) -> bool:
    """Not a run of tiny groups ("1 2 3 4 5 6 7 8") and not one digit repeated."""
    return sum(len(g) == 1 for g in groups) <= 1 and len(set("".join(groups))) > 2


# National numbers (no country code) are read as numbers of these countries, in this order.
PHONE_REGIONS = ("US", "GB", "DE", "FR", "ES", "IT", "NL", "CH", "AT", "BE")


def phone_valid(raw: str) -> bool:
    """Whether phonenumbers (libphonenumber's metadata) holds the printed number to be a valid
    number: in an assigned range of its country and of a length the range allows. ``+CC`` and
    ``00CC`` numbers are read with their country code, others as national numbers of one of
    ``PHONE_REGIONS``."""
    import phonenumbers

    digits = "".join(ch for ch in raw if ch.isdigit())
    if raw.startswith("+"):
        candidates = [(raw, None)]
    elif digits.startswith("00"):
        candidates = [("+" + digits[2:], None)]
    else:
        candidates = [(raw, region) for region in PHONE_REGIONS]
    for number, region in candidates:
        try:
            parsed = phonenumbers.parse(number, region)
        except phonenumbers.NumberParseException:
            continue
        if phonenumbers.is_valid_number(parsed):
            return True
    return False


def _phones(text: str) -> Iterator[_Candidate]:
    """Phone numbers: the shapes and context rules of the module docstring find candidates;
    phonenumbers confirms each is a valid number (``phone_valid``)."""
    if "+" in text:
        for m in _PHONE_INTL.finditer(text):
            raw = m.group()
            groups = re.findall(r"\d+", raw)
            digits = "".join(groups)
            n = len(digits) - (1 if "(0)" in raw else 0)
            if 8 <= n <= 15 and len(groups[-1]) >= 2 and _phone_like_groups(groups[1:] or groups):
                if phone_valid(raw):
                    yield "phone", m.start(), m.end()
    for m in _PHONE_NATIONAL.finditer(text):
        if _national_phone(text, m) and not _after_account_head(text, m.start()):
            if phone_valid(m.group()):
                yield "phone", m.start(), m.end()


def _national_phone(text: str, m: re.Match) -> bool:
    raw = m.group()
    groups = re.findall(r"\d+", raw)
    digits = "".join(groups)
    if not 9 <= len(digits) <= 17 or not _phone_like_groups(groups):
        return False
    body = raw.split(")", 1)[1].lstrip() if raw.startswith("(") else raw
    if raw.startswith(("1-", "1 ", "1.")):
        body = body[2:]
        if body.startswith("("):
            body = body.split(")", 1)[1].lstrip()
    if len(set(re.findall(r"[ .-]", body))) > 1:
        return False  # mixed separators: a date next to a time, a range, a list
    if _ISBN_WORD.search(text, max(0, m.start() - 12), m.start()):
        return False
    national = groups[1:] if raw.startswith(("1-", "1 ", "1.")) else groups
    sizes = [len(g) for g in national]
    if sizes == [3, 3, 4] and national[0][0] in "23456789" and national[1][0] in "23456789":
        if "(" in raw or "-" in body or "." in body:
            return True  # North American: (NPA) NXX-XXXX; with spaces only, see below
    elif digits[0] == "0" and digits[1] != "0" and 10 <= len(digits) <= 12:
        if (len(groups) <= 3 and sizes[-1] >= 3) or set(sizes[1:]) == {2}:
            return True  # trunk-prefixed national number: 020 7946 0958, 01 23 45 67 89
    # Anything else (spaced 3-3-4, "00" + country code, other groupings) needs a phone word.
    if len(digits) <= 12 or (digits.startswith("00") and digits[2] != "0"):
        return bool(_PHONE_WORD.search(text, max(0, m.start() - 40), m.start()))
    return False
