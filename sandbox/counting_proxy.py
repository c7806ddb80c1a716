"""A byte-counting forward HTTP proxy (issue 31): what a residential proxy billed by the gigabyte
would count, measured between the crawl and the sandbox.

Every exchange is relayed byte for byte and recorded: the bytes the client sent (its request line,
headers, Proxy-Authorization included, and body) and the bytes it received (the status line,
headers and body exactly as they came, chunk framing and compression included), with the
request's GraphQL operation and store (from its `operationName` and `variables`) and the answer's
Content-Encoding, so a benchmark can sum them by kind. A CONNECT tunnel (https) is one record of
the bytes each way, whatever went through it.

Plain asyncio on a thread of its own (`start()`/`stop()`), loopback only; one upstream connection
per client connection (keep-alive both ways), as a real forward proxy keeps them. It is a
measuring instrument for benchmarks and tests, not the sandbox's proxy (sandbox/forward_proxy.py).
"""

from __future__ import annotations

import asyncio
import json
import threading
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

HOP_BY_HOP = (b"proxy-authorization", b"proxy-connection")


@dataclass(frozen=True)
class Exchange:
    method: str
    url: str
    status: int
    sent: int  # bytes from the client: request head and body
    received: int  # bytes to the client: response head and body as relayed
    operation: str | None = None  # GraphQL operationName
    store: str | None = None  # the dispensaryId / cNameOrID the GraphQL request names
    encoding: str | None = None  # the answer's Content-Encoding
    framing: int = 0  # of `received`, the chunked encoding's size lines, CRLFs and trailer


def graphql_of(target: str, body: bytes) -> tuple[str | None, str | None]:
    """(operationName, store) of a GraphQL request, from its query string or JSON body."""
    query = parse_qs(urlsplit(target).query)
    operation: str | None = (query.get("operationName") or [""])[0] or None
    raw_variables = (query.get("variables") or [""])[0]
    variables: object = None
    try:
        if raw_variables:
            variables = json.loads(raw_variables)
        elif body:
            payload = json.loads(body)
            operation = payload.get("operationName") if isinstance(payload, dict) else None
            variables = payload.get("variables") if isinstance(payload, dict) else None
    except ValueError:
        return operation, None
    store = None
    if isinstance(variables, dict):
        for key in ("productsFilter", "dispensaryFilter"):
            part = variables.get(key)
            if isinstance(part, dict):
                store = part.get("dispensaryId") or part.get("cNameOrID") or store
    return operation, store


def _headers(head: bytes) -> dict[bytes, bytes]:
    out = {}
    for line in head.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            out[name.strip().lower()] = value.strip()
    return out


async def _read_body(reader: asyncio.StreamReader, headers: dict[bytes, bytes], until_eof: bool) -> tuple[bytes, int]:
    """The message body exactly as sent (chunk framing kept), and how many of its bytes are framing."""
    if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
        raw = bytearray()
        payload = 0
        while True:
            size_line = await reader.readuntil(b"\r\n")
            raw += size_line
            size = int(size_line.split(b";")[0].strip(), 16)
            if size == 0:
                while True:  # trailers, then the empty line
                    line = await reader.readuntil(b"\r\n")
                    raw += line
                    if line == b"\r\n":
                        return bytes(raw), len(raw) - payload
            raw += await reader.readexactly(size + 2)
            payload += size
    if b"content-length" in headers:
        return await reader.readexactly(int(headers[b"content-length"])), 0
    return (await reader.read() if until_eof else b""), 0


