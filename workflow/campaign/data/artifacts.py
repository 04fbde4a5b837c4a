"""Privacy scan of what the campaign produced, not only of its input text: a tokenizer trained
on text that holds a key can hold the key as a token, and predictions, logs and reports can
quote records. `campaign scan-artifacts` runs the data phase's scanner (the same detectors and
kinds as the split stage's privacy report) over:

- tokenizer vocabularies (``tokenizer.json``, ``vocab.txt``, ``vocab.json``) and BPE merges
  (``merges.txt``: each pair joined): one token per line, with the word-piece markers (``Ġ``,
  ``▁``, ``##``) removed. A token is matched in the form a tokenizer stores it: a lowercasing
  tokenizer keeps ``AKIA...`` as ``akia...``, so a token without capitals is also scanned
  upper-cased (formats written in capitals) and for folded generated strings
  (``detectors.folded_tokens``: the tail of a lower-cased GitHub token);
- Parquet files (predictions, splits): every string cell, one per line;
- text files (``.log``, ``.txt``, ``.json``, ``.jsonl``, ``.tsv``, ``.csv``, ``.md``, ``.yaml``).

The campaign's own keys are not findings: a store key (``"key": ...``, ``"store_key": ...``
in job records, events, entries, manifests and the index) is a BLAKE3 hex digest, and under a
secret-ish name ("key") the detectors would take it for an API key. A value of the store's
digest form under one of the names the campaign writes its keys with is recognized as what it
is (``own_key``); the same digest under any other name (``api_key = <64 hex>``) still counts.

The report lists, per artifact path, the count of findings by kind and where they are (token
index, row and column, or line), never the secret itself. It is written atomically as JSON.

The data phase's `artifact_scan` stage (`stage_scan_artifacts`, command `campaign
artifact-scan`) runs the same scan in the DAG over the artifacts it declares (each run's model
folder with its tokenizer vocabulary, the runs' predictions, the evaluation's scored items (every
variant's and floor's answer on every item), the evaluation summary, the leakage audit table, the
preflight report) and writes results/data/artifact_findings.json. Logs are not
DAG outputs: `campaign scan-artifacts` scans them. Under `data.privacy` (and
`data.privacy_by_kind`) a kind whose policy is `fail` fails the stage, naming the artifact;
`redact` cannot rewrite an artifact, so it reports like `report`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from campaign.core.errors import CampaignError
from campaign.core.hashing import hash_bytes

TEXT_SUFFIXES = {".log", ".txt", ".json", ".jsonl", ".tsv", ".csv", ".md", ".yaml", ".yml"}
VOCAB_NAMES = {"tokenizer.json", "vocab.txt", "vocab.json", "merges.txt"}
MARKERS = ("Ġ", "▁", "##")
MAX_WHERE = 20  # locations listed per artifact
MAX_SEEN = 1_000_000  # distinct lines whose findings a scan keeps for reuse
# A store key as the store names entries (core.hashing: BLAKE3, hex), and the names the campaign
# writes keys under (job records and events: "key"; manifests, results, the index: "store_key").
_DIGEST = re.compile(f"[0-9a-f]{{{len(hash_bytes(b''))}}}")
_OWN_KEY_NAME = re.compile(r"""(?:^|[\s{,"'])(?:store_)?key["']?\s*[:=]\s*["']?$""")


def vocab_tokens(path: Path) -> list[str]:
    """The tokens of a vocabulary file (merges: each pair joined), word-piece markers removed."""
    if path.name == "vocab.txt":
        tokens = path.read_text(encoding="utf-8", errors="replace").splitlines()
    elif path.name == "merges.txt":
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        tokens = [line.replace(" ", "") for line in lines if not line.startswith("#version")]
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
    """(what the lines are, the lines) of an artifact, or None when it is not scanned; an
    artifact that cannot be read is one error naming it."""
    try:
        return _read_lines(path)
    except CampaignError:
        raise
    except Exception as e:  # a garbled vocabulary or Parquet file: say which, in one line
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise CampaignError(f"{path}: cannot be read for the artifact scan ({first})") from None


def _read_lines(path: Path) -> tuple[str, list[str]] | None:
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


def own_key(line: str, finding) -> bool:
    """Whether a finding is one of the campaign's own store keys: a digest of the store's form
    written under a name the campaign gives its keys."""
    value = line[finding.start : finding.end]
    return bool(_DIGEST.fullmatch(value)) and bool(_OWN_KEY_NAME.search(line[: finding.start]))


def scan_token(token: str) -> list:
    """Findings in a vocabulary token, in the forms a tokenizer stores: as it is; a token with
    no capitals (a lowercasing tokenizer's) upper-cased, for formats written in capitals (an
    AWS key id: ``akia...``); and its folded generated strings."""
    from campaign.data.detectors import folded_tokens
    from campaign.data.privacy import Finding, scan_text

    found = scan_text(token)
    if found or token != token.lower() or not token.isascii():
        return found  # ASCII: upper() keeps every position
    found = scan_text(token.upper())
    return found or [Finding("api_key", a, b) for a, b in folded_tokens(token)]


def _scan_line(unit: str, line: str) -> tuple:
    from campaign.data.privacy import scan_text

    found = scan_token(line) if unit == "token" else scan_text(line)
    return tuple(f for f in found if not (f.kind == "api_key" and own_key(line, f)))


def scan_artifact(path: Path, seen: dict[tuple[str, str], tuple] | None = None) -> dict | None:
    """{"path", "unit", "findings": {kind: n}, "where": [{"kind", unit: index}]} or None.

    seen: the findings of each (unit, line) already scanned (a function of the two alone),
    shared across the artifacts of one scan: every run of a campaign copies the same tokenizer
    vocabulary, twice (vocab.txt and tokenizer.json), and prediction cells repeat
    their labels, so the demo's 138,000 lines hold about a fifth as many distinct ones."""
    got = _lines(path)
    if got is None:
        return None
    unit, lines = got
    seen = {} if seen is None else seen
    counts: Counter = Counter()
    where = []
    for i, line in enumerate(lines):
        found = seen.get((unit, line))
        if found is None:
            if len(seen) >= MAX_SEEN:  # a scan of many large logs: bounded memory
                seen.clear()
            found = seen[unit, line] = _scan_line(unit, line)
        for finding in found:
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
    artifacts, totals, scanned, seen = [], Counter(), 0, {}
    for path in sorted(set(files)):
        if path.resolve() in skip:
            continue
        row = scan_artifact(path, seen)
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


# The stage's inputs, each with the kind of artifact it is (in the report).
STAGE_INPUTS = {
    "models": "model folder",
    "predictions_validation": "predictions",
    "predictions_test": "predictions",
    "summary": "evaluation summary",
    "audit_table": "leakage audit",
    "preflight_report": "preflight report",
    "scored_items": "scored items",
}


def stage_scan_artifacts(ctx) -> None:
    """Scan the declared artifacts; write the findings (paths, kinds, counts, never values).

    spec: {privacy: data.privacy, privacy_by_kind: data.privacy_by_kind}."""
    from campaign.core.fsutil import atomic_write_bytes
    from campaign.data.privacy import policies as privacy_policies

    by_kind = ctx.spec["privacy_by_kind"] or {}  # null: every kind follows data.privacy
    per_kind = privacy_policies({"default": ctx.spec["privacy"], **by_kind})
    roots, kind_of = [], {}
    for name, artifact in STAGE_INPUTS.items():
        for path in ctx.inputs.get(name, []):
            roots.append(Path(path))
            kind_of[Path(path)] = artifact
    report = scan_artifacts(roots)
    for row in report["artifacts"]:
        path = Path(row["path"])
        owner = next(r for r in [path, *path.parents] if r in kind_of)
        row["artifact"] = kind_of[owner]
    failing = [
        row for row in report["artifacts"] if any(per_kind[k] == "fail" for k in row["findings"])
    ]
    if failing:
        row = failing[0]
        kinds = ", ".join(f"{k}: {n}" for k, n in row["findings"].items() if per_kind[k] == "fail")
        more = f" (and {len(failing) - 1} more artifacts)" if len(failing) > 1 else ""
        raise CampaignError(
            f"data.privacy is 'fail': the {row['artifact']} artifact {row['path']} holds "
            f"secrets or personal data ({kinds}, in its {row['unit']}s){more}"
        )
    report["policies"] = per_kind
    text = json.dumps(report, indent=2, sort_keys=True) + "\n"
    atomic_write_bytes(ctx.outputs["findings"], text.encode())
    kinds = ", ".join(f"{k}: {n}" for k, n in report["findings_by_kind"].items()) or "none"
    flagged, scanned = report["flagged"], report["scanned"]
    print(f"artifact_scan: {flagged} of {scanned} artifacts hold findings ({kinds})")
