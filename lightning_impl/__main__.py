"""python -m lightning_impl ...: the Lightning benchmark."""

import sys

from lightning_impl.benchmark import main

sys.exit(main())
