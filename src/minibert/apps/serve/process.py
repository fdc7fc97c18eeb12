"""``serve``: the server process, from start to a graceful stop. The app is built (app.py), the
access log's thread started, the connections' limits set (http_limits.py), the address bound, and
uvicorn runs until a signal (SIGTERM, SIGINT, or any other that ends a command: SIGHUP, ...);
then it stops accepting, finishes the requests in flight, and exits.

The address is bound here, before uvicorn starts and before "serving on" is logged: a port in use
is one ``OSError`` naming host:port (the command's one error line, exit 1), not uvicorn's own
line and its exit status 3. A stop waits ``--graceful-timeout`` seconds for the requests in flight;
those still unfinished are answered 503 (guard.py) and the stop is an error (exit 1) that says
how many, since work that was accepted was not done. A second signal stops it at once: the
requests in flight are answered 503 the same way, and the error line says it was that signal."""

from __future__ import annotations

import contextlib
import errno
import logging
import logging.handlers
import socket

import uvicorn  # here, not in serve(): a missing uvicorn is the serve extra's one line (commands.py)

from .access_log import DroppingQueueHandler, access_logger
from .app import build_app
from .http_limits import BoundedH11Protocol, ConnectionRoom, connection_capacity, raise_open_files_limit
from .settings import ServeSettings

logger = logging.getLogger("minibert.serve")


def serve(settings: ServeSettings, stops) -> None:
    """Run the server until a signal: then stop accepting, finish the requests in flight (waiting
    up to ``--graceful-timeout``), return. ``stops``: the command's signal handler (cli.py's
    ``_StopRequests``), installed since the process started: the signals it has ``received``,
    and its ``listener``, which tells the server of each new one (a second forces the exit). So no
    signal is lost between the start and the server's loop, and none is raised inside it."""
    listener = bind(settings.host, settings.port)  # first: a port in use stops the command before anything starts
    port = listener.getsockname()[1]  # (--port 0: the one the system chose)
    failure: list[BaseException] = []
    server: uvicorn.Server | None = None

    def fatal(error: BaseException) -> None:
        failure.append(error)
        server.should_exit = True

    app = build_app(settings, on_fatal=fatal)
    access = DroppingQueueHandler()
    access_logger.addHandler(access)
    access_logger.setLevel(logging.INFO)
    writer = logging.handlers.QueueListener(access.queue, *logging.getLogger("minibert").handlers)
    writer.start()
    app.app.state.service.metrics.dropped_log_lines = lambda: access.dropped
    # An idle keep-alive connection stays open longer than clients keep theirs (httpx and the
    # openai client: 5 s; load balancers: 60 s), so the client closes it first. With uvicorn's
    # 5 s, a client reusing a connection just as the server closed it got a dropped request.
    # Requests' headers are bounded in size and time, and connections by the open-files limit
    # (http_limits.py); h11's own size limit sits just above, so the 431 comes from there, with a
    # message. The requests served at once are counted by Guard, not uvicorn (whose
    # limit_concurrency counts idle sockets too). No WebSockets: nothing here speaks them, and an
    # upgraded connection would leave the protocol that counts connections (http_limits.py).
    limits = raise_open_files_limit()
    room = ConnectionRoom(connection_capacity(limits and limits[1]))
    app.app.state.service.metrics.connection_lines = room.prometheus_lines
    protocol = BoundedH11Protocol.with_limits(settings.max_header_bytes, settings.header_timeout,
                                              settings.send_timeout, settings.read_timeout, room)  # fmt: skip
    config = uvicorn.Config(app, host=settings.host, port=settings.port, access_log=False, log_level="warning",
                            timeout_graceful_shutdown=settings.graceful_timeout,
                            timeout_keep_alive=settings.keep_alive_timeout, lifespan="on", http=protocol, ws="none",
                            h11_max_incomplete_event_size=settings.max_header_bytes + 1024)  # fmt: skip
    server = _Server(config)
    uvicorn_log = logging.getLogger("uvicorn.error")  # (configured by uvicorn.Config, just above)
    uvicorn_log.addFilter(_said_by_minibert)

    def stop(signum: int) -> None:
        if server.should_exit:
            server.force_exit = app.forced = True  # a second signal: stop at once (the guard and the last line say so)
        server.should_exit = True

    stops.listener = stop
    starting = not stops.received  # (a signal already in: no start to announce, the server stops as it starts)
    address = f"[{settings.host}]" if ":" in settings.host else settings.host  # (an IPv6 address: in brackets)
    if starting:
        logger.info("serving on http://%s:%d (model %s loading)%s", address, port, settings.model,
                    "" if settings.api_key else "; no API key: anyone who can reach this port can use it")  # fmt: skip
    if starting and limits is not None and room.capacity < 1 << 40:  # (no line where nothing limits open files)
        before, after = limits
        logger.info("open-files limit %s; it can hold about %d connections at once (beyond, the longest idle are "
                    "closed)", f"raised from {before} to {after}" if after != before else f"{after}",
                    room.capacity)  # fmt: skip
    try:
        if not stops.received:  # (a signal from now on sets should_exit: the server stops as it starts)
            server.run(sockets=[listener])
    except SystemExit as exit:  # uvicorn's own start-up failure (its exit status 3), said in its log line
        raise OSError(f"the server could not start on {settings.host}:{port} (uvicorn exit {exit.code})") from None
    finally:
        listener.close()
        writer.stop()  # the lines still queued are written first
        access_logger.removeHandler(access)
        uvicorn_log.removeFilter(_said_by_minibert)
    if failure:
        raise failure[0]
    if app.cut_off and app.forced:
        raise RuntimeError(f"stopped at once by a second signal; {app.cut_off} request(s) were cut off and answered "
                           "503")  # fmt: skip
    if app.cut_off:
        grace = settings.graceful_timeout
        raise RuntimeError(f"stopped with {app.cut_off} request(s) unfinished after the {grace:g} s grace "
                           "(--graceful-timeout); they were answered 503")  # fmt: skip


