"""The suite's HTTP clients load no CA bundle.

Every request the suite makes is plain HTTP on 127.0.0.1, yet every httpx / httpx2 client (each mcp 2.x
``Client`` makes one, the example runner one per operation) builds a TLS context that loads the whole
CA bundle: about 25-50 ms of CPU each, thousands of times (one run of ``pytest -p mcpfaults examples/``
spent 7 of its 17 s of CPU there). For the whole session, and every process it starts (example runs,
pytester subprocesses, ``serve``), ``SSL_CERT_DIR`` names an empty directory and ``SSL_CERT_FILE`` is
unset, which httpx, httpx2 and Python's default contexts read first: a context then loads nothing, and
a TLS connection would fail to verify (no test makes one). The tests that reach a package registry
(pip, npm) give their installer :data:`REGISTRY_ENV`, the environment as the suite found it.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

#: The environment as this process found it (a worker inherits the controller's, untouched).
REGISTRY_ENV: dict[str, str] = dict(os.environ)


def without_ca_bundle() -> Iterator[None]:
    """Unset ``SSL_CERT_FILE`` and point ``SSL_CERT_DIR`` at an empty directory until resumed."""
    empty = tempfile.mkdtemp(prefix="mcpfaults-tests-no-ca-")
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("SSL_CERT_FILE", raising=False)
        mp.setenv("SSL_CERT_DIR", empty)
        yield
    shutil.rmtree(empty, ignore_errors=True)
