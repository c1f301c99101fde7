"""Run the bundled demo connector: ``python main.py read --config C --catalog K [--state S]``."""

import sys

from source_framework import launch
from source_framework.demo import DemoSource

if __name__ == "__main__":
    launch(DemoSource(), sys.argv[1:])
