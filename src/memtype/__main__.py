"""``python -m memtype``: the ``memtype`` command line."""

import sys

from memtype.cli import main

sys.exit(main())
