"""python -m campaign: the same as the `campaign` console script, as every rule runs a stage,
ending without the interpreter's teardown (campaign.core.exiting)."""

from campaign.cli import exit_without_teardown, main

exit_without_teardown(main())
