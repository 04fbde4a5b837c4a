"""Build the real-text sample that tests/data/test_privacy_real.py measures the privacy scanner
on: public text installed on this machine by apt, cut into documents, as JSON lines
``{"id", "text"}`` (ids are stable: source/file/index). Nothing of it is committed; the labels
(tests/data/privacy_labels.json: document id, span, kind) are.

Sources (install: ``apt-get install fortunes libxmlsec1-dev``; the changelogs and copyright
files come with every Debian package):
- fortune cookies (/usr/share/games/fortunes) that contain "@": Usenet signatures with
  Message-IDs (``-- Larry Wall in <199708261932.MAA05218@wall.org>``) and e-mail addresses;
- 40 Debian changelog entries drawn with a fixed seed (maintainer addresses, bug numbers,
  versions, hashes);
- the Debian copyright files that mention a phone, fax or telephone, and 10 more drawn with
  the seed (addresses of authors, postal addresses, phone numbers, years);
- the xmlsec1 examples (/usr/share/doc/libxmlsec1-dev/examples/*.pem, *.xml): a real RSA
  private key, certificates and base64 signatures, which are not secrets.

Usage: python scripts/corpora/privacy_sample.py OUT.jsonl
Exit status 3 with a one-line reason when a source is missing.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import sys
import tempfile
from pathlib import Path

DOC = Path("/usr/share/doc")
FORTUNES = Path("/usr/share/games/fortunes")
EXAMPLES = DOC / "libxmlsec1-dev" / "examples"
SEED = 11
PHONE_WORD = re.compile(r"(?i)\b(phone|fax|telephone|tel\.)")


def fortunes() -> list[tuple[str, str]]:
    out = []
    for path in sorted(FORTUNES.iterdir()):
        if path.suffix or not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for i, chunk in enumerate(text.split("\n%\n")):
            if "@" in chunk:
                out.append((f"fortune/{path.name}/{i}", chunk.strip("\n")))
    return out


def changelog_entries(rng: random.Random, n: int) -> list[tuple[str, str]]:
    entries = []
    for path in sorted(DOC.glob("*/changelog.Debian.gz")):
        if path.is_symlink():
            continue
        text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
        for i, chunk in enumerate(re.split(r"\n(?=\S+ \([^)]+\) )", text)):
            entries.append((f"changelog/{path.parent.name}/{i}", chunk.strip("\n")))
    return sorted(rng.sample(entries, min(n, len(entries))))


def copyrights(rng: random.Random, n_more: int) -> list[tuple[str, str]]:
    files = sorted(p for p in DOC.glob("*/copyright") if not p.is_symlink())
    texts = {p: p.read_text(encoding="utf-8", errors="replace") for p in files}
    seen, picked = set(), []
    for p in files:  # one copy of each text (binary packages of one source share it)
        if texts[p] not in seen and PHONE_WORD.search(texts[p]):
            seen.add(texts[p])
            picked.append(p)
    rest = [p for p in files if texts[p] not in seen and p not in picked]
    picked += rng.sample(rest, min(n_more, len(rest)))
    return [(f"copyright/{p.parent.name}", texts[p]) for p in sorted(picked)]


def examples() -> list[tuple[str, str]]:
    paths = sorted([*EXAMPLES.glob("*.pem"), *EXAMPLES.glob("*.xml")])
    return [(f"xmlsec/{p.name}", p.read_text(encoding="utf-8", errors="replace")) for p in paths]


def build() -> list[tuple[str, str]]:
    rng = random.Random(SEED)
    return fortunes() + changelog_entries(rng, 40) + copyrights(rng, 10) + examples()


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    for need in (FORTUNES, EXAMPLES):
        if not need.is_dir():
            print(f"privacy_sample: {need} is missing (apt-get install fortunes libxmlsec1-dev)",
                  file=sys.stderr)  # fmt: skip
            return 3
    out = Path(argv[0])
    out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=".privacy-sample-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for doc_id, text in build():
            f.write(json.dumps({"id": doc_id, "text": text}, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
