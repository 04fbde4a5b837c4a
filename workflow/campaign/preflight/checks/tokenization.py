"""tokenization: formatted examples as tokens, with the positions that carry loss; every example
has a target and (causal_lm) the loss covers exactly the response; the tokenizer knows the text
(the share of unknown tokens on the train sample is at most preflight.max_unknown_token_share)."""

from __future__ import annotations

from campaign.preflight.bench import Bench, Result
from campaign.train import IGNORE, Trainer

ORDER = 30  # place in the report


def _show_token(tokenizer, token_id: int) -> str:
    text = tokenizer.decode([token_id])
    return text.replace("\n", "\\n") if text else tokenizer.convert_ids_to_tokens(token_id)


def _loss_positions(example: dict, task: str, architecture: str | None) -> list[int]:
    """Positions whose label enters the loss (causal: label at t is predicted from t-1)."""
    if "labels" in example:
        return [i for i, v in enumerate(example["labels"]) if i > 0 and v != IGNORE]
    if example["label"] == IGNORE:
        return []
    # The sequence label is read at [CLS] (BERT) or at the last token (GPT-2's pooling).
    return [0] if architecture != "gpt2" else [len(example["input_ids"]) - 1]


def unknown_share(tok, texts: list[str]) -> float:
    """The share of the texts' tokens (special tokens left out) that are the unknown token; 0 for
    a tokenizer without one (byte-level BPE spells any text). A tokenizer that is not the model's
    or the data's (an empty vocabulary, another language) shows here before any training."""
    if tok.unk_token_id is None or not texts:
        return 0.0
    ids = tok(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    total = sum(len(row) for row in ids)
    return sum(row.count(tok.unk_token_id) for row in ids) / total if total else 0.0


def _problems(no_loss, cut, wrong, n_examples, ids, tok, unknown: float, cfg: dict) -> list[str]:
    """What fails the check: examples without loss, cut targets, wrong masks (lists of example
    indices), and a share of unknown tokens over preflight.max_unknown_token_share."""
    problems = []
    if no_loss:
        problems.append(
            f"{len(no_loss)} of {n_examples} examples carry no loss (labels masked everywhere; "
            f"first: {ids[no_loss[0]]})"
        )
    if cut:
        problems.append(f"truncation cut the target of {len(cut)} examples")
    if wrong:
        problems.append(
            f"{len(wrong)} examples' loss mask is not 'prompt masked, response carries loss'"
        )
    most = cfg["max_unknown_token_share"]
    if unknown > most:
        problems.append(
            f"{unknown:.1%} of the train sample's tokens are unknown ({tok.unk_token}), over "
            f"preflight.max_unknown_token_share {most:g}: the tokenizer does not know this text"
        )
    return problems


def _architecture(trainer: Trainer) -> str:
    return trainer.model.config.model_type


def run(bench: Bench) -> Result:
    trainer = bench.trainer()
    if trainer.hooks is not None:  # a task module shows and checks its own examples
        passed, summary, details = trainer.hooks.tokenization_check(
            trainer, bench.sample.train, bench.cfg["inspect_examples"], full=bench.full
        )
        return Result(passed, summary, details)
    return _label_task(bench, trainer)


def _label_task(bench: Bench, trainer: Trainer) -> Result:
    """The check for the tasks the loop formats itself (sequence_classification, label-scoring
    causal_lm).

    Long: one pass over the examples that finds every kind of mask fault, then the inspected
    examples and the summary; the generation task's check is its module's tokenization_check.
    """
    tok, task = trainer.tokenizer, bench.task
    arch = _architecture(trainer)
    examples = trainer.examples["train"]
    data = bench.sample.train
    no_loss, cut, wrong = [], [], []
    if task == "causal_lm":
        text_lengths = [
            len(ids)
            for ids in tok(list(data.texts), add_special_tokens=False, verbose=False)["input_ids"]
        ]
        limit = trainer.fmt.prompt_budget
    else:
        text_lengths = [len(ids) for ids in tok(list(data.texts), verbose=False)["input_ids"]]
        limit = bench.recipe.max_length
    for i, e in enumerate(examples):
        positions = _loss_positions(e, task, arch)
        if not positions:
            no_loss.append(i)
            continue
        if task != "causal_lm":
            continue
        lid = trainer.label_ids[data.labels[i]]
        target = trainer.fmt.targets[lid]
        expected = [IGNORE] * (len(e["input_ids"]) - len(target)) + target
        supervised = [e["labels"][p] for p in positions]
        if e["labels"] != expected:
            if len(supervised) < len(target) and target[: len(supervised)] == supervised:
                cut.append(i)
            else:
                wrong.append(i)
        elif any(e["labels"][p] != e["input_ids"][p] for p in positions):
            wrong.append(i)

    inspected = []
    for i in range(min(bench.cfg["inspect_examples"], len(examples))):
        e = examples[i]
        positions = set(_loss_positions(e, task, arch))
        tokens = [_show_token(tok, t) for t in e["input_ids"]]
        entry = {
            "id": data.ids[i],
            "label": data.labels[i],
            "tokens": tokens,
            "loss_positions": sorted(positions),
            "n_tokens": len(tokens),
            "text_tokens": text_lengths[i],
            "truncated": text_lengths[i] > limit,
        }
        if task == "causal_lm":
            entry["loss_text"] = tok.decode([e["labels"][p] for p in sorted(positions)])
            entry["masked_prompt_tokens"] = sum(v == IGNORE for v in e["labels"])
        else:
            entry["loss_on"] = (
                "the sequence (label id "
                f"{e['label']}: {trainer.labels[e['label']] if e['label'] != IGNORE else 'none'})"
            )
        inspected.append(entry)
    truncated = sum(n > limit for n in text_lengths)
    details = {
        "task": task,
        "max_length": bench.recipe.max_length,
        "examples": len(examples),
        "truncated_texts": truncated,
        "no_loss": len(no_loss),
        "target_truncated": len(cut),
        "mask_mismatch": len(wrong),
        "inspected": inspected,
    }
    if task == "causal_lm":
        details["prompt_budget"] = limit
        details["separator"] = tok.decode(trainer.fmt.sep_ids)
    details["unknown_token_share"] = unknown = unknown_share(tok, list(data.texts))
    problems = _problems(no_loss, cut, wrong, len(examples), data.ids, tok, unknown, bench.cfg)
    if problems:
        return Result(False, "; ".join(problems), details)
    carried = sum(len(_loss_positions(e, task, arch)) for e in examples)
    what = "response tokens" if task == "causal_lm" else "sequence labels"
    return Result(
        True,
        f"every example carries loss ({carried} {what} in {len(examples)} examples); "
        f"{truncated} texts truncated to fit max_length {bench.recipe.max_length}; "
        f"{unknown:.1%} unknown tokens",
        details,
    )


def describe(d: dict) -> list[str]:
    lines = []
    for e in d.get("inspected", []):
        if "marked" in e:  # a task module's view: [masked] tokens in brackets, targets bare
            cut = ", answer cut by max_length" if e["truncated"] else ""
            lines.append(f"{e['id']}: {e['n_tokens']} tokens, {e['targets']} targets{cut}")
            lines.append(f"  {e['marked']!r}")
            continue
        loss = set(e["loss_positions"])
        shown = "|".join(f"[[{t}]]" if i in loss else t for i, t in enumerate(e["tokens"]))
        cut = f", text cut from {e['text_tokens']} tokens" if e["truncated"] else ""
        lines.append(f"{e['id']} (label {e['label']}): {e['n_tokens']} tokens{cut}")
        lines.append(f"  tokens: {shown}")
        if "loss_text" in e:
            lines.append(
                f"  loss on {len(loss)} tokens {e['loss_text']!r}; "
                f"{e['masked_prompt_tokens']} prompt positions masked"
            )
        else:
            lines.append(f"  loss on {e['loss_on']}")
    if lines:
        lines.insert(0, "[[token]] = its position carries loss")
    return lines
