"""From a production trace to a regression run: read a trace export, match its spans to a clean run's,
and infer the catalogue faults that replay its MCP failures (issue 38).

One job per module, each module's docstring says which: the trace (``read``, ``trace``), the clean run
(``capture``, ``footprint``), the inference (``match``, ``classify``, ``infer``), the replay's check
(``shape``, ``run``) and what is written (``render``, ``regression``). All are pure but
:mod:`~pytest_mcpfaults.from_trace.driver` (the command line's I/O). Nothing is imported here.
"""
