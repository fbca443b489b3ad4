"""From a production trace to a regression run: read a trace export, match its spans to a clean run's,
and infer the catalogue faults that replay its MCP failures (issue 38).

One job per module, pure but for :mod:`~pytest_mcpfaults.from_trace.driver` (the command line's I/O):

* :mod:`~pytest_mcpfaults.from_trace.read`: bytes of an export (OTLP/JSON, JSON Lines, OTLP/protobuf,
  the plugin's own span JSON) to spans, bounded;
* :mod:`~pytest_mcpfaults.from_trace.trace`: one trace picked from them, checked (one ``trace_id``, no
  cycles, a session span);
* :mod:`~pytest_mcpfaults.from_trace.footprint`: a clean run's MCP requests, each with the span open
  around it;
* :mod:`~pytest_mcpfaults.from_trace.match`: trace spans to clean-run spans, by name and parentage;
* :mod:`~pytest_mcpfaults.from_trace.classify`: a failed span's text to the fault kinds that fit;
* :mod:`~pytest_mcpfaults.from_trace.infer`: the faults, each at its request, with the reason;
* :mod:`~pytest_mcpfaults.from_trace.shape`: whether a replay reproduced the trace's shape;
* :mod:`~pytest_mcpfaults.from_trace.capture`: a clean run's spans and journals as the footprint reads them;
* :mod:`~pytest_mcpfaults.from_trace.render`: what was inferred as text, and a regression test;
* :mod:`~pytest_mcpfaults.from_trace.regression`: what a written regression test calls.

Nothing is imported here.
"""
