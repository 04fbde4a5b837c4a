"""Shape the Debian package changelogs installed on this machine into a campaign corpus.

Every Debian package ships /usr/share/doc/<package>/changelog.Debian.gz (installed by apt with
the package; `apt-get install <package>` adds more). Each entry becomes one record:

    id        <source package>/<version>
    text      the entry's change lines (the "* ..." bullets), without the signature line
    label     the entry's urgency (low, medium, high; critical and emergency count as high)
    author    the source package (the natural group: entries of one package share wording)
    created_at  the signature's date, ISO 8601 UTC

Binary packages built from one source share one changelog: each source is read once. Entries
such as "New upstream release." repeat across hundreds of packages, so duplicate chains join
most packages into one leak unit: the corpus that split.dedup.policy ``drop`` is for.

Usage: python scripts/corpora/debian_changelogs.py OUT.jsonl [--doc-root /usr/share/doc]
       [--max-sources N]
Exit status 3 (and a one-line reason) when fewer than --min-sources changelogs are installed.
The data is never committed: run this to make it.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import sys
import tempfile
from datetime import UTC
from email.utils import parsedate_to_datetime
from pathlib import Path

HEADER = re.compile(r"^(\S+) \(([^)]+)\) [^;]+;.*?urgency=(\w+)", re.IGNORECASE)
TRAILER = re.compile(r"^ -- (.+?) <([^>]*)>\s+(.+)$")
URGENCY = {"low": "low", "medium": "medium", "high": "high", "critical": "high",
           "emergency": "high"}  # fmt: skip


def entries(text: str):
    """(source, version, urgency, body, date text) per entry of one changelog."""
    head, body = None, []
    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            head, body = m.groups(), []
            continue
        t = TRAILER.match(line)
        if t and head is not None:
            yield (*head, "\n".join(x.strip() for x in body if x.strip()), t.group(3))
            head = None
        elif head is not None:
            body.append(line)


def records(doc_root: Path, max_sources: int | None):
    seen: set[str] = set()
    ids: set[str] = set()  # a renamed source's old entries can be in two changelogs
    out = []
    for path in sorted(doc_root.glob("*/changelog.Debian.gz")):
        try:
            text = gzip.open(path, "rt", encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        rows = list(entries(text))
        if not rows or rows[0][0] in seen:
            continue
        source = rows[0][0]
        if max_sources is not None and len(seen) >= max_sources:
            break
        seen.add(source)
        for src, version, urgency, body, date in rows:
            record_id = f"{src}/{version}"
            label = URGENCY.get(urgency.lower())
            if not body or label is None or record_id in ids:
                continue
            try:
                when = parsedate_to_datetime(date).astimezone(UTC).isoformat()
            except (TypeError, ValueError):
                continue
            ids.add(record_id)
            out.append(
                {
                    "id": record_id,
                    "text": body,
                    "label": label,
                    "author": source,
                    "created_at": when,
                }  # fmt: skip
            )
    return out, len(seen)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--doc-root", type=Path, default=Path("/usr/share/doc"))
    ap.add_argument("--max-sources", type=int, default=None)
    ap.add_argument("--min-sources", type=int, default=50)
    args = ap.parse_args(argv)
    rows, n_sources = records(args.doc_root, args.max_sources)
    if n_sources < args.min_sources:
        print(
            f"debian_changelogs: only {n_sources} source packages with a changelog.Debian.gz "
            f"under {args.doc_root} (need {args.min_sources})",
            file=sys.stderr,
        )
        return 3
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=".changelogs-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, args.out)
    print(f"wrote {len(rows)} entries of {n_sources} source packages to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
