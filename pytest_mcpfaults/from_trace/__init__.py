"""From a production trace to a regression run: read a trace export, match its spans to a clean run's,
and infer the catalogue faults that replay its MCP failures (issue 38).

One job per module, each module's docstring says which; all pure but ``driver`` (the command line's I/O).
"""
