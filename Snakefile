# The campaign DAG. All logic lives in the `campaign` package (workflow/campaign); rules only wire
# inputs, outputs, params, logs and resources to its stage commands. See README.md.
import os

from snakemake.utils import min_version

min_version("9.0")


# One campaign definition for Snakemake and every `campaign` command: CAMPAIGN_PARAMS names it
# (default params.yaml), e.g. `CAMPAIGN_PARAMS=other.yaml snakemake` then `... campaign status`.
configfile: os.environ.get("CAMPAIGN_PARAMS", "params.yaml")


include: "workflow/rules/common.smk"


# Each phase's rule file, workflow/rules/<phase>.smk, in DAG order: the phases the registry finds.
for _rules in phase_rule_files():

    include: _rules


# At the end of every run, what a user must act on (privacy findings, preflight failures and
# warnings, audit problems, evaluation flags), not only in per-job logs. Never fails a run.
from campaign.tools.findings import after_run


onsuccess:
    after_run(CAMPAIGN)


onerror:
    after_run(CAMPAIGN)


localrules:
    all,


# Every output of the stages their declarations mark final (`final=True`; the track stage's
# with tracking.enabled), the per-run ones for every kept run.
rule all:
    default_target: True
    input:
        final_targets(),
