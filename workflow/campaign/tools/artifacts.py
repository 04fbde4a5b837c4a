"""Privacy scan of what the campaign produced, not only of its input text: a tokenizer trained
on text that holds a key can hold the key as a token, and predictions, logs and reports can
quote records. `campaign scan-artifacts` runs the data phase's scanner (the same detectors and
kinds as the split stage's privacy report) over:

- tokenizer vocabularies (``tokenizer.json``, ``vocab.txt``, ``vocab.json``): one token per
  line, with the word-piece markers (``Ġ``, ``▁``, ``##``) removed;
- Parquet files (predictions, splits): every string cell, one per line;
- text files (``.log``, ``.txt``, ``.json``, ``.jsonl``, ``.tsv``, ``.csv``, ``.md``, ``.yaml``).

The report lists, per artifact path, the count of findings by kind and where they are (token
index, row and column, or line), never the secret itself. It is written atomically as JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from campaign.core.errors import CampaignError

TEXT_SUFFIXES = {".log", ".txt", ".json", ".jsonl", ".tsv", ".csv", ".md", ".yaml", ".yml"}
VOCAB_NAMES = {"tokenizer.json", "vocab.txt", "vocab.json"}
MARKERS = ("Ġ", "▁", "##")
MAX_WHERE = 20  # locations listed per artifact


def vocab_tokens(path: Path) -> list[str]:
    """The tokens of a vocabulary file, word-piece markers removed."""
    if path.name == "vocab.txt":
        tokens = path.read_text(encoding="utf-8", errors="replace").splitlines()
    else:
        data = json.loads(path.read_text(encoding="utf-8"))
        vocab = data.get("model", {}).get("vocab", data) if isinstance(data, dict) else data
        if isinstance(vocab, dict):
            tokens = sorted(vocab, key=lambda t: vocab[t])
        else:  # Unigram: [[token, score], ...]
            tokens = [v[0] if isinstance(v, list) else str(v) for v in vocab]
    out = []
    for token in tokens:
        for marker in MARKERS:
            token = token.replace(marker, "")
        out.append(token)
    return out


def _lines(path: Path) -> tuple[str, list[str]] | None:
    """(what the lines are, the lines) of an artifact, or None when it is not scanned."""
    if path.name in VOCAB_NAMES:
        return "token", vocab_tokens(path)
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        table = pq.read_table(path)
        cells = []
        for name in table.column_names:
            column = table.column(name)
            if str(column.type) in ("string", "large_string"):
                cells += [f"{name}: {v}" for v in column.to_pylist() if v]
        return "cell", cells
    if path.suffix in TEXT_SUFFIXES:
        return "line", path.read_text(encoding="utf-8", errors="replace").splitlines()
    return None


def scan_artifact(path: Path) -> dict | None:
    """{"path", "unit", "findings": {kind: n}, "where": [{"kind", unit: index}]} or None."""
    from campaign.data import scan_text

    got = _lines(path)
    if got is None:
        return None
    unit, lines = got
    counts: Counter = Counter()
    where = []
    for i, line in enumerate(lines):
        for finding in scan_text(line):
            counts[finding.kind] += 1
            if len(where) < MAX_WHERE:
                where.append({"kind": finding.kind, unit: i})
    return {
        "path": str(path),
        "unit": unit,
        "findings": dict(sorted(counts.items())),
        "where": where,
    }


def scan_artifacts(roots: list[Path], skip: set[Path] = frozenset()) -> dict:
    """The report over every scanned file under ``roots`` (files or folders), sorted by path."""
    files = []
    for root in roots:
        if not root.exists():
            raise CampaignError(f"scan-artifacts: {root} does not exist")
        files += [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    artifacts, totals, scanned = [], Counter(), 0
    for path in sorted(set(files)):
        if path.resolve() in skip:
            continue
        row = scan_artifact(path)
        if row is None:
            continue
        scanned += 1
        if row["findings"]:
            artifacts.append(row)
            totals.update(row["findings"])
    return {
        "scanned": scanned,
        "flagged": len(artifacts),
        "findings_by_kind": dict(sorted(totals.items())),
        "artifacts": artifacts,
    }
