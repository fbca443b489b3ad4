"""The official MCP conformance suite's server scenarios against ``serve`` and against the suite's own
reference server, scenario by scenario.

``python tests/conformance_run.py`` (or ``tox -e conformance``) installs, once per lock file, the
suite (``@modelcontextprotocol/conformance``, pinned in tests/conformance/package.json) with a Node 22
from the npm registry (the system's may be older), and the reference server
(tests/conformance/reference/: the suite's ``everything-server.ts`` at the same version, run with
``tsx``), then runs the active server scenarios against ``python -m pytest_mcpfaults serve`` with
:data:`SERVE_ARGS` and against the reference server, and prints one row per scenario. It exits 1
when a scenario passes against the reference server but not against ``serve``, unless :data:`NEEDS`
names what it waits for. tests/test_conformance.py runs the same and asserts the same. Every step is
bounded (``NPM_TIMEOUT``, ``RUN_TIMEOUT``, ``UP_TIMEOUT``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SUITE = Path(__file__).resolve().parent / "conformance"
REFERENCE = SUITE / "reference"
#: ``npm ci`` of the suite (124 packages, Node's binary among them) or of the reference server (100).
NPM_TIMEOUT = 180.0
#: One run of every active server scenario (about 2 s here).
RUN_TIMEOUT = 180.0
#: A server's start, until it says where it listens.
UP_TIMEOUT = 60.0
#: How ``serve`` runs: the default tool sets and the conformance fixtures, answering as the reference
#: server does (SSE answers, an open ``GET`` stream; with JSON answers ``server-sse-multiple-streams``
#: has one check fewer, as the suite checks SSE streams only where a server sends them).
SERVE_ARGS = ("--tool-sets", "basic,benchmark,conformance", "--reply", "sse", "--get-stream")
#: The scenarios ``serve`` cannot pass yet, and what each waits for (none today; before issue 29's
#: items 2 and 3 landed, the six that call tools talking back to the client were listed here).
NEEDS: dict[str, str] = {}


@dataclass(frozen=True)
class Scenario:
    """One scenario's checks: how many passed, how many did not, and the first failure's message."""

    name: str
    passed: int
    failed: int
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.failed == 0 and self.passed > 0


def _lock_key(folder: Path) -> str:
    digest = hashlib.sha256()
    for name in ("package.json", "package-lock.json"):
        digest.update((folder / name).read_bytes())
    return digest.hexdigest()[:16]


def npm_install(folder: Path, cache: Path, env: dict[str, str] | None = None) -> Path:
    """``npm ci`` of ``folder``'s package files into ``cache/<name>-<lock hash>`` unless a finished
    install is there (installed in a directory of its own, then renamed into place)."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("the conformance run needs npm on PATH")
    target = cache / f"{folder.name}-{_lock_key(folder)}"
    if (target / "installed").exists():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=cache, prefix=f"{target.name}.tmp-"))
    try:
        for path in folder.iterdir():
            if path.is_file():
                shutil.copy(path, tmp / path.name)
        cmd = [npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"]
        try:
            proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True, timeout=NPM_TIMEOUT, env=env)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"`npm ci` in {folder} did not finish within {NPM_TIMEOUT:g} s") from exc
        if proc.returncode != 0:
            raise RuntimeError(f"`npm ci` in {folder} failed:\n{proc.stdout}\n{proc.stderr}")
        (tmp / "installed").write_text(proc.stdout)
        try:
            tmp.rename(target)
        except OSError:  # another process installed it meanwhile
            if not (target / "installed").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _first_line(proc: subprocess.Popen[str], pattern: str) -> re.Match[str]:
    """The first line of ``proc``'s stdout matching ``pattern`` (bounded by ``UP_TIMEOUT``); the
    rest of its output is read and dropped, so it never blocks on a full pipe."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    deadline, seen = time.monotonic() + UP_TIMEOUT, []
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        found = re.search(pattern, line.strip())
        if found:
            return found
    raise RuntimeError(f"the server did not print a line matching {pattern!r} in {UP_TIMEOUT:g} s: {seen!r}")


@contextmanager
def _running(cmd: Sequence[str], pattern: str, cwd: Path, env: dict[str, str]) -> Iterator[re.Match[str]]:
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        yield _first_line(proc, pattern)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


@contextmanager
def serving(python: str = sys.executable, args: Sequence[str] = SERVE_ARGS) -> Iterator[str]:
    """``python -m pytest_mcpfaults serve`` with ``args`` (the conformance tool set); its MCP URL."""
    cmd = [python, "-m", "pytest_mcpfaults", "serve", *args, "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with _running(cmd, r"^\{.*\}$", ROOT, env) as found:
        yield json.loads(found.group(0))["mcp_url"]


@contextmanager
def reference_server(suite: Path, reference: Path) -> Iterator[str]:
    """The suite's reference server (``everything-server.ts`` under ``tsx``, on the suite's Node)."""
    port = _free_port()
    cmd = [
        str(node_of(suite)),
        str(reference / "node_modules" / "tsx" / "dist" / "cli.mjs"),
        "everything-server.ts",
    ]
    with _running(cmd, r"running on", reference, {**os.environ, "PORT": str(port)}):
        yield f"http://localhost:{port}/mcp"


def node_of(suite: Path) -> Path:
    return suite / "node_modules" / "node" / "bin" / "node"


def _cli(suite: Path) -> Path:
    return suite / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"


def run_suite(suite: Path, url: str, scenario: str | None = None) -> dict[str, Scenario]:
    """Every active server scenario (or only ``scenario``) against ``url``: each scenario's checks, by
    name."""
    out = Path(tempfile.mkdtemp(prefix="mcpfaults-conformance-"))
    try:
        cmd = [str(node_of(suite)), str(_cli(suite)), "server", "--url", url, "-o", str(out)]
        cmd += ["--scenario", scenario] if scenario is not None else []
        try:
            subprocess.run(cmd, cwd=out, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False)
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"the conformance suite did not finish within {RUN_TIMEOUT:g} s") from exc
        return {s.name: s for s in map(_scenario, sorted(out.iterdir()))}
    finally:
        shutil.rmtree(out, ignore_errors=True)


def active_scenarios(suite: Path) -> list[str]:
    """The names of the suite's active server scenarios (its ``list`` also names pending ones): a run
    against a port nobody listens on, where every scenario fails at once (about 0.5 s)."""
    return list(run_suite(suite, f"http://127.0.0.1:{_free_port()}/mcp"))


#: Runs the suite's CLI once per scenario in one Node process (run_each).
MANY = Path(__file__).resolve().parent / "conformance_many.mjs"


def run_each(suite: Path, url: str, names: Sequence[str], parallel: int = 4) -> dict[str, Scenario]:
    """Each scenario of ``names`` in a suite run of its own against ``url``, ``parallel`` at a time: the
    runs share one Node process (``conformance_many.mjs``), which loads the suite's dependencies once
    (a Node process per scenario spent most of its CPU loading them: 36 processes were 28 s of CPU)."""
    out = Path(tempfile.mkdtemp(prefix="mcpfaults-conformance-"))
    try:
        cmd = [str(node_of(suite)), str(MANY), str(_cli(suite)), str(parallel), url]
        for name in names:
            cmd += [name, str(out / name)]
        try:
            proc = subprocess.run(
                cmd, cwd=out, capture_output=True, text=True, timeout=RUN_TIMEOUT, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(f"the conformance suite did not finish within {RUN_TIMEOUT:g} s") from exc
        if proc.returncode not in (0, 1):  # 1: a scenario failed, as the CLI says; 2: the driver broke
            raise RuntimeError(f"{MANY.name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
        return {s.name: s for name in names if (out / name).is_dir()
                for s in map(_scenario, sorted((out / name).iterdir()))}  # fmt: skip
    finally:
        shutil.rmtree(out, ignore_errors=True)


def _scenario(folder: Path) -> Scenario:
    name = re.sub(r"^server-|-\d{4}-\d\d-\d\dT[\d-]+Z$", "", folder.name)
    checks = json.loads((folder / "checks.json").read_text())
    passed = sum(c.get("status") == "SUCCESS" for c in checks)
    failures = [c for c in checks if c.get("status") == "FAILURE"]
    return Scenario(name, passed, len(failures), failures[0].get("errorMessage", "") if failures else "")


def compare(serve: dict[str, Scenario], reference: dict[str, Scenario]) -> list[str]:
    """The scenarios that pass against the reference server and not against ``serve``, unless
    :data:`NEEDS` names what they wait for; and the ones missing from either run."""
    problems = [f"{name}: not run against {who}" for who, run, other in
                (("serve", serve, reference), ("the reference server", reference, serve))
                for name in other if name not in run]  # fmt: skip
    for name, ref in reference.items():
        ours = serve.get(name)
        if ref.ok and ours is not None and not ours.ok and name not in NEEDS:
            problems.append(f"{name}: passes against the reference server, not against serve: {ours.error}")
    return problems


def table(serve: dict[str, Scenario], reference: dict[str, Scenario]) -> str:
    """A Markdown table: each scenario's checks passed against ``serve`` and the reference server."""
    rows = ["| scenario | serve | reference | serve waits for |", "|---|---|---|---|"]
    for name in sorted(reference.keys() | serve.keys(), key=list({**reference, **serve}).index):
        cells = []
        for run in (serve, reference):
            s = run.get(name)
            cells.append(
                "-" if s is None else f"{'pass' if s.ok else 'FAIL'} {s.passed}/{s.passed + s.failed}"
            )
        waits = NEEDS.get(name, "") if not (serve.get(name) and serve[name].ok) else ""
        rows.append(f"| {name} | {cells[0]} | {cells[1]} | {waits} |")
    scenarios = [f"{sum(s.ok for s in run.values())}/{len(run)}" for run in (serve, reference)]
    checks = [f"{sum(s.passed for s in run.values())}/{sum(s.passed + s.failed for s in run.values())}"
              for run in (serve, reference)]  # fmt: skip
    rows.append(f"| **scenarios passed** | {scenarios[0]} | {scenarios[1]} | |")
    rows.append(f"| **checks passed** | {checks[0]} | {checks[1]} | |")
    return "\n".join(rows)


