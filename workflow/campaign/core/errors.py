"""The exceptions whose meaning the command line shows to the user."""


class CampaignError(Exception):
    """Bad input or a failed check, described in one line that names the file, record or key.

    The command-line entry prints ``error: <message>`` and exits non-zero; never a traceback.
    """

    def __init__(self, message: str):
        # One line, always: a multi-line message would be cut by logs and schedulers.
        super().__init__(" ".join(str(message).split("\n")).strip())


class Interrupted(BaseException):  # noqa: N818 (a signal, like KeyboardInterrupt)
    """SIGTERM (a scheduler cancelling the job, `kill`) turned into an exception, so the job is
    recorded as interrupted and its partial outputs are removed, as for Ctrl-C."""

    def __init__(self, signum: int):
        super().__init__(f"signal {signum}")
        self.signum = signum


# The exit status of a job that stopped for a scheduler's warning signal after checkpointing
# (EX_TEMPFAIL: try again). Snakemake's `retries:` resubmits it and it resumes there.
PREEMPTED_EXIT = 75


class Preempted(Interrupted):
    """A scheduler's warning (SIGUSR1) or cancellation (SIGTERM) during training, acted on at a
    step boundary: the step finished and a checkpoint at `step` was written, so a resubmitted job
    loses nothing."""

    def __init__(self, signum: int, step: int):
        super().__init__(signum)
        self.args = (f"preempted by signal {signum} after step {step} (checkpointed)",)
        self.step = step
