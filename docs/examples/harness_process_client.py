"""A managed MCP client, the way agent frameworks ship a synchronous one: the session runs on a thread of
its own with its own event loop, and ``close()`` stops it. The script forgets to call ``close()`` unless
it is given ``--close``: then the interpreter, at exit, joins the session's thread (not a daemon) with
no timeout, and waits for ever. Run by docs/examples/harness_process_test.py as a harness process.

    python harness_process_client.py http://127.0.0.1:PORT/mcp [--close]
"""

from __future__ import annotations

import asyncio
import sys
import threading

from mcp.client import Client


class ManagedClient:
    def __init__(self, url: str) -> None:
        self.tools: list[str] = []
        self._ready = threading.Event()
        self._closing: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=asyncio.run, args=(self._session(url),), name="mcp-session")
        self._thread.start()
        if not self._ready.wait(30):
            raise TimeoutError("the MCP session did not start in 30 s")

    async def _session(self, url: str) -> None:
        self._loop, self._closing = asyncio.get_running_loop(), asyncio.Event()
        async with Client(url) as client:
            self.tools = [tool.name for tool in (await client.list_tools()).tools]
            self._ready.set()
            await self._closing.wait()  # until close()

    def close(self) -> None:
        if self._loop is not None and self._closing is not None:
            self._loop.call_soon_threadsafe(self._closing.set)
        self._thread.join(timeout=5)


if __name__ == "__main__":
    client = ManagedClient(sys.argv[1])
    print(sorted(client.tools), flush=True)
    if "--close" in sys.argv[2:]:
        client.close()
