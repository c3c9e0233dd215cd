"""python -m compare FILE [FILE ...]: see `compare.cli`."""

import sys

from compare.cli import main

sys.exit(main())
