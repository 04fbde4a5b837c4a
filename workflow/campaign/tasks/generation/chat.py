"""The generation task: prompt → free-form response, formatted with a chat template, trained with
the loss on the assistant's tokens only, judged on what the model generates.

The canonical record is a conversation: a list of {"role", "content"} messages whose last entry is
the assistant's reference response (TRL's conversational format). A prompt/response pair becomes
[{"role": "user", ...}, {"role": "assistant", ...}], after an optional system message.

Formatting: the tokenizer's chat template (model.chat_template: model), a Jinja template file (a
path), or PLAIN_TEMPLATE (none: for base models without a template, and for the from_config
models of tests and demos, whose tokenizers are trained on the split and have none). Which tokens
are the assistant's is found on the rendered text, not by the template's cooperation: the
conversation up to an assistant turn, rendered with add_generation_prompt=True, must be a text
prefix of the conversation rendered with that turn; the characters between the two are the turn's,
and every token overlapping them is a target. Templates without `{% generation %}` markers (most
of them, SmolLM2's included) work that way; one that rewrites earlier turns is refused by name.

Every assistant turn is a target (TRL's assistant_only_loss does the same): earlier turns of a
conversation are answers too. The last turn is the reference that evaluation compares against.

transformers and torch are imported inside the functions that need them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from campaign.core.defaults import (
    GENERATION_DEFAULTS,
    MODEL_DEFAULTS,
    generation_settings,
    special_tokens_policy,
)
from campaign.core.errors import CampaignError
from campaign.core.tasks import check_template_file
from campaign.data import (
    check_special_tokens,
    escape_conversation,
    parse_messages,
    reference,
    scan_special_tokens,
    special_token_refusal,
    split_conversations,
)
from campaign.tasks.marked import IGNORE, show_example

# model.chat_template: none. Role names as plain words; the assistant's turn ends with EOS so the
# model learns to stop, and the generation prompt is the same "Assistant:" line the turns start
# with (a newline, not a space, before the answer: byte-level BPE would fold a space into it).
PLAIN_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m['role'] == 'assistant' %}Assistant:\n{{ m['content'] }}{{ eos_token }}\n"
    "{% elif m['role'] == 'system' %}System: {{ m['content'] }}\n"
    "{% else %}User: {{ m['content'] }}\n{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}Assistant:\n{% endif %}"
)


# ------------------------------------------------------------------ templates
def resolve_template(setting: str, tokenizer, root: Path) -> str:
    """The Jinja chat template that model.chat_template names: the tokenizer's (model), the plain
    one (none), or a file's (a path relative to the project root)."""
    if setting == "model":
        template = getattr(tokenizer, "chat_template", None)
        if not template:
            raise CampaignError(
                "model.chat_template: model, but this tokenizer has no chat template; set none "
                "(plain 'User:/Assistant:' text) or the path of a Jinja template file"
            )
        return template
    if setting == "none":
        return PLAIN_TEMPLATE
    path = check_template_file({"chat_template": setting}, root)  # never a file outside root
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise CampaignError(
            f"model.chat_template: {setting} is neither model, none nor a readable template file "
            f"({e.strerror})"
        ) from None


def render(tokenizer, template: str, messages: Sequence[dict], generation_prompt: bool) -> str:
    """The conversation as text, by `template` (the tokenizer's special tokens are in scope)."""
    try:
        return tokenizer.apply_chat_template(
            list(messages),
            chat_template=template,
            tokenize=False,
            add_generation_prompt=generation_prompt,
        )
    except Exception as e:  # a Jinja error in a user's template: name the key, one line
        raise CampaignError(f"model.chat_template: the template fails to render ({e})") from None


def _assistant_spans(tokenizer, template: str, messages: Sequence[dict]) -> tuple[str, list]:
    """The full text and the character span [start, end) of every assistant turn in it."""
    full = render(tokenizer, template, messages, generation_prompt=False)
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, template, messages[:i], generation_prompt=True)
        upto = render(tokenizer, template, messages[: i + 1], generation_prompt=False)
        if not upto.startswith(before) or not full.startswith(upto):
            raise CampaignError(
                "model.chat_template: the template renders earlier turns differently once a "
                "later turn follows, so the assistant's tokens cannot be located; use another "
                "template (a path) or none"
            )
        spans.append((len(before), len(upto)))
    return full, spans


