"""Shape the Debian package descriptions installed on this machine into prompt → response corpora
for the generation task (model.task: generation).

dpkg keeps a stanza per installed package in /var/lib/dpkg/status (`apt-get install <package>`
adds more). Two tasks come from the same stanzas:

    describe  prompt: the package's long description; response: its one-line synopsis (the
              maintainer's own summary of that text): free-form, judged by token F1
    extract   prompt: the stanza's fields as a maintainer writes them (the description's
              synopsis line only: the long text holds none of the fields asked for, and it would
              triple the prompt's tokens); response: a JSON object with package, section,
              priority and architecture (the version stays in the prompt, unasked: a string of
              many short tokens that a small model's answer would spend most of its length on):
              extraction, judged by JSON field scores

Each record: id (package:architecture), prompt, response, source (the source package, the group:
binary packages built from one source share wording, so they stay in one split). Packages whose
long description is empty or a placeholder are left out of `describe`.

Sizing (the example campaigns in examples/ fit a loaded 2-core CPU this way): --max-words N
leaves out the records whose prompt is longer than N words (whole records, so no text is cut
mid-sentence), then --limit N keeps N of the rest, chosen by a hash of their id: the same
records on every machine with the same packages, spread over the alphabet, no random state.

Usage: python scripts/corpora/debian_descriptions.py OUT.jsonl --task describe|extract
       [--status /var/lib/dpkg/status] [--min-records N] [--max-words N] [--limit N]
Exit status 3 (and a one-line reason) when fewer than --min-records records come out.
The data is never committed: run this to make it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

EXTRACTED = ("package", "section", "priority", "architecture")


def stanzas(text: str):
    """Each stanza of a dpkg status file as {field: value}; a continuation line (leading space)
    belongs to the field above it, a lone "." is a paragraph break."""
    for block in text.split("\n\n"):
        fields: dict[str, str] = {}
        last = None
        for line in block.splitlines():
            if line.startswith((" ", "\t")) and last is not None:
                body = line[1:]
                fields[last] += "\n" + ("" if body.strip() == "." else body)
            elif ":" in line:
                last, _, value = line.partition(":")
                fields[last] = value.strip()
        if "Package" in fields and "Description" in fields:
            yield fields


def describe(fields: dict) -> dict | None:
    synopsis, _, long = fields["Description"].partition("\n")
    long = " ".join(long.split())
    if len(long.split()) < 8 or not synopsis.strip():
        return None  # nothing to summarize
    return {"prompt": f"Summarize in one line: {long}", "response": synopsis.strip()}


def extract(fields: dict) -> dict:
    shown = ["Package", "Version", "Section", "Priority", "Architecture", "Description"]
    synopsis = dict(fields, Description=fields["Description"].partition("\n")[0].strip())
    lines = [f"{k}: {synopsis[k]}" for k in shown if k in fields]
    answer = {k: fields.get(k.capitalize()) for k in EXTRACTED}
    return {
        "prompt": "Give package, section, priority and architecture as JSON:\n" + "\n".join(lines),
        "response": json.dumps(answer, sort_keys=True),
    }


def records(text: str, task: str) -> list[dict]:
    out = []
    for fields in stanzas(text):
        pair = describe(fields) if task == "describe" else extract(fields)
        if pair is None:
            continue
        source = fields.get("Source", fields["Package"]).split(" ")[0]
        record_id = f"{fields['Package']}:{fields.get('Architecture', 'all')}"
        out.append({"id": record_id, **pair, "source": source})
    return out


def sized(rows: list[dict], max_words: int | None, limit: int | None) -> list[dict]:
    """The records whose prompt has at most `max_words` words, then `limit` of them by the
    BLAKE2b hash of their id (file order kept)."""
    if max_words is not None:
        rows = [r for r in rows if len(r["prompt"].split()) <= max_words]
    if limit is not None and len(rows) > limit:
        rank = sorted(rows, key=lambda r: hashlib.blake2b(r["id"].encode()).hexdigest())
        chosen = {r["id"] for r in rank[:limit]}
        rows = [r for r in rows if r["id"] in chosen]
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--task", choices=["describe", "extract"], required=True)
    ap.add_argument("--status", type=Path, default=Path("/var/lib/dpkg/status"))
    ap.add_argument("--min-records", type=int, default=100)
    ap.add_argument("--max-words", type=int, help="leave out longer prompts (words)")
    ap.add_argument("--limit", type=int, help="keep this many records (chosen by id hash)")
    args = ap.parse_args(argv)
    try:
        text = args.status.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"{args.status}: cannot read ({e.strerror})", file=sys.stderr)
        return 2
    rows = sized(records(text, args.task), args.max_words, args.limit)
    if len(rows) < args.min_records:
        print(
            f"{args.status}: {len(rows)} records for --task {args.task}, fewer than "
            f"--min-records {args.min_records}; install more packages (or raise --max-words)",
            file=sys.stderr,
        )
        return 3
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=args.out.parent, prefix=".descriptions-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, args.out)
    print(f"{args.out}: {len(rows)} records ({args.task})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
