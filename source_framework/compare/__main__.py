"""``python -m source_framework.compare --connector main.py --config C --catalog K ...`` (see ``command``)."""

import sys

from source_framework.compare.command import main

if __name__ == "__main__":
    sys.exit(main())
