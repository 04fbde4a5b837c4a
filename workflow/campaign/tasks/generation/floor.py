"""The floors of a generative task: what a fine-tune must beat for its cost to be worth paying,
generated on the same items as the trained runs (the evaluation scores all of them by the same
text metric).

- retrieval: the reference response of the nearest training prompt by TF-IDF cosine similarity
  (word unigrams and bigrams, sublinear term frequency, fitted on the train split's prompts). It
  answers "does the model do more than look up a similar example?". Ties go to the earliest
  training record, so the floor is a function of the split alone.
- zero_shot: the base model without fine-tuning, prompted with the same template as the runs
  (the caller formats: the task module owns the template) and decoded by the same engine
  (campaign.train.engine). It answers "did fine-tuning add anything to the instruct model?".
- few_shot: the same base model with k training conversations as earlier turns of its prompt
  (few_shot.py). It answers "do a few examples in the prompt do as well as a fine-tune?".

The base model the prompted floors generate with is the runs' base as the runs hold it
(floor_stage.py loads it): on the device the runs' jobs select, with the linear weights
train.base_quantization gives the runs' frozen base, prompted with the template the runs are
scored with.

A conversation here is the task's canonical record: a list of {"role", "content"} whose last
entry is the assistant's reference response; its prompt text (for TF-IDF) is the content of the
turns before it, one per line.

Each floor's per-item frame has the columns the generation runs' predictions have (id, reference,
prediction) plus what explains it (the retrieval's neighbour and similarity; the zero-shot
run's prompt and generated tokens, prompt_tokens and new_tokens, and whether it stopped at EOS),
and each is timed (fit, predict) as the classification floors are
(campaign.evaluate.floor.Timings); the floor stage adds each prompted floor's tokens to its
timings (floor_stage.record_tokens), so the budget can price a request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from campaign.core.errors import CampaignError
from campaign.evaluate import Timings

FLOORS = ("retrieval", "zero_shot", "few_shot")
# The floors that prompt the pretrained base model (none for a from_config model).
PROMPTED = ("zero_shot", "few_shot")
# TF-IDF as a practitioner would first try it for nearest-prompt lookup; min_df 1: a rare word
# is what makes two prompts neighbours.
TFIDF = {"ngram_range": (1, 2), "min_df": 1, "sublinear_tf": True, "max_features": 200_000}


def prompt_text(conversation: Sequence[Mapping]) -> str:
    """The text TF-IDF sees of a conversation: the content of every turn before the last."""
    return "\n".join(str(m["content"]) for m in conversation[:-1])


def reference_text(conversation: Sequence[Mapping]) -> str:
    """The last (assistant) turn's content: the reference every floor and run is scored on."""
    return str(conversation[-1]["content"])


@dataclass(frozen=True)
class Retrieved:
    """The retrieval floor's answer for each query prompt, in input order."""

    responses: list[str]
    neighbours: np.ndarray  # (n_queries,) index into the training records
    similarity: np.ndarray  # (n_queries,) cosine similarity in [0, 1]


def tfidf_similarity(train_prompts: list[str]):
    """Fitted once on the train split's prompts: query prompts -> (n_queries, n_train) cosine
    similarities in [0, 1] (the retrieval floor's, and the few-shot floor's nearest choice)."""
    from sklearn.feature_extraction.text import TfidfVectorizer

    vectorizer = TfidfVectorizer(**TFIDF)
    try:
        train = vectorizer.fit_transform(train_prompts)
    except ValueError:  # scikit-learn's "empty vocabulary"
        raise CampaignError(
            "retrieval floor: the training prompts hold no word TF-IDF can use"
        ) from None

    def similarity(prompts: list[str]) -> np.ndarray:
        if not prompts:
            return np.zeros((0, train.shape[0]))
        # Rows are L2-normalized, so the dot product is the cosine.
        return (vectorizer.transform(prompts) @ train.T).toarray()

    return similarity


def nearest(similarity: np.ndarray, k: int) -> np.ndarray:
    """(n_queries, k) indices of each query's k most similar training records, most similar
    first; ties go to the earliest record (a query with no known word: records 0..k-1)."""
    if k == 1:  # argmax takes the first of tied maxima, in one pass over each row
        return similarity.argmax(axis=1).astype(np.int64)[:, None]
    return np.argsort(-similarity, axis=1, kind="stable")[:, :k].astype(np.int64)


def retrieval_model(train_prompts: list[str], train_responses: list[str]):
    """Fitted once on the train split: query prompts -> Retrieved."""
    if not train_prompts or len(train_prompts) != len(train_responses):
        raise CampaignError(
            f"retrieval floor: {len(train_prompts)} training prompts for "
            f"{len(train_responses)} responses (need the same number, at least one)"
        )
    similarity = tfidf_similarity(train_prompts)

    def retrieve(prompts: list[str]) -> Retrieved:
        if not prompts:
            empty = np.zeros(0)
            return Retrieved([], empty.astype(np.int64), empty)
        sims = similarity(prompts)
        best = nearest(sims, 1)[:, 0]
        return Retrieved(
            [train_responses[i] for i in best],
            best,
            sims[np.arange(len(prompts)), best],
        )

    return retrieve


