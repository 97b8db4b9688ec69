"""A TCP proxy of our own in front of PostgreSQL or the broker, to cut, delay and reset connections in tests.

It runs on the test's event loop: while a proxy is in use, wait with `await` (`asyncio.sleep`,
`asyncio.to_thread(process.wait)`), never with a blocking call, or the proxied traffic stops too.

What it can do, on command:
- `cut()` / `restore()`: reset every open connection and refuse new ones until restored (an outage).
- `reset()`: reset every open connection, accept new ones (a network blip, a fail-over).
- `upstream_delay`: hold every chunk the client sends for that long before passing it on (a slow
  database: each query, which asyncpg sends as one write, waits that long; the answers are not
  delayed). `delay` does the same in both directions.
- `reset_on(pattern, deliver=...)`: a trap for one exact protocol message, e.g. `PG_COMMIT`. How
  precisely it hits: the proxy matches the pattern inside each chunk it reads from a client (up to
  64 KiB; a message split across two reads would be missed - asyncpg writes each simple query in one
  piece, so a COMMIT is never split in practice). With `deliver=False` the chunk that holds it is
  dropped and every connection reset: the server never sees it (a COMMIT that never arrived: the
  transaction is rolled back). With `deliver=True` the chunk reaches the server, the server's next
  answer on that connection is swallowed, and then every connection is reset: the server has done
  the work (a COMMIT has committed) but the client never hears of it - the ambiguous case.
  With `cut=True` the reset is followed by a cut (new connections refused until `restore()`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass

# asyncpg ends a transaction with the simple query 'COMMIT;' (asyncpg/transaction.py): message 'Q',
# length 12 (4 + 'COMMIT;' + NUL), the text. Its BEGIN starts 'BEGIN ISOLATION LEVEL ...'.
PG_COMMIT = b"Q\x00\x00\x00\x0cCOMMIT;\x00"
PG_BEGIN = b"BEGIN ISOLATION LEVEL"


@dataclass
class _Trap:
    pattern: bytes
    deliver: bool
    cut: bool


class _Conn:
    """One proxied connection: the client's side, the server's side, and whether the server's next
    answer is to be swallowed (a `deliver=True` trap went off on it)."""

    def __init__(self, client: asyncio.StreamWriter, server: asyncio.StreamWriter) -> None:
        self.client, self.server = client, server
        self.swallow_answer: _Trap | None = None


class TcpProxy:
    def __init__(self, target_host: str, target_port: int, *, port: int = 0) -> None:
        self.target = (target_host, target_port)
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self._conns: set[_Conn] = set()
        self.cut_now = False
        self.delay = 0.0
        self.upstream_delay = 0.0
        self._trap: _Trap | None = None
        # What happened, for the tests to check that a fault really was injected.
        self.connections = 0  # accepted and connected upstream
        self.refused = 0  # refused while cut
        self.delayed_chunks = 0
        self.resets = 0  # times every connection was reset (cut(), reset(), a trap)
        self.traps_fired = 0

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self.cut()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def cut(self) -> None:
        """Reset every open connection and refuse new ones until `restore()`."""
        self.cut_now = True
        self.reset()

    def restore(self) -> None:
        self.cut_now = False

    def reset(self) -> None:
        """Reset (RST) every open connection, both sides; new connections are still accepted."""
        self.resets += 1
        for conn in list(self._conns):
            for w in (conn.client, conn.server):
                with contextlib.suppress(Exception):
                    w.transport.abort()
        self._conns.clear()

    def reset_on(self, pattern: bytes, *, deliver: bool, cut: bool = False) -> None:
        """Arm a one-shot trap on the next client chunk holding `pattern` (see the module docstring)."""
        self._trap = _Trap(pattern, deliver, cut)

    def _fire(self, trap: _Trap) -> None:
        self.traps_fired += 1
        if trap.cut:
            self.cut()
        else:
            self.reset()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.cut_now:
            self.refused += 1
            writer.transport.abort()
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.transport.abort()
            return
        if self.cut_now:  # cut while we were connecting
            up_writer.transport.abort()
            writer.transport.abort()
            return
        conn = _Conn(writer, up_writer)
        self._conns.add(conn)
        self.connections += 1
        await asyncio.gather(self._upstream(conn, reader), self._downstream(conn, up_reader),
                             return_exceptions=True)
        self._conns.discard(conn)

    async def _upstream(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        """Client -> server: delays and traps."""
        writer = conn.server
        try:
            while not self.cut_now:
                data = await reader.read(65536)
                if not data:
                    break
                delay = self.upstream_delay or self.delay
                if delay:
                    self.delayed_chunks += 1
                    await asyncio.sleep(delay)
                trap = self._trap
                if trap is not None and trap.pattern in data:
                    self._trap = None
                    if not trap.deliver:
                        self._fire(trap)
                        break
                    conn.swallow_answer = trap  # fires when the server answers
                if conn not in self._conns:
                    break  # reset meanwhile
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _downstream(self, conn: _Conn, reader: asyncio.StreamReader) -> None:
        """Server -> client: swallows the answer a delivering trap waits for."""
        writer = conn.client
        try:
            while not self.cut_now:
                data = await reader.read(65536)
                if not data:
                    break
                if conn.swallow_answer is not None:
                    self._fire(conn.swallow_answer)
                    break
                if self.delay:
                    self.delayed_chunks += 1
                    await asyncio.sleep(self.delay)
                if conn not in self._conns:
                    break
                writer.write(data)
                await writer.drain()
        finally:
            with contextlib.suppress(Exception):
                writer.close()
