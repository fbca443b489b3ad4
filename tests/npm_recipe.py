"""The TypeScript recipe's npm dependencies (docs/examples/ts/), installed once for the whole run.

``npm ci`` (bounded) installs them into the pytest cache (or, without the cache provider, the temporary
directory), in a directory named by the lock file's hash, so a warm run pays nothing. Its scripts run
from that directory, each copied in (atomically) before it runs: tests/test_ts_recipe.py's
``harness.mjs``, tests/test_ts_parts.py's ``parts.mjs`` and tests/test_stdio_interop.py's
``stdio_client.mjs`` share the one install (about 8 s of CPU and wall each, on this machine with a warm
npm cache).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from no_ca import REGISTRY_ENV

RECIPE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "ts"
#: ``npm ci`` downloads 113 packages (about 13 s here with a cold npm cache); this bounds a slow registry.
NPM_CI_TIMEOUT = 180.0


def min_node() -> tuple[int, ...]:
    """The recipe's Node floor, from its package.json ``engines`` (``">=20.6"``: ``(20, 6)``)."""
    engines = json.loads((RECIPE / "package.json").read_text())["engines"]["node"]
    return tuple(int(p) for p in re.findall(r"\d+", engines))


def lock_key() -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((RECIPE / name).read_bytes())
    return digest.hexdigest()[:16]


def _install(npm: str, base: Path, key: str, prune: bool) -> Path:
    """``npm ci`` into ``base/key`` unless a finished install is there. Safe under xdist: one worker
    installs (the others wait for it on a lock file, bounded) into a directory of its own and renames it
    into place. ``prune``: remove the installs of other lock files (only in this checkout's own cache)."""
    target = base / key
    if (target / "installed").exists():
        return target
    with open(base / f"{key}.lock", "w") as lock:
        deadline = time.monotonic() + NPM_CI_TIMEOUT + 30
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another process held {lock.name} for over {NPM_CI_TIMEOUT + 30:g} s")
                time.sleep(0.2)
        if (target / "installed").exists():  # the worker that held the lock installed it
            return target
        tmp = Path(tempfile.mkdtemp(dir=base, prefix=f"{key}.tmp-"))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(RECIPE / name, tmp / name)
            cmd = [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline"]
            try:
                proc = subprocess.run(
                    cmd, cwd=tmp, capture_output=True, text=True, timeout=NPM_CI_TIMEOUT, env=REGISTRY_ENV
                )
            except subprocess.TimeoutExpired as exc:
                pytest.fail(
                    f"`npm ci` for {RECIPE} did not finish within {NPM_CI_TIMEOUT:g} s: {exc.stderr!r}"
                )
            assert proc.returncode == 0, f"`npm ci` for {RECIPE} failed:\n{proc.stdout}\n{proc.stderr}"
            (tmp / "installed").write_text(proc.stdout)
            tmp.rename(target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    for old in base.iterdir() if prune else ():
        if old.name != key and re.fullmatch(r"[0-9a-f]{16}", old.name):
            shutil.rmtree(old, ignore_errors=True)
    return target


def installed(config: pytest.Config, npm: str, *scripts: str) -> Path:
    """The recipe's install directory, holding a fresh copy of each of ``scripts`` (file names under
    docs/examples/ts/)."""
    cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
    if cache is not None:
        base = Path(cache.mkdir("mcpfaults-ts-recipe"))
    else:
        base = Path(tempfile.gettempdir()) / f"mcpfaults-ts-recipe-{os.getuid()}"
        base.mkdir(exist_ok=True)
    target = _install(npm, base, lock_key(), prune=cache is not None)
    for script in scripts:
        fresh = target / f"{script}.{os.getpid()}"
        shutil.copy(RECIPE / script, fresh)
        fresh.replace(target / script)  # atomic: a concurrent worker never runs half a file
    return target


def node_recipe(config: pytest.Config, *scripts: str) -> tuple[str, Path]:
    """``node`` and the recipe's install directory holding ``scripts``; the test is skipped, saying why,
    without node and npm on PATH or with a node older than the recipe's floor."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"the TypeScript recipe needs node and npm on PATH (node: {node}, npm: {npm})")
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30).stdout
    found, floor = tuple(int(p) for p in re.findall(r"\d+", version)[:2]), min_node()
    if found < floor:
        pytest.skip(f"the TypeScript recipe needs node >= {'.'.join(map(str, floor))}, found {version}")
    return node, installed(config, npm, *scripts)