# ------------------------------------------------------------------ examples
@dataclass(frozen=True)
class Example:
    """One formatted conversation: token ids, labels (IGNORE where the loss does not look) and
    whether max_length cut a target token (a truncated answer teaches the model to stop early)."""

    input_ids: list[int]
    labels: list[int]
    truncated: bool
    length: int  # tokens of the whole conversation, before max_length cut it

    @property
    def targets(self) -> int:
        return sum(label != IGNORE for label in self.labels)


def _pieces(
    tokenizer, template: str, messages: Sequence[dict], escape: bool = False
) -> list[tuple[list[int], bool]]:
    """The formatted conversation as token pieces, (ids, is an assistant turn), in order.

    Each piece is tokenized on its own, so the ids before an answer are exactly the ids of the
    prompt the model later generates from: tokenizing the whole text at once would let a BPE merge
    cross the boundary (a prompt's trailing space joined to the answer's first word) and training
    would see a prompt that generation never gives. `escape` (data.special_tokens: escape): a
    special token's string inside a message tokenizes as text (data/control_tokens.py)."""
    tokenize = lambda part: list(tokenizer(part, add_special_tokens=False)["input_ids"])  # noqa: E731
    if escape:
        escaped = escape_conversation(tokenizer, messages)
        if escaped is not None:
            messages, tokenize = escaped
    text, spans = _assistant_spans(tokenizer, template, messages)
    pieces, at = [], 0
    for start, end in spans:
        for lo, hi, answer in ((at, start, False), (start, end, True)):
            if hi > lo:
                pieces.append((tokenize(text[lo:hi]), answer))
        at = end
    if at < len(text):
        pieces.append((tokenize(text[at:]), False))
    return pieces


def encode(
    tokenizer, template: str, messages: Sequence[dict], max_length: int, escape: bool = False
) -> Example:
    """Token ids of the formatted conversation, the loss on the assistant's tokens only, cut to
    `max_length` from the right. Every assistant turn must contain an EOS token: a model never
    shown where an answer ends does not stop generating. `escape`: the messages' special-token
    strings tokenize as text (data.special_tokens: escape)."""
    ids: list[int] = []
    labels: list[int] = []
    for piece, answer in _pieces(tokenizer, template, messages, escape):
        ends = [i for i, t in enumerate(piece) if t == tokenizer.eos_token_id]
        if answer and not ends:
            raise CampaignError(
                f"model.chat_template: the assistant's turn does not end with the EOS token "
                f"{tokenizer.eos_token!r}, so a trained model would not stop; use a template "
                "that ends it (none does)"
            )
        # Up to the turn's EOS: what a template writes after it (a newline) is never generated.
        last = ends[-1] if answer else -1
        ids += piece
        labels += [t if i <= last else IGNORE for i, t in enumerate(piece)]
    cut = any(label != IGNORE for label in labels[max_length:])
    return Example(ids[:max_length], labels[:max_length], truncated=cut, length=len(ids))


def encode_all(tokenizer, template: str, conversations, max_length: int) -> list[Example]:
    return [encode(tokenizer, template, m, max_length) for m in conversations]


def truncated_share(examples: Sequence[Example]) -> float:
    """The share of examples whose answer max_length cut (0 for none)."""
    return sum(e.truncated for e in examples) / len(examples) if examples else 0.0


def check_truncation(examples: Sequence[Example], max_share: float, where: str) -> None:
    """Refuse a training set where more than `max_share` of the answers are cut: the model would
    learn to end answers early. `where` names the key to change (train.max_length)."""
    n_cut = sum(e.truncated for e in examples)
    if examples and n_cut / len(examples) > max_share:
        longest = max(e.length for e in examples)
        raise CampaignError(
            f"{where}: {n_cut} of {len(examples)} responses ({n_cut / len(examples):.0%}) are cut "
            f"(allowed {max_share:.0%}); raise it (the longest example is {longest} tokens)"
        )


