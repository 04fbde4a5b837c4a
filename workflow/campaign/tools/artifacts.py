"""`campaign scan-artifacts`: the privacy scan of what a campaign wrote, logs included (they are
not DAG outputs, so the data phase's `artifact_scan` stage does not see them). The scanner is the
data phase's (campaign.data.artifacts: tokenizer vocabularies, Parquet files, text files; findings
by kind and where, never the secret).
"""

from campaign.data import scan_artifacts, vocab_tokens

__all__ = ["scan_artifacts", "vocab_tokens"]
