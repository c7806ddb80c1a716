"""A SOCKS5 proxy for the sandbox (RFC 1928, CONNECT only), with the username/password method of
RFC 1929 when it is given credentials, bound to loopback and run on a thread of its own (its own
event loop), so that the test suite can send the crawl's requests through a real SOCKS proxy.

It records what it saw (`stats`): connections, authentications that passed or failed, and the
address type of each CONNECT (`domain`: the client left the name to the proxy to resolve, as
`socks5h` and Chromium do; `ipv4`/`ipv6`: the client resolved it itself, as curl's `socks5`).
No other project code depends on it; nothing but loopback is ever relayed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import struct
import threading
from collections import Counter

VERSION = 5
NO_AUTH, USER_PASSWORD, NO_ACCEPTABLE = 0x00, 0x02, 0xFF
CONNECT = 0x01
ATYP_IPV4, ATYP_DOMAIN, ATYP_IPV6 = 0x01, 0x03, 0x04
# replies (RFC 1928 §6)
SUCCEEDED, GENERAL_FAILURE, NOT_ALLOWED, HOST_UNREACHABLE, REFUSED, COMMAND_UNSUPPORTED = 0, 1, 2, 4, 5, 7
ATYP_UNSUPPORTED = 8
LOOPBACK = ("127.0.0.1", "::1", "localhost")


class SocksProxy:
    def __init__(self, username: str | None = None, password: str | None = None) -> None:
        self.username, self.password = username, password
        self.port: int | None = None
        self.stats: Counter[str] = Counter()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def host_port(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> SocksProxy:
        ready = threading.Event()
        failed: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                self._server = loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
                self.port = self._server.sockets[0].getsockname()[1]
            except BaseException as exc:  # noqa: BLE001 - reported to start()'s caller
                failed.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.close()

        self._thread = threading.Thread(target=run, name="sandbox-socks", daemon=True)
        self._thread.start()
        if not ready.wait(timeout) or failed:
            raise RuntimeError(f"the sandbox SOCKS proxy did not start: {failed[0] if failed else 'timeout'}")
        return self

    def stop(self) -> None:
        loop, server = self._loop, self._server
        if loop is None or server is None:
            return

        async def shutdown() -> None:
            server.close()
            for task in asyncio.all_tasks():
                if task is not asyncio.current_task():
                    task.cancel()

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = self._server = self._thread = None

    # -- one client ----------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.stats["connections"] += 1
        try:
            target = await self._handshake(reader, writer)
            if target is not None:
                await self._relay(reader, writer, *target)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            self.stats["broken"] += 1
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> tuple[str, int, asyncio.StreamReader, asyncio.StreamWriter] | None:
        version, count = await reader.readexactly(2)
        if version != VERSION:
            raise ValueError("not SOCKS5")
        methods = await reader.readexactly(count)
        wanted = USER_PASSWORD if self.username is not None else NO_AUTH
        if wanted not in methods:
            writer.write(bytes((VERSION, NO_ACCEPTABLE)))
            self.stats["no_acceptable_method"] += 1
            return None
        writer.write(bytes((VERSION, wanted)))
        if wanted == USER_PASSWORD and not await self._authenticate(reader, writer):
            return None
        version, command, _reserved, atyp = await reader.readexactly(4)
        host = await self._address(reader, atyp)
        (port,) = struct.unpack("!H", await reader.readexactly(2))
        if host is None:
            await self._reply(writer, ATYP_UNSUPPORTED)
            return None
        if command != CONNECT:
            await self._reply(writer, COMMAND_UNSUPPORTED)
            return None
        if host not in LOOPBACK and not _is_loopback(host):
            self.stats["refused_not_loopback"] += 1
            await self._reply(writer, NOT_ALLOWED)
            return None
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            await self._reply(writer, REFUSED)
            return None
        self.stats["connect"] += 1
        await self._reply(writer, SUCCEEDED)
        return host, port, up_reader, up_writer

    async def _authenticate(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """RFC 1929: VER 1, ULEN, UNAME, PLEN, PASSWD; status 0 passes, anything else fails."""
        _version, ulen = await reader.readexactly(2)
        user = await reader.readexactly(ulen)
        (plen,) = await reader.readexactly(1)
        password = await reader.readexactly(plen)
        ok = user == (self.username or "").encode() and password == (self.password or "").encode()
        writer.write(bytes((1, 0 if ok else 1)))
        await writer.drain()
        self.stats["auth_ok" if ok else "auth_failed"] += 1
        return ok

    async def _address(self, reader: asyncio.StreamReader, atyp: int) -> str | None:
        if atyp == ATYP_IPV4:
            self.stats["atyp_ipv4"] += 1
            return socket.inet_ntop(socket.AF_INET, await reader.readexactly(4))
        if atyp == ATYP_IPV6:
            self.stats["atyp_ipv6"] += 1
            return socket.inet_ntop(socket.AF_INET6, await reader.readexactly(16))
        if atyp == ATYP_DOMAIN:
            self.stats["atyp_domain"] += 1
            (length,) = await reader.readexactly(1)
            return (await reader.readexactly(length)).decode("idna")
        return None

    @staticmethod
    async def _reply(writer: asyncio.StreamWriter, code: int) -> None:
        # BND.ADDR/BND.PORT: 0.0.0.0:0, which clients ignore for CONNECT
        writer.write(bytes((VERSION, code, 0, ATYP_IPV4, 0, 0, 0, 0, 0, 0)))
        await writer.drain()

    async def _relay(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        host: str,
        port: int,
        up_reader: asyncio.StreamReader,
        up_writer: asyncio.StreamWriter,
    ) -> None:
        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                with contextlib.suppress(ConnectionError, OSError, RuntimeError):
                    dst.write_eof() if dst.can_write_eof() else dst.close()

        try:
            await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        finally:
            up_writer.close()


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
