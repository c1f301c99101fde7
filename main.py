"""Run the bundled demo connector: ``python main.py read --config C --catalog K [--state S]``."""

import sys

from source_framework.demo import DemoSource
from source_framework import launch

if __name__ == "__main__":
    launch(DemoSource(), sys.argv[1:])