def _reference(cache: Path, env: dict[str, str] | None) -> Path:
    """The reference server's install in ``cache`` (made when missing), with its server file."""
    ref = npm_install(REFERENCE, cache, env)
    shutil.copy(REFERENCE / "everything-server.ts", ref / "everything-server.ts")
    return ref


def measure(
    cache: Path, *, with_reference: bool = True, env: dict[str, str] | None = None
) -> tuple[dict[str, Scenario], dict[str, Scenario]]:
    """Install what is missing into ``cache``, run the suite against ``serve`` and (unless not
    ``with_reference``) the reference server."""
    suite = npm_install(SUITE, cache, env)
    with serving() as url:
        serve = run_suite(suite, url)
    reference: dict[str, Scenario] = {}
    if with_reference:
        with reference_server(suite, _reference(cache, env)) as url:
            reference = run_suite(suite, url)
    return serve, reference


#: The reference server's scenarios a replay of its cassette cannot pass, and why (docs/cassettes.md).
REPLAY_CANNOT = {
    name: "the server asks the client during the call (sampling, elicitation); a replay does not"
    for name in (
        "tools-call-sampling",
        "tools-call-elicitation",
        "elicitation-sep1034-defaults",
        "elicitation-sep1330-enums",
    )
}


#: The reference server's scenarios whose server request races the client's GET stream, and why: its
#: tools send ``sampling/createMessage`` and ``elicitation/create`` with ``server.request`` (no related
#: request), so the TypeScript SDK puts them on the standalone GET stream, and drops them when that
#: stream is not open yet. The suite's client opens its GET concurrently with the ``tools/call``; direct,
#: the GET wins (8 of 8 full runs here); through the proxy the two requests' order at the upstream is
#: down to scheduling, and about one full run in two lost it, each loss costing the client's 60 s
#: request timeout ("MCP error -32001: Request timed out"). ``serve`` sends them on the call's own
#: stream, as the 2025-11-25 spec says a request related to a call should be, so it has no race.
STANDALONE_RACE = tuple(REPLAY_CANNOT)
#: How many more times a racing scenario that failed through the recording proxy is run, alone.
RACE_RETRIES = 3


