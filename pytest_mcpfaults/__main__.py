"""``python -m pytest_mcpfaults``: see :mod:`pytest_mcpfaults.cli`."""

import os
import sys

from pytest_mcpfaults.cli import main

if __name__ == "__main__":
    status = main()
    # The sidecar is stopped and every connection closed: skip interpreter finalization, which costs
    # seconds of wall time on a busy machine, so the process exits promptly after SIGTERM/SIGINT.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
