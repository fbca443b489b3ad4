"""``python -m pytest_mcpfaults from-trace PATH``: the one module of from-trace that does I/O (reads the
trace and the clean run, prints, writes the regression test).

The clean run (``--clean FILE``) is explore's ``detail`` form, ``{"spans": [...], "journal": [...]}``
(:func:`pytest_mcpfaults.from_trace.capture.clean_run_detail` writes it from a run's spans and
sidecars). Exit status 0 when the trace was read (mapped or not), 2 on bad input, the message naming the
file or argument and what is valid, and when ``--write`` has no fault to write.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from pathlib import Path
from typing import IO, Any

from pytest_mcpfaults.options.text import seconds_text

_NODEID = re.compile(r"^(?P<path>[^:]+\.py)::(?P<test>[A-Za-z_]\w*)$")


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The ``from-trace`` subcommand's parser (see ``docs/from-trace.md``)."""
    p: argparse.ArgumentParser = sub.add_parser(
        "from-trace",
        help="infer the faults that replay a production trace's MCP failures against a clean run",
        description=(
            "Read a trace export (OTLP/JSON, OTLP/protobuf, or the plugin's span JSON), match its spans "
            "to a clean run's, and print the catalogue fault each failed MCP call span maps to, at the "
            "request made inside that span in the clean run; with --write, a regression test."
        ),
    )
    p.add_argument("path", metavar="PATH", help="the trace export")
    p.add_argument(
        "--trace-id",
        metavar="ID",
        help="the trace to replay (32 hex digits), when PATH has several",
    )
    p.add_argument(
        "--clean", required=True, metavar="FILE", help='the clean run: {"spans": [...], "journal": [...]}'
    )
    p.add_argument(
        "--session",
        action="append",
        type=_glob,
        metavar="GLOB",
        help="session span-name glob (default: Agent.Session)",
    )
    p.add_argument(
        "--patience",
        type=functools.partial(seconds_text, off=None),
        default=5.0,
        metavar="SECONDS",
        help="the patience budget a held request is held for (default 5)",
    )
    p.add_argument("--write", metavar="FILE", help="write a regression test module to FILE (needs --test)")
    p.add_argument(
        "--test",
        metavar="NODEID",
        help="the clean test the regression test replays: path/to/test_x.py::test_name",
    )
    p.set_defaults(subparser=p)
    return p


def _glob(text: str) -> str:
    """A span-name glob, refused (naming the argument) as the gate's settings refuse it."""
    from pytest_mcpfaults.spans.queries import as_patterns

    try:
        as_patterns(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def read_file(path: str) -> bytes:
    """The bytes of ``path``, refused over the trace bound (reading one byte more to tell)."""
    from pytest_mcpfaults.from_trace.read import MAX_TRACE_BYTES, TraceError

    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_TRACE_BYTES:
        raise TraceError(f"{path}: over {MAX_TRACE_BYTES} bytes, the largest trace file read")
    return data


def main(args: argparse.Namespace, out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
    from pytest_mcpfaults.from_trace.footprint import clean_run_from_detail
    from pytest_mcpfaults.from_trace.infer import SpanNames, infer
    from pytest_mcpfaults.from_trace.read import TraceError, decode_trace
    from pytest_mcpfaults.from_trace.render import inferred_lines
    from pytest_mcpfaults.from_trace.trace import pick_trace

    if args.write and not args.test:
        args.subparser.error("argument --write: needs --test NODEID (the clean test to replay)")
    m = _NODEID.match(args.test or "")
    if args.test and m is None:
        args.subparser.error(f"argument --test: expected path/to/test_x.py::test_name, got {args.test!r}")
    if m is not None and not Path(m["path"]).is_file():
        args.subparser.error(f"argument --test: no file {m['path']} (the clean test's module, from here)")
    test_file = Path(m["path"]) if m is not None else Path()
    if args.write and Path(args.write).resolve().parent != test_file.resolve().parent:  # m is not None
        args.subparser.error(
            f"argument --write: {args.write} is not in the folder of {test_file}, where a regression module "
            f"imports {test_file.stem} and sees its conftest.py: name a file there, e.g. "
            f"{test_file.parent / 'test_regression.py'}"
        )
    if args.write and not _rewritable(Path(args.write)):
        args.subparser.error(
            f"argument --write: {args.write} exists and is not a regression test from-trace wrote: "
            "not overwritten; name a new file"
        )
    names = SpanNames.of(args.session or SpanNames().session)
    try:
        read = decode_trace(read_file(args.path), args.path)
        trace = pick_trace(read.spans, args.path, names.session, args.trace_id)
        data = read_file(args.clean)
        try:
            detail = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise TraceError(
                f'{args.clean}: not JSON ({exc}); a clean run is {{"spans": [...], "journal": [...]}}'
            ) from None
        clean = clean_run_from_detail(detail, args.clean, names.session)
    except TraceError as exc:
        print(f"from-trace: {exc}", file=err)
        return 2
    inferred = infer(trace, clean, names, args.patience)
    lines = inferred_lines(inferred, f"{args.path}: {read.summary(len(trace.spans), trace.duplicates)}")
    print("\n".join(lines), file=out)
    if args.write and not inferred.plan:
        print(
            f"from-trace: {args.write} not written: the plan has no fault, so it would replay nothing",
            file=err,
        )
        return 2
    if args.write and m is not None:  # --write needs --test
        try:
            _write(args, m, inferred, out)
        except OSError as exc:
            print(f"from-trace: cannot write {args.write}: {exc.strerror or exc}", file=err)
            return 2
    return 0


def _rewritable(target: Path) -> bool:
    """Whether ``--write`` may write ``target``: a new file, or a regression test it wrote before."""
    from pytest_mcpfaults.from_trace.render import WRITTEN_BY

    try:
        with target.open("rb") as f:
            return WRITTEN_BY.encode() in f.read(1000)
    except OSError:  # none there (or a folder, unreadable: writing it says why)
        return True


def _write(args: argparse.Namespace, m: re.Match[str], inferred: Any, out: IO[str]) -> None:
    from pytest_mcpfaults.from_trace.render import regression_test

    target, module = Path(args.write), Path(m["path"]).stem  # in the clean test's folder (main checked)
    name = "test_regression_" + inferred.trace_id[:8]
    target.write_text(regression_test(inferred, args.path, module, m["test"], name))
    print(f"wrote {target}: {name}, {m['test']} under {len(inferred.plan)} fault(s)", file=out)
