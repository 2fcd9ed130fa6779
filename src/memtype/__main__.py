"""``python -m memtype``: the ``memtype`` command line."""

import sys

from memtype.cli import run_command

sys.exit(run_command())
