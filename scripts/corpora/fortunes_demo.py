"""Shape the demo corpus, data/raw/fortunes.jsonl, from the fortune files Debian's `fortunes`
package installs (/usr/share/games/fortunes; BSD licence, see data/raw/fortunes.LICENSE).

The demo campaign classifies a quotation by the fortune file it comes from: five files whose
topics a reader can tell apart (computers, science, politics, work, art), 3,212 quotations.
Each one becomes a record:

    id        <file>-<index of the quotation in the file, from 0000>
    text      the quotation with its whitespace collapsed to single spaces
    label     the file (computers, science, politics, work, art)
    author    the attribution after the last "--" (e.g. "Mark Twain"), or the id when there is
              none: quotations of one author stay in one split
    created_at  null (the files carry no dates)

Quotations longer than 600 characters (poems, dialogues) are left out. The labels are the
files' own and noisy (a quotation on work may sit in `politics`): a realistic classification
task on which a pretrained encoder beats a bag of words, since most words occur once.
The committed file is this script's output on fortunes 1:1.99.1; rerun it to check:

    python scripts/corpora/fortunes_demo.py data/raw/fortunes.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

FILES = ("computers", "science", "politics", "work", "art")
MAX_CHARS = 600
ATTRIBUTION = re.compile(r"--\s*([^,\[\(]+?)\s*(?:[,\[\(].*)?$")


def records(root: Path) -> list[dict]:
    out = []
    for name in FILES:
        path = root / f"{name}.u8" if (root / f"{name}.u8").exists() else root / name
        if not path.exists():
            sys.exit(f"error: {path}: not found (apt-get install fortunes)")
        text = path.read_text(encoding="utf-8", errors="replace")
        for i, entry in enumerate(text.split("\n%\n")):
            body = " ".join(entry.replace("\n%", "").split())
            if not body or len(body) > MAX_CHARS:
                continue
            rid = f"{name}-{i:04d}"
            tail = body.rsplit("--", 1)
            found = ATTRIBUTION.search("--" + tail[1]) if len(tail) == 2 else None
            author = found.group(1).strip() if found and found.group(1).strip() else rid
            out.append({"id": rid, "text": body, "label": name, "author": author,
                        "created_at": None})  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("/usr/share/games/fortunes"))
    args = parser.parse_args()
    rows = records(args.root)
    data = "".join(json.dumps(r, ensure_ascii=False, sort_keys=False) + "\n" for r in rows)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=".fortunes.")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(data)
    os.replace(tmp, args.out)
    print(f"{args.out}: {len(rows)} records")


if __name__ == "__main__":
    main()
