"""The tiny connector's entrypoint: ``python main.py read --config C --catalog K [--state S]``."""

import sys

from tiny_source import TinySource

from source_framework import launch

if __name__ == "__main__":
    launch(TinySource(), sys.argv[1:])
