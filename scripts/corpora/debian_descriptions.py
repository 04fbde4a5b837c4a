"""Shape the Debian package descriptions installed on this machine into prompt → response corpora
for the generation task (model.task: generation).

dpkg keeps a stanza per installed package in /var/lib/dpkg/status (`apt-get install <package>`
adds more). Two tasks come from the same stanzas:

    describe  prompt: the package's long description; response: its one-line synopsis (the
              maintainer's own summary of that text): free-form, judged by token F1
    extract   prompt: the stanza's fields as a maintainer writes them; response: a JSON object
              with package, version, section, priority and architecture: extraction, judged by
              JSON field scores

Each record: id (package:architecture), prompt, response, source (the source package, the group:
binary packages built from one source share wording, so they stay in one split). Packages whose
long description is empty or a placeholder are left out of `describe`.

Usage: python scripts/corpora/debian_descriptions.py OUT.jsonl --task describe|extract
       [--status /var/lib/dpkg/status] [--min-records N]
Exit status 3 (and a one-line reason) when fewer than --min-records records come out.
The data is never committed: run this to make it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

EXTRACTED = ("package", "version", "section", "priority", "architecture")


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
    lines = [f"{k}: {fields[k]}" for k in shown if k in fields]
    answer = {k: fields.get(k.capitalize()) for k in EXTRACTED}
    return {
        "prompt": "Give package, version, section, priority and architecture as JSON:\n"
        + "\n".join(lines),
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--task", choices=["describe", "extract"], required=True)
    ap.add_argument("--status", type=Path, default=Path("/var/lib/dpkg/status"))
    ap.add_argument("--min-records", type=int, default=100)
    args = ap.parse_args(argv)
    try:
        text = args.status.read_text(encoding="utf-8", errors="replace")
    except OSError as e:
        print(f"{args.status}: cannot read ({e.strerror})", file=sys.stderr)
        return 2
    rows = records(text, args.task)
    if len(rows) < args.min_records:
        print(
            f"{args.status}: {len(rows)} records for --task {args.task}, fewer than "
            f"--min-records {args.min_records}; install more packages",
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
