"""The label tasks' preflight (LabelTask's preflight and memory section): the tokenization check
of examples the loop formats itself (with the share of the tokenizer's unknown tokens on the
text), and the causal_lm resume check's greedy continuations.

A label task's example either carries its label at one position (a classifier: [CLS] for BERT,
the last token for GPT-2's pooling) or, for a causal LM (`response`), as response tokens after
the prompt: the loss must cover exactly the response, the prompt masked. torch, transformers
and the preflight are imported inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Sequence

from campaign.tasks.marked import IGNORE


def show_token(tokenizer, token_id: int) -> str:
    text = tokenizer.decode([token_id])
    return text.replace("\n", "\\n") if text else tokenizer.convert_ids_to_tokens(token_id)


def loss_positions(example: dict, architecture: str | None) -> list[int]:
    """Positions whose label enters the loss (causal: label at t is predicted from t-1)."""
    if "labels" in example:
        return [i for i, v in enumerate(example["labels"]) if i > 0 and v != IGNORE]
    if example["label"] == IGNORE:
        return []
    # The sequence label is read at [CLS] (BERT) or at the last token (GPT-2's pooling).
    return [0] if architecture != "gpt2" else [len(example["input_ids"]) - 1]


def _text_lengths(trainer, split, response: bool) -> tuple[list[int], int]:
    """(tokens of each text, the most that fit): a causal LM's prompt budget for the text alone,
    a classifier's max_length with its special tokens."""
    tok = trainer.tokenizer
    if response:
        rows = tok(list(split.texts), add_special_tokens=False, verbose=False)["input_ids"]
        return [len(ids) for ids in rows], trainer.fmt.prompt_budget
    rows = tok(list(split.texts), verbose=False)["input_ids"]
    return [len(ids) for ids in rows], trainer.recipe.max_length


def _mask_faults(trainer, split, arch: str, response: bool) -> tuple[list, list, list]:
    """(no loss, target cut, wrong mask): indices of the examples with each fault. Only a
    causal LM's mask can be cut or wrong: it must be the response's tokens, the prompt masked."""
    no_loss, cut, wrong = [], [], []
    for i, e in enumerate(trainer.examples["train"]):
        positions = loss_positions(e, arch)
        if not positions:
            no_loss.append(i)
            continue
        if not response:
            continue
        target = trainer.fmt.targets[trainer.label_ids[split.labels[i]]]
        expected = [IGNORE] * (len(e["input_ids"]) - len(target)) + target
        supervised = [e["labels"][p] for p in positions]
        if e["labels"] != expected:
            if len(supervised) < len(target) and target[: len(supervised)] == supervised:
                cut.append(i)
            else:
                wrong.append(i)
        elif any(e["labels"][p] != e["input_ids"][p] for p in positions):
            wrong.append(i)
    return no_loss, cut, wrong


def _inspected(trainer, split, arch: str, lengths, limit: int, inspect: int, response: bool):
    """The first `inspect` examples as tokens, with their loss positions and what they carry."""
    tok, examples, out = trainer.tokenizer, trainer.examples["train"], []
    for i in range(min(inspect, len(examples))):
        e = examples[i]
        positions = set(loss_positions(e, arch))
        tokens = [show_token(tok, t) for t in e["input_ids"]]
        entry = {
            "id": split.ids[i],
            "label": split.labels[i],
            "tokens": tokens,
            "loss_positions": sorted(positions),
            "n_tokens": len(tokens),
            "text_tokens": lengths[i],
            "truncated": lengths[i] > limit,
        }
        if response:
            entry["loss_text"] = tok.decode([e["labels"][p] for p in sorted(positions)])
            entry["masked_prompt_tokens"] = sum(v == IGNORE for v in e["labels"])
        else:
            label = trainer.labels[e["label"]] if e["label"] != IGNORE else "none"
            entry["loss_on"] = f"the sequence (label id {e['label']}: {label})"
        out.append(entry)
    return out


def _problems(no_loss, cut, wrong, n_examples, ids, tok, unknown: float, most: float) -> list[str]:
    """What fails the check: examples without loss, cut targets, wrong masks (lists of example
    indices), and a share of unknown tokens over preflight.max_unknown_token_share (`most`)."""
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
    if unknown > most:
        problems.append(
            f"{unknown:.1%} of the train sample's tokens are unknown ({tok.unk_token}), over "
            f"preflight.max_unknown_token_share {most:g}: the tokenizer does not know this text"
        )
    return problems


def unknown_share(tok, texts: list[str]) -> float:
    """The share of the texts' tokens (special tokens left out) that are the unknown token; 0 for
    a tokenizer without one (byte-level BPE spells any text). A tokenizer that is not the model's
    or the data's (an empty vocabulary, another language) shows here before any training."""
    if tok.unk_token_id is None or not texts:
        return 0.0
    ids = tok(list(texts), add_special_tokens=False, verbose=False)["input_ids"]
    total = sum(len(row) for row in ids)
    return sum(row.count(tok.unk_token_id) for row in ids) / total if total else 0.0


def tokenization_check(
    task: str, trainer, split, inspect: int, max_unknown_share: float, response: bool
) -> tuple[bool, str, dict]:
    """LabelTask.tokenization_check: one pass over the sample's train examples that finds every
    kind of mask fault, then the inspected examples, the unknown tokens and the summary."""
    tok, arch = trainer.tokenizer, trainer.model.config.model_type
    examples, max_length = trainer.examples["train"], trainer.recipe.max_length
    lengths, limit = _text_lengths(trainer, split, response)
    no_loss, cut, wrong = _mask_faults(trainer, split, arch, response)
    truncated = sum(n > limit for n in lengths)
    details = {
        "task": task,
        "max_length": max_length,
        "examples": len(examples),
        "truncated_texts": truncated,
        "no_loss": len(no_loss),
        "target_truncated": len(cut),
        "mask_mismatch": len(wrong),
        "inspected": _inspected(trainer, split, arch, lengths, limit, inspect, response),
    }
    if response:
        details["prompt_budget"] = limit
        details["separator"] = tok.decode(trainer.fmt.sep_ids)
    details["unknown_token_share"] = unknown = unknown_share(tok, list(split.texts))
    problems = _problems(
        no_loss, cut, wrong, len(examples), split.ids, tok, unknown, max_unknown_share
    )
    if problems:
        return False, "; ".join(problems), details
    carried = sum(len(loss_positions(e, arch)) for e in examples)
    what = "response tokens" if response else "sequence labels"
    return (
        True,
        f"every example carries loss ({carried} {what} in {len(examples)} examples); "
        f"{truncated} texts truncated to fit max_length {max_length}; {unknown:.1%} unknown tokens",
        details,
    )


def greedy_labels(trainer, model, texts: Sequence[str]) -> list[list[int]]:
    """Greedy continuations of the prompts (text + separator), as long as the longest label:
    what a causal LM's reloaded copy must generate as the model in memory does."""
    import torch

    new_tokens = max(len(t) for t in trainer.fmt.targets)
    out = []
    with torch.no_grad():
        for ids in trainer.fmt.text_ids(trainer.tokenizer, texts):
            prompt = torch.tensor([ids + trainer.fmt.sep_ids], device=trainer.device)
            with trainer.autocast():
                generated = model.generate(
                    prompt,
                    attention_mask=torch.ones_like(prompt),
                    max_new_tokens=new_tokens,
                    do_sample=False,
                    pad_token_id=trainer.pad_id,
                )
            out.append(generated[0, prompt.shape[1] :].tolist())
    return out