class CountingProxy:
    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.server: asyncio.Server | None = None
        self.thread: threading.Thread | None = None
        self.port: int | None = None
        self._clients: set[asyncio.StreamWriter] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def take(self) -> list[Exchange]:
        """The exchanges recorded since the last take()."""
        with self._lock:
            taken, self.exchanges = self.exchanges, []
        return taken

    def _record(self, exchange: Exchange) -> None:
        with self._lock:
            self.exchanges.append(exchange)

    # -- relaying ----------------------------------------------------------------------------
    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        upstream: tuple[str, int, asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._clients.add(client_w)
        try:
            while True:
                try:
                    head = await client_r.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                method, target, _ = head.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)
                headers = _headers(head)
                if method == "CONNECT":
                    await self._tunnel(target, len(head), client_r, client_w)
                    return
                body, _ = await _read_body(client_r, headers, until_eof=False)
                parts = urlsplit(target)
                host, port = parts.hostname or "127.0.0.1", parts.port or 80
                if upstream is None or upstream[:2] != (host, port):
                    if upstream is not None:
                        upstream[3].close()
                    r, w = await asyncio.open_connection(host, port)
                    upstream = (host, port, r, w)
                origin_form = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                lines = head.split(b"\r\n")
                kept = [ln for ln in lines[1:] if ln.split(b":", 1)[0].strip().lower() not in HOP_BY_HOP]
                first = f"{method} {origin_form} HTTP/1.1".encode()
                upstream[3].write(b"\r\n".join([first, *kept]) + body)
                await upstream[3].drain()
                answer_head = await upstream[2].readuntil(b"\r\n\r\n")
                answer_headers = _headers(answer_head)
                status = int(answer_head.split(b" ", 2)[1])
                no_body = method == "HEAD" or status in (204, 304) or 100 <= status < 200
                answer, framing = (b"", 0) if no_body else await _read_body(upstream[2], answer_headers, until_eof=True)
                # recorded before it is relayed: once the client has its answer, the count is there
                operation, store = graphql_of(target, body)
                encoding = answer_headers.get(b"content-encoding")
                self._record(
                    Exchange(
                        method,
                        target,
                        status,
                        len(head) + len(body),
                        len(answer_head) + len(answer),
                        operation,
                        store,
                        encoding.decode() if encoding else None,
                        framing,
                    )
                )
                client_w.write(answer_head + answer)
                await client_w.drain()
                closing = b"close" in (answer_headers.get(b"connection", b"") + headers.get(b"connection", b"")).lower()
                if closing or (not no_body and not self._framed(answer_headers)):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, OSError, ValueError):
            return
        finally:
            if upstream is not None:
                upstream[3].close()
            client_w.close()
            self._clients.discard(client_w)

    @staticmethod
    def _framed(headers: dict[bytes, bytes]) -> bool:
        return b"content-length" in headers or b"chunked" in headers.get(b"transfer-encoding", b"").lower()

    async def _tunnel(
        self, target: str, head_bytes: int, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter
    ) -> None:
        host, _, port = target.rpartition(":")
        r, w = await asyncio.open_connection(host, int(port))
        established = b"HTTP/1.1 200 Connection established\r\n\r\n"
        client_w.write(established)
        counts = [head_bytes, len(established)]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter, slot: int) -> None:
            try:
                while data := await src.read(65536):
                    counts[slot] += len(data)
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(client_r, w, 0), pipe(r, client_w, 1))
        self._record(Exchange("CONNECT", target, 200, counts[0], counts[1]))

    # -- lifecycle ---------------------------------------------------------------------------
    def start(self) -> CountingProxy:
        ready = threading.Event()

        def run() -> None:
            self.loop = asyncio.new_event_loop()
            self.server = self.loop.run_until_complete(asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=512))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()
            self.server.close()
            for writer in list(self._clients):  # open keep-alive connections: closed, their handlers end
                writer.close()
            pending = asyncio.all_tasks(self.loop)
            if pending:
                self.loop.run_until_complete(asyncio.wait(pending, timeout=5))
            self.loop.close()

        self.thread = threading.Thread(target=run, name="counting-proxy", daemon=True)
        self.thread.start()
        if not ready.wait(30):
            raise RuntimeError("the counting proxy did not start")
        return self

    def stop(self) -> None:
        if self.loop and self.thread:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)

    def __enter__(self) -> CountingProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
