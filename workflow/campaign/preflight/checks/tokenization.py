"""tokenization: formatted examples as tokens, with the positions that carry loss; every example
has a target and (a label scored as a causal LM's response) the loss covers exactly the
response; the tokenizer knows the text (the share of unknown tokens on the train sample is at
most preflight.max_unknown_token_share). Each task checks its own examples
(TaskModule.tokenization_check; the label tasks' in tasks/label_preflight.py)."""

from __future__ import annotations

from campaign.core.tasks import module_of
from campaign.preflight.bench import Bench, Result

ORDER = 30  # place in the report


def run(bench: Bench) -> Result:
    """The task shows and checks its own examples (TaskModule.tokenization_check)."""
    passed, summary, details = module_of(bench.task).tokenization_check(
        bench.trainer(),
        bench.sample.train,
        bench.cfg["inspect_examples"],
        full=bench.full,
        max_unknown_share=bench.cfg["max_unknown_token_share"],
    )
    return Result(passed, summary, details)


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