def prompt_ids(
    tokenizer, template: str, messages: Sequence[dict], escape: bool = False
) -> list[int]:
    """The ids the model generates from: the conversation before the reference response, with the
    template's generation prompt, tokenized piece by piece as training tokenized it."""
    pieces = _pieces(tokenizer, template, messages, escape)
    while pieces and not pieces[-1][1]:  # what follows the last answer (a trailing newline)
        pieces.pop()
    return [t for piece, _answer in pieces[:-1] for t in piece]


def full_length(tokenizer, template: str, messages: Sequence[dict]) -> int:
    """Tokens of the whole formatted conversation (what train.max_length must hold)."""
    return sum(len(piece) for piece, _answer in _pieces(tokenizer, template, messages))


def response_length(tokenizer, messages: Sequence[dict]) -> int:
    """Tokens of the reference response plus EOS (what max_new_tokens must hold)."""
    return len(tokenizer(reference(messages), add_special_tokens=False)["input_ids"]) + 1


# ------------------------------------------------------------------ split files
@dataclass(frozen=True)
class Conversations:
    """One split's conversations, in file order (the split files' id and messages columns)."""

    ids: list[str]
    messages: list[list[dict]]

    def __len__(self) -> int:
        return len(self.ids)


def read_conversations(paths: Sequence[Path], name: str) -> Conversations:
    """The conversations of split files (`name`: the stage input, for messages); a file without
    a messages column comes from a data section that names no conversation."""
    import pandas as pd

    ids: list[str] = []
    talks: list[list[dict]] = []
    for path in paths:
        try:
            frame = pd.read_parquet(path)
        except (OSError, ValueError) as e:
            raise CampaignError(
                f"input '{name}': {path} is not a readable Parquet file ({e})"
            ) from None
        if "messages" not in frame.columns or "id" not in frame.columns:
            raise CampaignError(
                f"input '{name}': {path} has no messages column; the generation task needs "
                "data.fields.messages, or data.fields.prompt and data.fields.response"
            )
        for record_id, cell in zip(frame["id"], frame["messages"], strict=True):
            ids.append(str(record_id))
            talks.append(parse_messages(cell, f"{path}: record {record_id}"))
    return Conversations(ids, talks)


# ------------------------------------------------------------------ generating
# What a run, a floor or a variant generated, per item. No score: the evaluation scores the
# texts by model.generation.metric (evaluate/scoring.py), so changing the metric rescores and
# retrains nothing (the metric is in no run id nor any generating job's key).
PREDICTION_COLUMNS = (
    "id",
    "reference",
    "prediction",
    "new_tokens",
    "stopped_at_eos",
)
# No per-item wall time here: predictions are a stage's output, compared bit for bit by
# `campaign reproduce` and hashed into the keys downstream; timings go to the timings record.
# A trained run's predictions add each item's summed answer-token loss and token count.
RUN_PREDICTION_COLUMNS = (*PREDICTION_COLUMNS, "nll", "tokens")


def eos_token_ids(tokenizer, model) -> list[int]:
    """Where generation stops: the tokenizer's EOS and every EOS the model's generation config
    names (an instruct model can end a turn with a token other than its tokenizer's EOS)."""
    ids = {tokenizer.eos_token_id}
    config = getattr(model, "generation_config", None)
    extra = getattr(config, "eos_token_id", None)
    ids.update(extra if isinstance(extra, list) else [extra])
    return sorted(i for i in ids if i is not None)


def predict(
    model,
    tokenizer,
    template: str,
    split: Conversations,
    *,
    max_new_tokens: int,
    batch_size: int,
    escape: bool = False,
):
    """Generate from every conversation's prompt with the shared engine (train/engine.py).
    Returns (predictions frame with PREDICTION_COLUMNS, one row per item in split order; the
    engine's Generated record). `escape`: as training tokenized (data.special_tokens)."""
    import pandas as pd

    from campaign.train import generate

    prompts = [prompt_ids(tokenizer, template, m, escape) for m in split.messages]
    out = generate(
        model,
        tokenizer,
        prompts,
        max_new_tokens=max_new_tokens,
        batch_size=batch_size,
        eos_token_ids=eos_token_ids(tokenizer, model),
    )
    references = [reference(m) for m in split.messages]
    frame = pd.DataFrame(
        {
            "id": pd.array(split.ids, dtype="str"),
            "reference": pd.array(references, dtype="str"),
            "prediction": pd.array(out.texts, dtype="str"),
            "new_tokens": [len(t) for t in out.new_tokens],
            "stopped_at_eos": out.stopped_at_eos,
        }
    )
    return frame, out