def measure_cassette(
    cache: Path, cassette: Path, *, env: dict[str, str] | None = None
) -> tuple[dict[str, Scenario], dict[str, Scenario]]:
    """Record the reference server through ``serve --upstream URL --record cassette`` while the suite
    runs against the proxy, stop the server, then run the suite against ``serve --cassette``: the
    scenarios through the recording proxy and replayed. While recording each scenario runs alone (four
    at a time): a :data:`STANDALONE_RACE` scenario that lost its race is run again (at most
    :data:`RACE_RETRIES` times) and its last run is the one kept, so a failure that is not that race
    stays a failure, and a lost race costs one scenario's timeout, not the whole run's."""
    suite = npm_install(SUITE, cache, env)
    with (
        reference_server(suite, _reference(cache, env)) as upstream,
        serving(args=("--upstream", upstream, "--record", str(cassette))) as url,
    ):
        recorded = run_each(suite, url, active_scenarios(suite))
        for name in STANDALONE_RACE:
            for _ in range(RACE_RETRIES):
                if name not in recorded or recorded[name].ok:
                    break
                recorded.update(run_suite(suite, url, name))
    with serving(args=("--cassette", str(cassette))) as url:
        replayed = run_suite(suite, url)
    return recorded, replayed


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pytest-mcpfaults" / "conformance"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache", type=Path, default=default_cache(), help="where the npm installs go")
    args = parser.parse_args(argv)
    serve, reference = measure(args.cache)
    print(table(serve, reference))
    problems = compare(serve, reference)
    for problem in problems:
        print(f"NOT MET {problem}")
    met = "MET: serve passes every scenario the reference server passes, but those NEEDS names"
    print(met if not problems else f"NOT MET: {len(problems)} scenario(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
