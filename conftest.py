"""What every test process needs, however the test run was started (pytest loads this before the test folders' own)."""

import signal


def pytest_configure(config):
    # Some tests press Ctrl-C on a process they start. A run started in the background (`&` in a
    # script, nohup) has SIGINT ignored, and every process it starts inherits that, so those
    # processes never saw the Ctrl-C: a terminal's default instead, as when the run is in the foreground.
    signal.signal(signal.SIGINT, signal.default_int_handler)