# ------------------------------------------------------------------ preflight
@dataclass(frozen=True)
class Overfit:
    """The overfit check's result: the loss after each step, and whether greedy generation
    reproduces each sample response exactly and stops at EOS."""

    losses: list[float]
    reproduced: list[bool]

    @property
    def passed(self) -> bool:
        return all(self.reproduced)


def overfit(
    model, tokenizer, template: str, sample, *, steps: int, lr: float, seed: int
) -> Overfit:
    """Train `model` (in place) on `sample` conversations alone for `steps` full-batch steps,
    then generate from their prompts: a pipeline whose masks, template and generation agree
    reproduces every response; one that trains on the wrong tokens or stops in the wrong place
    does not. Uses the training loop's own loss (train/steps.py) and collate."""
    import torch

    from campaign.train import collate, generate

    torch.manual_seed(seed)
    examples = [encode(tokenizer, template, m, 10**9) for m in sample]
    pad = tokenizer.pad_token_id
    batch = collate([{"input_ids": e.input_ids, "labels": e.labels} for e in examples], pad)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr)
    from campaign.train import accumulate

    model.train()
    losses = []
    for _ in range(steps):
        optimizer.zero_grad()
        loss, count = accumulate(model, [batch], "causal_lm")
        optimizer.step()
        losses.append(float(loss) / count)
    model.eval()
    out = generate(
        model,
        tokenizer,
        [prompt_ids(tokenizer, template, m) for m in sample],
        max_new_tokens=max(response_length(tokenizer, m) for m in sample) + 2,
        batch_size=len(sample),
        eos_token_ids=eos_token_ids(tokenizer, model),
    )
    # The exact text and a stop at EOS (normalized exact match would forgive a trailing run).
    reproduced = [
        text.strip() == reference(m).strip() and stopped
        for text, m, stopped in zip(out.texts, sample, out.stopped_at_eos, strict=True)
    ]
    return Overfit(losses, reproduced)


# ------------------------------------------------------------------ the training loop's hooks
# model.chat_template's and model.generation's defaults: written once in core/defaults.py (the
# run ids, the schema's reference and these hooks read the one table).
CHAT_TEMPLATE_DEFAULT = MODEL_DEFAULTS["chat_template"]


def metric_of(model_spec: dict) -> str:
    """The per-item metric the evaluation scores generated text by (model.generation.metric):
    what it decides on, and quantize_select picks by. Read only by the evaluation's scoring."""
    return generation_settings(model_spec)["metric"]


@dataclass(frozen=True)
class Setup:
    """What a run of this task fixes before it trains: the template and how it generates, and
    the metric its generated score during training is judged by (model.generation.eval_items:
    generated_score; the evaluation's scores of the final predictions are evaluate/scoring.py's)."""

    template: str
    max_new_tokens: int
    batch_size: int
    max_truncated_share: float
    # data.special_tokens: refuse, escape or keep (data/control_tokens.py)
    special_tokens: str = "refuse"
    # model.generation.metric: what generated_score scores each item by
    metric: str = GENERATION_DEFAULTS["metric"]

    @property
    def escape(self) -> bool:
        return self.special_tokens == "escape"


def setup(model_spec: dict, tokenizer, root: Path) -> Setup:
    """The run's template (model.chat_template) and generation settings (model.generation)."""
    settings = generation_settings(model_spec)
    template = resolve_template(
        model_spec.get("chat_template", CHAT_TEMPLATE_DEFAULT), tokenizer, root
    )
    return Setup(
        template=template,
        max_new_tokens=settings["max_new_tokens"],
        batch_size=settings["batch_size"],
        max_truncated_share=settings["max_truncated_share"],
        special_tokens=special_tokens_policy(model_spec),
        metric=settings["metric"],
    )