def _said_by_minibert(record: logging.LogRecord) -> bool:
    """False for uvicorn's own line when a stop's grace runs out ("Cancel 2 running task(s), timeout
    graceful shutdown exceeded"): the command says it in its one error line, and the access log has
    each request's 503 (docs/serving.md, Lifecycle). Every other line of uvicorn's passes."""
    return not str(record.msg).startswith("Cancel %s running task(s)")


class _Server(uvicorn.Server):
    """uvicorn's server, without its own signal handlers: ``serve``'s ``stops`` tells it to exit.
    And on a forced exit (a second signal) the app's lifespan still ends: uvicorn skips it then,
    and asyncio.run cancelled it instead, which uvicorn logged as a traceback ("Exception in
    'lifespan' protocol ... CancelledError"). Ending it costs no time: it waits for the batch in
    the model, which the interpreter waits for anyway before it exits (the model's thread)."""

    def capture_signals(self):
        return contextlib.nullcontext()

    async def shutdown(self, sockets=None) -> None:
        await super().shutdown(sockets)
        if self.force_exit and not self.lifespan.shutdown_event.is_set():
            await self.lifespan.shutdown()


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (IPv4 or IPv6, as the address says), bound before anything
    else starts; OSError naming host:port and why if it cannot be (in use, not this machine's)."""
    try:
        family, kind, protocol, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]  # fmt: skip
        listener = socket.socket(family, kind, protocol)
    except OSError as error:
        raise OSError(f"cannot listen on {host}:{port}: {error.strerror or error}") from None
    try:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # (a restart reuses the port at once)
        listener.bind(address)
        listener.listen(2048)
    except OSError as error:
        listener.close()
        reason = "the port is in use" if error.errno == errno.EADDRINUSE else error.strerror or str(error)
        raise OSError(f"cannot listen on {host}:{port}: {reason}") from None
    return listener
