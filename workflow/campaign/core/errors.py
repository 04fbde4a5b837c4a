"""The one exception type whose message is shown to the user as-is."""


class CampaignError(Exception):
    """Bad input or a failed check, described in one line that names the file, record or key.

    The command-line entry prints ``error: <message>`` and exits non-zero; never a traceback.
    """

    def __init__(self, message: str):
        # One line, always: a multi-line message would be cut by logs and schedulers.
        super().__init__(" ".join(str(message).split("\n")).strip())
