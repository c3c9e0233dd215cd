"""python -m native ...: the hand-written DDP benchmark (native/launch.py decides, without torch,
whether this process starts the ranks or is the only one)."""

import sys

from native.launch import main

sys.exit(main())
