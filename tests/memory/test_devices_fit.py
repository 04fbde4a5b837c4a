"""train.devices in the memory estimate: every process holds the whole model and its own
micro-batches, so the need is per card and the fit table says how many cards a run takes."""

from __future__ import annotations

from campaign import memory


def test_a_run_on_two_devices_needs_the_same_bytes_per_card_on_two_cards():
    spec = {
        "task": "causal_lm",
        "source": "from_config",
        "config": {
            "architecture": "gpt2",
            "hidden_size": 48,
            "num_hidden_layers": 2,
            "num_attention_heads": 3,
            "intermediate_size": 80,
            "max_position_embeddings": 64,
            "dropout": 0.0,
        },
        "tokenizer": {"source": "train_split", "vocab_size": 100},
    }
    recipe = {"micro_batch": 4, "max_length": 32, "precision": "fp32", "lora": None}
    one = memory.estimate_memory(spec, recipe)
    two = memory.estimate_memory(spec, {**recipe, "devices": 2})
    assert two["bytes"] == one["bytes"] and two["peak_bytes"] == one["peak_bytes"]
    assert (one["settings"]["devices"], two["settings"]["devices"]) == (1, 2)
    cards = [{"name": "c", "memory_gib": 1}]
    (row1,), (row2,) = memory.fit_table(one, cards, 0.1), memory.fit_table(two, cards, 0.1)
    assert row2["need_bytes"] == row1["need_bytes"] and row2["fits"] == row1["fits"]
    assert (row1["devices"], row2["devices"]) == (1, 2)
    header, _, line = memory.format_fit_table([row2]).splitlines()
    start = header.index("cards/run")
    assert line[start : start + len("cards/run")].strip() == "2"
