"""``python -m pytest_mcpfaults``: see :mod:`pytest_mcpfaults.cli`."""

import os
import sys

if __name__ == "__main__":
    if sys.argv[1:2] == ["stdio"]:
        # The stdio child starts like a bare `python -c`: it imports only the standard library (and, when
        # standalone, the sidecar core), not the command line of `serve`.
        from pytest_mcpfaults.stdio.entry import main as stdio_main

        status = stdio_main(sys.argv[2:])
    else:
        from pytest_mcpfaults.cli import main

        status = main()
    # The sidecar is stopped and every connection closed: skip interpreter finalization, which costs
    # seconds of wall time on a busy machine, so the process exits promptly after SIGTERM/SIGINT.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
