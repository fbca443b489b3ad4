"""MCP over stdio: a fault-injected server that the harness spawns as a child process.

The child side (:mod:`~pytest_mcpfaults.stdio.child`) imports nothing but the standard library, so
this package's ``__init__`` imports nothing; the test-process side is
:class:`pytest_mcpfaults.stdio.server.StdioServer`.
"""
