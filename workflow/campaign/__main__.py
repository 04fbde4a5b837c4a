"""python -m campaign: the same as the `campaign` console script."""

import sys

from campaign.cli import main

sys.exit(main())
