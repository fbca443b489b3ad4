"""Spans from other processes: the sidecar's OTLP/HTTP trace receiver.

:mod:`pytest_mcpfaults.otlp.decode` turns an export request (protobuf or JSON) into recorder spans;
:mod:`pytest_mcpfaults.otlp.receiver` answers ``POST /v1/traces`` and runs the receiver's own listener.
Nothing is imported here: importing the package costs neither aiohttp nor protobuf.
"""