def encode_split(run: Setup, tokenizer, split, max_length: int) -> list[dict]:
    """A split's examples as the loop batches them ({input_ids, labels}, loss on the answers)."""
    if split.messages is None:
        raise CampaignError(
            "model.task: generation, but the split files have no messages column; name "
            "data.fields.messages, or data.fields.prompt and data.fields.response"
        )
    talks = split_conversations(split)
    check_special_tokens(tokenizer, talks, run.special_tokens)
    out = []
    for _where, messages in talks:
        example = encode(tokenizer, run.template, messages, max_length, run.escape)
        out.append(
            {
                "input_ids": example.input_ids,
                "labels": example.labels,
                "example": example,  # the whole record, for check_train_examples
            }
        )
    return out


def check_train_examples(run: Setup, examples: Sequence[dict]) -> None:
    """Refuse to train when more than model.generation.max_truncated_share of the answers are
    cut by train.max_length (check_truncation; the preflight calls the same function)."""
    check_truncation(
        [e["example"] for e in examples],
        run.max_truncated_share,
        "train.max_length",
    )


def evaluate(
    model, tokenizer, run: Setup, split, examples, *, micro_batch, pad_id, device, final: bool
):
    """(mean loss per answer token, None, predictions frame or None): no score, the
    evaluation scores the texts (PREDICTION_COLUMNS says why).

    During training (final False) only the loss: generating every eval_every steps would cost
    more than the steps. On the saved model (final True) the split is generated, and the
    predictions carry each item's summed answer-token loss and its token count (nll,
    tokens: the evaluation's perplexity)."""
    import numpy as np
    import torch

    from campaign.train import collate

    model.eval()
    nll, tokens = [], []
    with torch.no_grad():
        for i in range(0, len(examples), micro_batch):
            chunk = [
                {"input_ids": e["input_ids"], "labels": e["labels"]}
                for e in examples[i : i + micro_batch]
            ]
            batch = {k: v.to(device) for k, v in collate(chunk, pad_id).items()}
            sums, counts = item_losses(model, batch)
            nll += sums
            tokens += counts
    count = sum(tokens)
    loss = float(np.sum(nll)) / count if count else float("nan")
    if not final:
        return loss, None, None
    frame, _talks = _generated(model, tokenizer, run, split)
    frame["nll"] = np.asarray(nll, dtype=np.float64)
    frame["tokens"] = np.asarray(tokens, dtype=np.int64)
    return loss, None, frame


def _generated(model, tokenizer, run: Setup, split):
    """(the predictions frame of greedy generations from the split's prompts with the run's
    template and settings, the split's conversations)."""
    talks = Conversations(
        list(split.ids),
        [parse_messages(c, f"record {i}") for i, c in zip(split.ids, split.messages, strict=True)],
    )
    frame, _out = predict(
        model,
        tokenizer,
        run.template,
        talks,
        max_new_tokens=run.max_new_tokens,
        batch_size=run.batch_size,
        escape=run.escape,
    )
    return frame, talks


def generated_score(model, tokenizer, run: Setup, split) -> float:
    """The mean per-item score in [0, 1] (model.generation.metric, text_scores.score_items) of
    greedy generations from the split's prompts: the training curve of model.generation.eval_items
    (the loop passes its fixed validation subsample). The model is left in eval mode."""
    from campaign.tasks.generation.text_scores import score_items

    model.eval()
    frame, talks = _generated(model, tokenizer, run, split)
    scores = score_items(
        run.metric, frame["prediction"].tolist(), frame["reference"].tolist(), talks.ids
    )
    return float(scores.mean())


def item_losses(model, batch) -> tuple[list[float], list[int]]:
    """Each row's summed cross-entropy over its answer tokens and their count (nats, tokens):
    the training loss split by item (position t predicts token t+1)."""
    import torch
    import torch.nn.functional as F

    from campaign.train import logits_of

    logits = logits_of(model, batch).float()
    labels = batch["labels"][:, 1:]
    per_token = F.cross_entropy(
        logits[:, :-1].transpose(1, 2), labels, ignore_index=IGNORE, reduction="none"
    )
    mask = labels != IGNORE
    sums = (per_token * mask).sum(dim=1, dtype=torch.float64).tolist()
    return [float(x) for x in sums], [int(x) for x in mask.sum(dim=1).tolist()]


def empty_predictions():
    import pandas as pd

    return pd.DataFrame({c: [] for c in RUN_PREDICTION_COLUMNS})


