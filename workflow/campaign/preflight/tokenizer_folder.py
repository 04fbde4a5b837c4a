"""Whether a pretrained model folder has a tokenizer: without one transformers still builds a
tokenizer of its five special tokens that reads every word as [UNK], training then learns
nothing and every check passes. `campaign init`, `campaign validate` and the preflight refuse
such a folder in one line, before any job spends money.

Not in campaign.train: every module a stage imports is part of its code version, and the train
stage neither needs the check (the folder was checked before it runs) nor should its key change
for it. No transformers import (init and validate call it)."""

from __future__ import annotations

import json
from pathlib import Path

from campaign.core.errors import CampaignError

# A readable vocabulary, counted against the model's embedding rows: a fast tokenizer's
# tokenizer.json, a WordPiece vocab.txt, a BPE vocab.json (with merges.txt).
VOCABULARY_FILES = ("tokenizer.json", "vocab.txt", "vocab.json")


def _vocabulary_size(folder: Path, name: str) -> int:
    if name == "tokenizer.json":
        from tokenizers import Tokenizer

        return Tokenizer.from_file(str(folder / name)).get_vocab_size(True)
    if name == "vocab.txt":
        text = (folder / name).read_text(encoding="utf-8")
        return sum(1 for line in text.splitlines() if line.strip())
    return len(json.loads((folder / name).read_text(encoding="utf-8")))


def _names_a_class(folder: Path) -> bool:
    """Whether tokenizer_config.json names a tokenizer class: a byte-level tokenizer (ByT5,
    CANINE) is built from it alone, with no vocabulary file."""
    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(config, dict) and isinstance(config.get("tokenizer_class"), str)


def tokenizer_problem(folder: Path) -> str | None:
    """Why a pretrained model folder has no usable tokenizer, or None. Accepted: a vocabulary
    file, any SentencePiece model (`*.model`: tokenizer.model, spiece.model, spm.model,
    sentencepiece.bpe.model, ...), or a tokenizer_config.json naming a class; what such a
    tokenizer does with the data is the preflight's unknown-share check. A vocabulary under half
    the model's embedding rows is another model's."""
    folder = Path(folder)
    vocabularies = [name for name in VOCABULARY_FILES if (folder / name).is_file()]
    sentencepiece = any(p.is_file() for p in folder.glob("*.model"))
    if not vocabularies and not sentencepiece and not _names_a_class(folder):
        return (
            "has no tokenizer files (tokenizer.json, vocab.txt, vocab.json, a SentencePiece "
            "*.model or a tokenizer_config.json naming its class): copy the model's tokenizer "
            "into the folder (save_pretrained writes it)"
        )
    if not vocabularies:
        return None
    try:
        size = _vocabulary_size(folder, vocabularies[0])
    except Exception as e:  # a damaged file: whatever the library raises, one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return f"has a tokenizer file that cannot be read ({vocabularies[0]}: {first})"
    try:
        embeds = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("vocab_size")
    except (OSError, ValueError, AttributeError):
        embeds = None
    if isinstance(embeds, int) and size * 2 < embeds:
        return (
            f"has a tokenizer of {size} tokens for a model that embeds {embeds}: it is not this "
            "model's tokenizer"
        )
    return None


def check_model_folder(model_spec: dict, root: Path) -> Path | None:
    """model.source's folder with a config.json and a usable tokenizer (one-line CampaignError
    naming model.source otherwise); None for from_config. (campaign.train's source_path says
    the same of config.json; it is private to the train phase, whose key this module stays out
    of.)"""
    source = model_spec["source"]
    if source == "from_config":
        return None
    path = Path(source) if Path(source).is_absolute() else Path(root) / source
    if not (path / "config.json").is_file():
        raise CampaignError(f"model.source: {source} is not a model folder (no config.json)")
    if (problem := tokenizer_problem(path)) is not None:
        raise CampaignError(f"model.source: {source} {problem}")
    return path
