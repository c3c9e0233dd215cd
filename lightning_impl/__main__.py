"""python -m lightning_impl ...: the Lightning benchmark."""

import sys

from lightning_impl.trainer import main

sys.exit(main())
