"""A tiny HTTP/1.1 server (stdlib only, cheap to start) whose ``GET /mcp`` is an event stream, and whose
graceful stop (SIGTERM) ends the streams it holds as the first argument says:

* ``complete``: the chunked terminator on each, then exit (a server that ends its active streams);
* ``cut``: exit with the streams' connections closed mid-body (no terminator), as a server whose
  shutdown cancels its response tasks;
* ``hang``: stop accepting, print uvicorn's line and keep holding every stream (a graceful shutdown
  waiting for connections its own streams keep open).

``python shutdown_upstream.py MODE PORT``. Any other request gets a small JSON answer.
"""

from __future__ import annotations

import asyncio
import signal
import sys

MODE, PORT = sys.argv[1], int(sys.argv[2])
HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n"
    b"Cache-Control: no-cache\r\n\r\n"
)
EVENT = b": priming\n\n"
JSON = b'{"jsonrpc": "2.0", "id": 1, "result": {}}'
streams: list[asyncio.StreamWriter] = []


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # a connection that asked nothing (the sidecar looking whether it accepts)
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if length:
            await reader.readexactly(length)
        if head.startswith(b"GET /mcp "):
            writer.write(HEAD + b"%x\r\n%s\r\n" % (len(EVENT), EVENT))
            streams.append(writer)
            print("stream opened", flush=True)
            return  # held until the shutdown says
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (len(JSON), JSON)
        )


async def main() -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", PORT)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"serving on {PORT}", flush=True)
    await stop.wait()
    server.close()
    print("Shutting down", flush=True)
    if MODE == "complete":
        for writer in streams:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
            writer.close()
    elif MODE == "hang":
        print("Waiting for connections to close.", flush=True)
        await asyncio.Event().wait()
    # cut: exit, the streams' connections closed by the kernel mid-body


asyncio.run(main())