@dataclass(frozen=True)
class EvalSet:
    """One evaluation split as the floors need it."""

    ids: list[str]
    conversations: list[list[dict]]


@dataclass(frozen=True)
class BaseModel:
    """The untuned base model for the prompted floors, with how the runs prompt and decode.

    prompt_ids: a whole conversation -> the ids of its prompt (every turn before the reference,
    formatted by the task's template with the generation prompt added): the same function the
    trained runs' evaluation uses (the generation task's prompt_ids with tokenizer and template
    bound). max_positions: the model's max_position_embeddings (None: not bounded)."""

    model: object
    tokenizer: object
    prompt_ids: Callable[[Sequence[Mapping]], list[int]]
    max_new_tokens: int
    batch_size: int
    eos_token_ids: list[int]
    max_positions: int | None = None


def floor_frame(ids, references, predictions, **extra):
    """A floor's per-item frame: id, reference, prediction, then `extra`'s columns."""
    import pandas as pd

    out = pd.DataFrame(
        {
            "id": pd.Series(ids, dtype="string"),
            "reference": pd.Series(references, dtype="string"),
            "prediction": pd.Series(predictions, dtype="string"),
        }
    )
    for name, values in extra.items():
        out[name] = values
    return out


def generation_floors(
    train: Sequence[Sequence[Mapping]],
    evals: Mapping[str, EvalSet],
    base: BaseModel | None = None,
    timings: Timings | None = None,
) -> dict[str, dict]:
    """{floor: {split: per-item frame}} for every floor that can run: retrieval always, the
    zero-shot base model when `base` is given. `train`: the train split's conversations (the
    few-shot floor is few_shot.few_shot_floor)."""
    timings = timings or Timings()
    out: dict[str, dict] = {"retrieval": {}}
    with timings.fit("retrieval"):
        retrieve = retrieval_model(
            [prompt_text(c) for c in train], [reference_text(c) for c in train]
        )
    for split, data in evals.items():
        refs = [reference_text(c) for c in data.conversations]
        with timings.predict("retrieval", split, len(data.ids)):
            got = retrieve([prompt_text(c) for c in data.conversations])
        out["retrieval"][split] = floor_frame(
            data.ids,
            refs,
            got.responses,
            neighbour=got.neighbours,
            similarity=got.similarity,
        )
    if base is not None:
        out["zero_shot"] = _zero_shot(base, evals, timings)
    return out


def base_generate(base: BaseModel, prompts: list[list[int]]):
    """The engine's greedy outputs of the base model on `prompts`, as the runs generate."""
    from campaign.train import generate

    return generate(
        base.model,
        base.tokenizer,
        prompts,
        max_new_tokens=base.max_new_tokens,
        batch_size=base.batch_size,
        eos_token_ids=base.eos_token_ids,
    )


def _zero_shot(base: BaseModel, evals: Mapping[str, EvalSet], timings: Timings):
    frames = {}
    with timings.fit("zero_shot"):
        pass  # nothing is trained: the floor's training cost is zero by construction
    for split, data in evals.items():
        refs = [reference_text(c) for c in data.conversations]
        prompts = [base.prompt_ids(c) for c in data.conversations]
        with timings.predict("zero_shot", split, len(data.ids)):
            got = base_generate(base, prompts)
        frames[split] = floor_frame(
            data.ids,
            refs,
            got.texts,
            new_tokens=[len(t) for t in got.new_tokens],
            stopped_at_eos=got.stopped_at_eos,
            prompt_tokens=np.array([len(p) for p in prompts], dtype=np.int64),
        )
    return frames


def write_floors(frames: Mapping[str, Mapping], outputs: Mapping[str, str]) -> None:
    """Each floor's frame of each split to outputs["<floor>_<split>"] (Parquet, atomically).
    Every frame is built before the first is written, so a failure leaves no partial set."""
    import io

    from campaign.core.fsutil import atomic_write_bytes

    wanted = {
        f"{floor}_{split}": frame for floor, s in frames.items() for split, frame in s.items()
    }
    unknown = sorted(set(wanted) - set(outputs))
    if unknown:
        raise CampaignError(f"generation floors: no output path declared for {unknown}")
    for name, frame in wanted.items():
        buffer = io.BytesIO()
        # No pandas index, fixed writer options: the same frame gives the same bytes.
        frame.to_parquet(buffer, index=False, engine="pyarrow", compression="zstd")
        atomic_write_bytes(outputs[name], buffer.getvalue())


def runs_base(model, method: str | None, device_type: str):
    """The base weights a run with train.base_quantization `method` generates with before its
    adapters move them: each linear weight quantized as the run's frozen base is
    (campaign.train.quantize_base), then dequantized to fp32 as the run's saved model is
    (basequant.merge_dequantized). None: the model unchanged."""
    if method is None:
        return model
    from campaign.train import dequantize_all, quantize_base

    return dequantize_all(quantize_base(model, method, device_type))
