"""python -m native ...: the hand-written DDP benchmark."""

import sys

from native.benchmark import main

sys.exit(main())
