"""The few-shot floor of a generative task: the untuned base model with k training conversations
as earlier turns of its prompt, decoded by the runs' engine and settings. It answers the question
a fine-tune must settle before it is paid for: do a few examples in the prompt do as well?

`evaluation.few_shot` says which examples (the floor runs when evaluation.floor names few_shot):

- k: examples per prompt;
- choose: `seeded`, one draw of k training records without replacement
  (numpy.random.default_rng(campaign.seed)), the same examples in the same order for every item
  (a fixed prompt prefix); or `nearest`, each item's k training records whose prompts are most
  similar to its prompt by the retrieval floor's TF-IDF cosine (floor.tfidf_similarity; ties to
  the earliest record), the most similar last, next to the question.

Examples come from the train split only: the choice sees the evaluated prompts (to rank the
training ones) and never their references, and no evaluated record can be an example.

The prompt: the item's system message (if any), each example's turns without its own system
message, then the item's turns; formatted by the runs' template (BaseModel.prompt_ids), so every
turn is tokenized as training tokenizes it. Its per-item frame adds `prompt_tokens` (what one
request's prompt costs to serve, beside `new_tokens`) and `examples` (the training ids used,
comma-joined, in prompt order).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from campaign.core.errors import CampaignError
from campaign.tasks.generation.floor import (
    BaseModel,
    EvalSet,
    base_generate,
    floor_frame,
    nearest,
    prompt_text,
    reference_text,
    tfidf_similarity,
)

KEY = "evaluation.few_shot"
CHOICES = ("seeded", "nearest")


@dataclass(frozen=True)
class FewShot:
    """evaluation.few_shot as the floor reads it; seed: campaign.seed (the seeded choice)."""

    k: int
    choose: str
    seed: int | None = None

    @classmethod
    def of(cls, spec: Mapping) -> FewShot:
        if spec.get("choose") not in CHOICES:
            raise CampaignError(f"{KEY}.choose: {spec.get('choose')!r} is not one of {CHOICES}")
        if spec["choose"] == "seeded" and spec.get("seed") is None:
            raise CampaignError(f"{KEY}: the seeded choice needs campaign.seed")
        return cls(int(spec["k"]), spec["choose"], spec.get("seed"))


def chooser(train_prompts: list[str], settings: FewShot):
    """Fitted once on the train split: evaluated prompts -> (n_items, k) indices into the
    training records, in prompt order (the seeded draw's order; nearest: most similar last)."""
    n = len(train_prompts)
    if settings.k > n:
        raise CampaignError(
            f"{KEY}.k: {settings.k} examples per prompt, but the train split has {n} records"
        )
    if settings.choose == "seeded":
        rng = np.random.default_rng(settings.seed)
        drawn = rng.choice(n, size=settings.k, replace=False).astype(np.int64)
        return lambda prompts: np.tile(drawn, (len(prompts), 1))
    similarity = tfidf_similarity(train_prompts)
    return lambda prompts: nearest(similarity(prompts), settings.k)[:, ::-1]


def with_examples(examples: Sequence[Sequence[Mapping]], conversation: Sequence[Mapping]):
    """The conversation the base model is prompted with: the item's system message, each
    example's turns (its system message dropped), then the item's other turns."""

    def turns(talk):
        return [dict(m) for m in talk if m["role"] != "system"]

    head = [dict(m) for m in conversation if m["role"] == "system"]
    return head + [m for e in examples for m in turns(e)] + turns(conversation)


def few_shot_floor(
    base: BaseModel,
    train: EvalSet,
    evals: Mapping[str, EvalSet],
    settings: FewShot,
    timings,
) -> dict:
    """{split: per-item frame} of the few-shot floor (the zero-shot frame's columns plus
    prompt_tokens and examples). `train`: the train split's ids and conversations; `timings`:
    the floor stage's (campaign.evaluate.floor.Timings)."""
    with timings.fit("few_shot"):
        choose = chooser([prompt_text(c) for c in train.conversations], settings)
    frames = {}
    for split, data in evals.items():
        with timings.predict("few_shot", split, len(data.ids)):
            picked = choose([prompt_text(c) for c in data.conversations])
            prompts = [
                base.prompt_ids(with_examples([train.conversations[i] for i in row], c))
                for row, c in zip(picked, data.conversations, strict=True)
            ]
            _check_length(base, settings, split, data.ids, prompts)
            got = base_generate(base, prompts)
        frames[split] = floor_frame(
            data.ids,
            [reference_text(c) for c in data.conversations],
            got.texts,
            new_tokens=[len(t) for t in got.new_tokens],
            stopped_at_eos=got.stopped_at_eos,
            prompt_tokens=np.array([len(p) for p in prompts], dtype=np.int64),
            examples=[",".join(train.ids[i] for i in row) for row in picked],
        )
    return frames


def _check_length(base: BaseModel, settings: FewShot, split, ids, prompts) -> None:
    """A prompt whose examples push it and its answer past the model's positions is refused:
    the model would generate from positions it never learnt."""
    if base.max_positions is None or not prompts:
        return
    longest = max(range(len(prompts)), key=lambda i: len(prompts[i]))
    need = len(prompts[longest]) + base.max_new_tokens
    if need > base.max_positions:
        raise CampaignError(
            f"{KEY}.k: the {settings.k}-shot prompt of {split} item {ids[longest]} is "
            f"{len(prompts[longest])} tokens; with model.generation.max_new_tokens "
            f"{base.max_new_tokens} it passes the model's max_position_embeddings "
            f"({base.max_positions}): lower k"
        )
