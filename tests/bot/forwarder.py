"""A toxiproxy-like TCP forwarder on 127.0.0.1 port 0: close it to "stop Redis", reopen it.

Closing stops listening *and* cuts every live connection, which is what a Redis restart looks
like to a client; reopening listens on the same port again.
"""

from __future__ import annotations

import asyncio
import contextlib


class Forwarder:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Task[None]] = set()
        self.port = 0

    async def open(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port,
                                                  reuse_address=True)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for writer in list(self._writers):
            writer.close()
        for task in list(self._pumps):
            task.cancel()
        await asyncio.gather(*self._pumps, return_exceptions=True)
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._target)
        except OSError:
            writer.close()
            return
        if self._server is None:  # closed while this connection was being set up: cut it too
            writer.close()
            up_writer.close()
            return
        self._writers |= {writer, up_writer}
        pumps = {asyncio.create_task(self._pump(reader, up_writer)),
                 asyncio.create_task(self._pump(up_reader, writer))}
        self._pumps |= pumps
        await asyncio.gather(*pumps, return_exceptions=True)
        self._pumps -= pumps
        for w in (writer, up_writer):
            self._writers.discard(w)
            w.close()

    @staticmethod
    async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError, OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()
