"""The causal_lm task: a decoder (GPT-2) scores every label's response after the prompt; the
probabilities are the softmax of the labels' total log-likelihoods. The loss is on the response
tokens; its examples pack (train.packing)."""

from __future__ import annotations

from campaign.core.tasks import TASKS
from campaign.tasks.labels import LabelTask


class CausalLM(LabelTask):
    info = TASKS["causal_lm"]

    # ------------------------------------------------------------------ data
    # ------------------------------------------------------------------ end data

    # ------------------------------------------------------------------ train
    def check_architecture(self, architecture: str) -> None:
        super().check_architecture(architecture)
        if architecture != "gpt2":
            from campaign.core.errors import CampaignError

            raise CampaignError(
                f"model.config.architecture: {self.info.name} needs gpt2 (a decoder)"
            )

    def label_format(self, tokenizer, labels, max_length):
        """The separator, each label's response tokens and the prompt's token budget
        (train.CausalFormat)."""
        from campaign.train import CausalFormat

        return CausalFormat.build(tokenizer, labels, max_length)

    def encode_split(self, run, tokenizer, split, max_length: int) -> list[dict]:
        """Prompt, separator, the label's response; the loss on the response tokens."""
        from campaign.train import encode_causal

        return encode_causal(tokenizer, split.texts, split.labels, run.label_ids, run.fmt)

    def scores(self, model, tokenizer, run, split, examples, **kwargs):
        """Every label's response scored after the prompt; the probabilities are the softmax
        of the labels' total log-likelihoods, the loss is that of the true response
        (train.causal_scores)."""
        from campaign.train import causal_scores

        return causal_scores(
            model,
            tokenizer,
            run.fmt,
            split,
            run.label_ids,
            kwargs["micro_batch"],
            kwargs["pad_id"],
            kwargs["device"],
            kwargs["autocast"],
        )

    # ------------------------------------------------------------------ end train

    # ------------------------------------------------------------------ preflight and memory
    def memory_head(self) -> str | None:
        return "lm"

    def eval_sequences(self, num_labels: int | None) -> int:
        """Every label's response is scored after the prompt: one sequence per label."""
        return int(num_labels or 0)

    def resume_generations(self, trainer, model, texts) -> list | None:
        from campaign.tasks.label_preflight import greedy_labels

        return greedy_labels(trainer, model, texts)

    # ------------------------------------------------------------------ end preflight and memory

    # ------------------------------------------------------------------ evaluate
    scores_responses = True
    # ------------------------------------------------------------------ end evaluate

    # ------------------------------------------------------------------ quantize
    # A decoder scoring labels: a KV-cache variant generates with it (quantization.generation's
    # sample), a guard scores it; it is not judged on what it generates.
    model_offers = ("kv_cache", "lm_harness")

    def quantize_settings(self, section: dict) -> dict:
        """quantization.generation: the few prompts a job generates from, to show its text."""
        return {"generation": section["generation"]}

    def quantized(self, job):
        """The labels scored (LabelTask), and the sample generation where the job's spec asks
        for one (tasks/generation/quantized.py generate)."""
        frames, model, fields, measured = super().quantized(job)
        settings = job.spec.get("generation")
        if settings is not None:
            from campaign.tasks.generation.quantized import generate

            with job.inference():
                fields["generation"] = generate(
                    model,
                    job.ctx.saved,
                    job.split("validation"),
                    settings["prompts"],
                    settings["max_new_tokens"],
                    job.ctx.device,
                    cache=job.variant.cache,
                )
        return frames, model, fields, measured

    # ------------------------------------------------------------------ end quantize

    # ------------------------------------------------------------------ init
    def init_family(self) -> str:
        return "gpt2"

    # ------------------------------------------------------------------ end init

    # ------------------------------------------------------------------ report
    # ------------------------------------------------------------------ end report


TASK = CausalLM()
