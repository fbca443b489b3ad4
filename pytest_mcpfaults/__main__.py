"""``python -m pytest_mcpfaults``: see :mod:`pytest_mcpfaults.cli`."""

from pytest_mcpfaults.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
