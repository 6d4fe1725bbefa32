"""A real lodex app served by uvicorn on 127.0.0.1 (a free port) in a thread and recorded in its data dir's
server.json, as `lodex serve` records itself: for tests of the CLI against a real socket."""

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn

from lodex.api.application import Application
from lodex.api.http.app import create_app
from lodex.api.http.server_record import Identity, record_server
from tests.waiting import Wake, wait_until


class StartingServer(uvicorn.Server):
    """uvicorn that says when it has started, and when its run ends (started or not): `wake`."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.wake = Wake()

    async def startup(self, sockets: list | None = None) -> None:  # type: ignore[type-arg]
        await super().startup(sockets=sockets)
        self.wake.notify()

    def run_in_thread(self, name: str = "uvicorn") -> threading.Thread:
        """run() in a daemon thread, started; until uvicorn has started (its thread must stay alive until then)."""

        def run() -> None:
            try:
                self.run()
            finally:
                self.wake.notify()

        thread = threading.Thread(target=run, name=name, daemon=True)
        thread.start()

        def started() -> bool:
            assert thread.is_alive(), "uvicorn stopped before it started"
            return bool(self.started and self.servers)

        wait_until(started, self.wake, 60, "uvicorn to start")
        return thread


@contextmanager
def live_server(service: Application) -> Iterator[tuple[Identity, int]]:
    """Serve `service` until the block ends (then stop the server and close the service); yields its identity and port."""
    identity = Identity.new()
    server = StartingServer(
        uvicorn.Config(create_app(service, identity=identity, host="127.0.0.1"), host="127.0.0.1", port=0, log_level="warning", access_log=False)
    )
    thread = server.run_in_thread()
    port = server.servers[0].sockets[0].getsockname()[1]
    record_server(service.settings.data_dir, "127.0.0.1", port, identity)
    try:
        yield identity, port
    finally:
        server.should_exit = True
        thread.join(30)
        service.close()
