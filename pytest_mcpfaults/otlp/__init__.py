"""Spans from other processes: the sidecar's OTLP/HTTP trace receiver.

Nothing is imported here: importing the package costs neither aiohttp nor protobuf.
"""
