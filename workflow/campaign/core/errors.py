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


# The signals this process has received, in order: a handler raises at once, but library code
# may swallow the exception (a KeyboardInterrupt landing in a third-party import was lost one
# time in twenty-five, and the job then committed and exited 0). The runner asks again before it
# commits, so a signalled job never ends as a success.
_RECEIVED: list[int] = []


def note_signal(signum: int) -> None:
    """Record a signal the command's handler received (see `raise_if_signalled`)."""
    _RECEIVED.append(signum)


def forget_signals() -> None:
    """Start a command with none noted (a test may run several in one process)."""
    _RECEIVED.clear()


def raise_if_signalled() -> None:
    """Raise the exception of the first signal received, if one was: Ctrl-C's KeyboardInterrupt,
    else `Interrupted`. Called where a result is about to be kept."""
    import signal

    if not _RECEIVED:
        return
    if _RECEIVED[0] == signal.SIGINT:
        raise KeyboardInterrupt
    raise Interrupted(_RECEIVED[0])


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
