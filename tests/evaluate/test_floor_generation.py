"""The generative task's floors (campaign.tasks.generation.floor): the retrieval answer of the
nearest training prompt, and the untuned base model decoded by the shared engine."""

from __future__ import annotations

import pandas as pd
import pytest
from genkit import tiny_llama, tiny_tokenizer

from campaign.core.errors import CampaignError
from campaign.evaluate.floor import Timings
from campaign.tasks.generation.floor import (
    BaseModel,
    EvalSet,
    generation_floors,
    retrieval_model,
    write_floors,
)
from campaign.train.engine import generate


def conv(prompt: str, response: str, system: str | None = None) -> list[dict]:
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": prompt}, {"role": "assistant", "content": response}]


TRAIN = [
    conv("what is the capital of france", "Paris"),
    conv("what is the capital of italy", "Rome"),
    conv("which colour is the sky", "blue"),
    conv("which colour is grass", "green"),
]


def test_retrieval_answers_with_the_nearest_training_prompt():
    retrieve = retrieval_model([c[0]["content"] for c in TRAIN], [c[-1]["content"] for c in TRAIN])
    got = retrieve(["capital of italy, please", "the sky: which colour?", "zzz unknown"])
    assert got.responses == ["Rome", "blue", "Paris"]  # no shared word: ties go to record 0
    assert got.neighbours.tolist() == [1, 2, 0]
    assert 0 < got.similarity[0] <= 1 and got.similarity[2] == 0.0


def test_retrieval_refuses_unusable_training_prompts():
    with pytest.raises(CampaignError, match="no word TF-IDF can use"):
        retrieval_model(["", "  "], ["a", "b"])
    with pytest.raises(CampaignError, match="2 training prompts for 1 responses"):
        retrieval_model(["a b", "c d"], ["a"])


def test_floors_generate_on_every_item(tmp_path):
    tok, model = tiny_tokenizer(), tiny_llama()
    evals = {
        "validation": EvalSet(
            ["v1", "v2"], [conv("capital of france", "paris"), conv("grass", "red")]
        ),
        "test": EvalSet(["t1"], [conv("the sky colour", "Blue.", system="be brief")]),
    }

    def prompt_ids(c):  # what the task's template would do, in the tiny vocabulary
        return tok.encode(" ".join(m["content"] for m in c[:-1]), add_special_tokens=False)

    base = BaseModel(model, tok, prompt_ids, max_new_tokens=4, batch_size=2, eos_token_ids=[2])
    timings = Timings()
    frames = generation_floors(TRAIN, evals, base=base, timings=timings)
    retrieval = frames["retrieval"]
    assert retrieval["validation"]["prediction"].tolist() == ["Paris", "green"]
    assert retrieval["test"]["prediction"].tolist() == ["blue"]
    # The zero-shot floor is the engine's output on the base model (the evaluation scores it).
    zs = frames["zero_shot"]["validation"]
    alone = generate(
        model,
        tok,
        [prompt_ids(c) for c in evals["validation"].conversations],
        max_new_tokens=4,
        batch_size=1,
        eos_token_ids=[2],
    )
    assert zs["prediction"].tolist() == alone.texts
    assert zs["reference"].tolist() == ["paris", "red"]
    assert set(timings.as_dict()["floors"]) == {"floor/retrieval", "floor/zero_shot"}

    outputs = {f"{f}_{s}": str(tmp_path / f"{f}_{s}.parquet") for f in frames for s in evals}
    write_floors(frames, outputs)
    back = pd.read_parquet(outputs["retrieval_validation"])
    assert list(back.columns[:3]) == ["id", "reference", "prediction"]
    assert "score" not in back.columns  # the evaluation scores the texts
    assert back["id"].tolist() == ["v1", "v2"]
    with pytest.raises(CampaignError, match="no output path declared"):
        write_floors(frames, {"retrieval_validation": outputs["retrieval_validation"]})