def tokenization_check(
    trainer, split, inspect: int, full=None, max_unknown_share: float = 1.0
) -> tuple[bool, str, dict]:
    """The preflight's tokenization check for this task: (passed, summary, details). Fails when
    an example carries no loss (its answers all cut, or a template that marks none), or when a
    record of `full` (the whole data: train, validation, test) spells a special token under
    data.special_tokens: refuse (one line naming file, record, field, token); more than
    max_truncated_share of the answers cut already stopped the Trainer (check_train_examples),
    which fails the check with that message. Shows `inspect` formatted examples with the masked
    tokens in [brackets]. max_unknown_share is not read: a chat model's tokenizer spells any
    text."""
    tok = trainer.tokenizer
    splits = [full.train, full.validation, full.test] if full is not None else [split]
    special = scan_special_tokens(tok, splits, trainer.run_setup.special_tokens)
    examples = [e["example"] for e in trainer.examples["train"]]
    no_loss = [split.ids[i] for i, e in enumerate(examples) if e.targets == 0]
    cut = sum(e.truncated for e in examples)
    details = {
        "task": "generation",
        "max_length": trainer.recipe.max_length,
        "examples": len(examples),
        "target_truncated": cut,
        "no_loss": len(no_loss),
        "longest": max((e.length for e in examples), default=0),
        "special_tokens": special,
        "inspected": [
            {
                "id": split.ids[i],
                "marked": show_example(tok, e),
                "n_tokens": len(e.input_ids),
                "targets": e.targets,
                "truncated": e.truncated,
            }
            for i, e in enumerate(examples[:inspect])
        ],
    }
    problems = []
    if special_token_refusal(special):
        problems.append(special_token_refusal(special))
    if no_loss:
        problems.append(
            f"{len(no_loss)} of {len(examples)} examples carry no loss (first: {no_loss[0]})"
        )
    if problems:
        return False, "; ".join(problems), details
    targets = sum(e.targets for e in examples)
    return (
        True,
        f"every example carries loss ({targets} assistant tokens in {len(examples)} examples); "
        f"{cut} answers cut by max_length {trainer.recipe.max_length}",
        details,
    )


def not_reproduced(trainer, split, n: int, details: dict) -> str | None:
    """The preflight overfit check's second half: after the loss fell on the first `n` sample
    conversations, greedy generation from their prompts must give their answers back exactly,
    stopping at EOS (a mask, template or EOS fault that the loss alone hides shows here). Adds
    the outputs to `details`; returns what went wrong in words, or None."""
    limit = trainer.recipe.max_length
    cut = [
        (record_id, e["example"].length)
        for record_id, e in zip(split.ids[:n], trainer.examples["train"][:n], strict=False)
        if e["example"].length > limit
    ]
    if cut:  # never trained whole: generating from its whole prompt is unbounded and moot
        return (
            f"{len(cut)} of {n} sample conversations are longer than train.max_length {limit} "
            f"(first {cut[0][0]}: {cut[0][1]} tokens), so their answers cannot come back whole"
        )
    talks = Conversations(
        list(split.ids[:n]),
        [
            parse_messages(c, f"record {i}")
            for i, c in zip(split.ids[:n], split.messages[:n], strict=True)
        ],
    )
    longest = max(response_length(trainer.tokenizer, m) for m in talks.messages)
    frame, _ = predict(
        trainer.model,
        trainer.tokenizer,
        trainer.run_setup.template,
        talks,
        max_new_tokens=longest + 2,
        batch_size=n,
        escape=trainer.run_setup.escape,
    )
    details["generated"] = frame[["id", "reference", "prediction", "stopped_at_eos"]].to_dict(
        "records"
    )
    # The exact text and a stop at EOS: normalized exact match would forgive "Lima........",
    # the trail of a model that never learned to end its answer.
    same = frame["prediction"].str.strip() == frame["reference"].str.strip()
    wrong = frame[~(same & frame["stopped_at_eos"])]
    if wrong.empty:
        return None
    first = wrong.iloc[0]
    return (
        f"greedy generation reproduced {n - len(wrong)} of {n} answers (first miss "
        f"{first['id']}: {first['prediction'][:40]!r} for {first['reference'][:40]!r})"
    )
