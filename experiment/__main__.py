"""python -m experiment: see `experiment.cli`."""

import sys

from experiment.cli import main

sys.exit(main())
