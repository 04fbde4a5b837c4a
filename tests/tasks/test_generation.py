"""The generation task's formatting: conversations checked record by record, the chat template
applied, the loss on the assistant's tokens only (shown on a tiny Llama with grouped-query
attention), truncated answers counted and refused past a share."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import yaml

from campaign.core.errors import CampaignError
from campaign.data import conversations as conv
from campaign.tasks import TASKS, TaskModule, get, module_of
from campaign.tasks.generation import chat as gen
from campaign.train import models

ROOT = Path(__file__).resolve().parents[2]

PAIRS = [
    ("What is the capital of France?", "Paris."),
    ("Name a prime number above ten.", "Eleven is one."),
    ("Which package gives the ls command?", "coreutils"),
    ("Translate 'chat' from French.", "cat"),
]
# A ChatML-style template like SmolLM2's, read from a file (model.chat_template: <path>).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer():
    texts = [p + " " + r for p, r in PAIRS] + ["User: System: Assistant:"]
    return models.train_tokenizer(texts, "llama", vocab_size=300, min_frequency=1, lowercase=False)


@pytest.fixture(scope="module")
def tiny_llama(tokenizer):
    cfg = dict(
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=128,
        dropout=0.0,
    )
    torch.manual_seed(0)
    import transformers as tf

    return tf.LlamaForCausalLM(models.llama_config(cfg, tokenizer)).eval()


def test_the_task_is_registered_with_its_floors_and_no_label_stratification():
    task = get("generation")
    assert task.scoring == "generated_text"
    assert task.floors == ("retrieval", "zero_shot", "few_shot")
    assert not task.stratify_by_label
    with pytest.raises(CampaignError, match=r"model.task: 'chat'.*generation"):
        get("chat")
    # Every task of the schema's enum is a module whose TASK is a TaskModule of that task.
    schema = yaml.safe_load((ROOT / "workflow/schemas/params.schema.yaml").read_text())
    names = schema["properties"]["model"]["properties"]["task"]["enum"]
    assert set(TASKS) == set(names)
    for name in names:
        module = module_of(name)
        assert isinstance(module, TaskModule) and module.info.name == name


def test_a_prompt_response_pair_and_a_messages_cell_give_the_same_conversation():
    pair = conv.from_prompt_response("Hi?", "Hello.", system="Be brief.")
    cell = json.dumps(pair)
    assert conv.parse_messages(cell, "data.jsonl:3: field 'messages'") == pair
    assert conv.reference(pair) == "Hello."
    assert conv.prompt_messages(pair) == pair[:2]
    assert conv.dedup_text(pair) == "Be brief.\nHi?\nHello."
    assert json.loads(conv.dump_messages(pair)) == pair


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("[{'role': 'user'}", r"not a JSON list of messages"),
        ("[]", r"expected a non-empty list"),
        ('[{"role": "user", "content": "q"}]', r"last message is the user's"),
        ('[{"role": "bot", "content": "q"}]', r"messages\[0\]\.role is 'bot'"),
        (
            '[{"role": "user", "content": " "}, {"role": "assistant", "content": "a"}]',
            r"messages\[0\]\.content is empty",
        ),
        (
            '[{"role": "user", "content": "q", "name": "x"},'
            ' {"role": "assistant", "content": "a"}]',
            r"messages\[0\] has unknown key\(s\) name",
        ),
        ('[{"role": "assistant", "content": "a"}]', r"no user message"),
        (
            '[{"role": "user", "content": "q"}, {"role": "system", "content": "s"},'
            ' {"role": "assistant", "content": "a"}]',
            r"messages\[1\] is a system message",
        ),
        ('["q", "a"]', r"messages\[0\] must be an object"),
    ],
)
def test_a_malformed_conversation_is_one_line_naming_file_and_record(value, message):
    where = "data/raw/chat.jsonl:7: field 'messages'"
    with pytest.raises(CampaignError, match=message) as e:
        conv.parse_messages(value, where)
    assert str(e.value).startswith(where)
    assert "\n" not in str(e.value)


def test_the_loss_covers_exactly_each_response_and_its_eos(tokenizer):
    template = gen.resolve_template("none", tokenizer, root=None)
    for prompt, response in PAIRS:
        ex = gen.encode(tokenizer, template, conv.from_prompt_response(prompt, response), 64)
        target_ids = [
            t for t, lab in zip(ex.input_ids, ex.labels, strict=True) if lab != gen.IGNORE
        ]
        # the targets are the response's own tokens then EOS, and nothing of the prompt
        assert tokenizer.decode(target_ids[:-1]).strip() == response
        assert target_ids[-1] == tokenizer.eos_token_id
        assert not ex.truncated
        # what the model generates from is exactly the masked part before the answer
        prompt = gen.prompt_ids(tokenizer, template, conv.from_prompt_response(prompt, response))
        first = ex.labels.index(next(lab for lab in ex.labels if lab != gen.IGNORE))
        assert ex.input_ids[: len(prompt)] == prompt
        assert first == len(prompt)


def test_every_assistant_turn_of_a_conversation_is_a_target(tokenizer, tmp_path):
    (tmp_path / "chatml.jinja").write_text(CHATML)
    tokenizer = _with_chatml(tokenizer)
    template = gen.resolve_template("chatml.jinja", tokenizer, root=tmp_path)
    talk = [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And a prime above ten?"},
        {"role": "assistant", "content": "Eleven."},
    ]
    ex = gen.encode(tokenizer, template, talk, 128)
    shown = gen.show_example(tokenizer, ex)
    # the two answers with their <|im_end|> are the targets; everything else is in brackets
    assert shown == (
        "[<|im_start|>system\nAnswer briefly.<|im_end|>\n<|im_start|>user\nCapital of France?"
        "<|im_end|>\n<|im_start|>assistant\n]Paris.<|im_end|>[\n<|im_start|>user\nAnd a prime "
        "above ten?<|im_end|>\n<|im_start|>assistant\n]Eleven.<|im_end|>[\n]"
    )
    # generation starts where the last answer starts, from the very ids training saw before it
    prompt = gen.prompt_ids(tokenizer, template, talk)
    assert ex.input_ids[: len(prompt)] == prompt
    assert ex.labels[len(prompt) - 1] == gen.IGNORE != ex.labels[len(prompt)]
    assert tokenizer.decode(ex.input_ids[len(prompt) :]).startswith("Eleven.")


def _with_chatml(tokenizer):
    tok = tokenizer.__class__(
        tokenizer_object=tokenizer.backend_tokenizer.__class__.from_str(
            tokenizer.backend_tokenizer.to_str()
        )
    )
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token, tok.pad_token = "<|im_end|>", tokenizer.pad_token
    return tok


def test_the_model_loss_is_the_cross_entropy_of_the_assistant_tokens_only(tokenizer, tiny_llama):
    """On a tiny Llama with GQA (4 query heads, 2 key/value heads): the loss transformers computes
    from the example's labels equals the mean next-token cross-entropy over the response tokens,
    and changing the prompt's labels' would-be targets changes nothing."""
    assert tiny_llama.config.num_key_value_heads < tiny_llama.config.num_attention_heads
    template = gen.PLAIN_TEMPLATE
    ex = gen.encode(tokenizer, template, conv.from_prompt_response(*PAIRS[0]), 64)
    ids = torch.tensor([ex.input_ids])
    with torch.no_grad():
        out = tiny_llama(input_ids=ids, labels=torch.tensor([ex.labels]))
    logp = torch.log_softmax(out.logits[0, :-1].double(), dim=-1)
    positions = [t for t in range(1, len(ex.labels)) if ex.labels[t] != gen.IGNORE]
    manual = -sum(logp[t - 1, ex.input_ids[t]] for t in positions) / len(positions)
    assert len(positions) == ex.targets > 1
    assert float(out.loss) == pytest.approx(float(manual), rel=1e-5)
    everything = -sum(logp[t - 1, ex.input_ids[t]] for t in range(1, len(ex.input_ids)))
    assert float(out.loss) != pytest.approx(float(everything) / (len(ex.input_ids) - 1), rel=1e-3)


def test_a_cut_answer_is_counted_and_too_many_refuse(tokenizer):
    template = gen.PLAIN_TEMPLATE
    talks = [conv.from_prompt_response(p, r) for p, r in PAIRS]
    lengths = [gen.full_length(tokenizer, template, t) for t in talks]
    assert lengths == [len(gen.encode(tokenizer, template, t, 999).input_ids) for t in talks]
    shortest = min(lengths)
    examples = gen.encode_all(tokenizer, template, talks, shortest)
    cut = [n > shortest for n in lengths]
    assert [e.truncated for e in examples] == cut
    assert all(len(e.input_ids) <= shortest for e in examples)
    assert gen.truncated_share(examples) == sum(cut) / len(cut)
    gen.check_truncation(examples, max_share=1.0, where="train.max_length")
    with pytest.raises(CampaignError, match=r"train.max_length: \d of 4 responses .* are cut"):
        gen.check_truncation(examples, max_share=0.0, where="train.max_length")
    # max_new_tokens sized on the responses: the longest response plus its EOS
    assert max(gen.response_length(tokenizer, t) for t in talks) >= 2


def test_template_settings_refuse_with_the_key(tokenizer, tmp_path):
    with pytest.raises(CampaignError, match=r"model.chat_template: model, but this tokenizer"):
        gen.resolve_template("model", tokenizer, root=tmp_path)
    with pytest.raises(CampaignError, match=r"model.chat_template: missing.jinja: no such file"):
        gen.resolve_template("missing.jinja", tokenizer, root=tmp_path)
    no_eos = "{% for m in messages %}{{ m['content'] }}\n{% endfor %}"
    with pytest.raises(CampaignError, match=r"does not end with the EOS token"):
        gen.encode(tokenizer, no_eos, conv.from_prompt_response("q", "a"), 64)
    broken = "{% for m in messages %}{{ m['content'] }"
    with pytest.raises(CampaignError, match=r"model.chat_template: the template fails to render"):
        gen.encode(tokenizer, broken, conv.from_prompt_response("q", "a"), 64)


def test_llama_from_config_needs_kv_heads_that_divide_the_query_heads(tokenizer):
    cfg = dict(
        hidden_size=32,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=3,
        intermediate_size=64,
        max_position_embeddings=64,
        dropout=0.0,
    )
    with pytest.raises(CampaignError, match=r"model.config.num_key_value_heads: 3 must divide"):
        models.llama_config(cfg, tokenizer)


def test_a_chat_template_file_is_an_input_of_every_job_that_formats_with_it(tmp_path):
    """model.chat_template naming a file makes it a derived input (its content in the key) of
    the training and preflight jobs, the floors and the quantize jobs: editing it retrains and
    rescores instead of reusing results made with the old template. model and none name none."""
    from campaign.evaluate import floor_inputs
    from campaign.quantize.inputs import derive_inputs as quantize_inputs
    from campaign.train.command import derive_inputs as train_inputs

    model = {"source": "models/base", "task": "generation", "chat_template": "t/chat.jinja"}
    expected = [tmp_path / "t/chat.jinja"]
    run = {"model": model, "train": {"lr": 1e-3}, "seed": 1}
    assert train_inputs(run, tmp_path)["chat_template"] == expected
    preflight = {"run": {"model": model, "train": {"lr": 1e-3}}, "preflight": {}}
    assert train_inputs(preflight, tmp_path)["chat_template"] == expected
    floors = {"floors": ["retrieval", "zero_shot"], "model": model}
    assert floor_inputs(floors, tmp_path)["chat_template"] == expected
    assert (
        quantize_inputs({"base_source": None, "model": model}, tmp_path)["chat_template"]
        == expected
    )
    for setting in ("model", "none"):
        named = {**run, "model": {**model, "chat_template": setting}}
        assert train_inputs(named, tmp_path)["chat_template"] == []
