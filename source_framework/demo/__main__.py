"""``python -m source_framework.demo read ...``: the demo connector, same as ``main.py``."""

import sys

from source_framework import launch
from source_framework.demo import DemoSource

if __name__ == "__main__":
    launch(DemoSource(), sys.argv[1:])
