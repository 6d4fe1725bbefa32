"""Prometheus metrics of one app: request latency, index size, queue depth, encoder throughput."""

import time
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from starlette.types import ASGIApp, Message, Receive, Scope, Send

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _IndexCollector:
    """Reads live values from the service at scrape time."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.read = read

    def collect(self) -> Iterator[Any]:  # prometheus_client collector protocol
        values = self.read()
        for name, help_text in (
            ("documents", "Documents in the index."),
            ("chunks", "Chunks in the index."),
            ("failed_files", "Files whose last attempt failed."),
            ("queue_depth", "Write requests waiting."),
            ("encode_tokens_per_second", "Encoder throughput of the current or last indexing batch."),
        ):
            gauge = GaugeMetricFamily(f"lodex_{name}", help_text)
            gauge.add_metric([], float(values[name]))
            yield gauge
        counter = CounterMetricFamily("lodex_encoded_tokens", "Tokens encoded since the service started.")
        counter.add_metric([], float(values["encoded_tokens"]))
        yield counter


class Metrics:
    """A registry per app (no globals), with the request histogram and the index collector."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry()
        self.latency = Histogram(
            "lodex_request_seconds", "Request latency by route.", ["method", "route", "status"], buckets=BUCKETS, registry=self.registry
        )
        self.registry.register(_IndexCollector(read))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one request."""
        self.latency.labels(method, route, str(status)).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)


class Timing:
    """ASGI middleware: every request's latency into the histogram, by method, route template and status (plain ASGI,
    not Starlette's BaseHTTPMiddleware, which costs a task group and two streams per request)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        started = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = getattr(scope.get("route"), "path", "unmatched")  # set by the router on the same scope
            self.metrics.observe(scope["method"], route, status, time.perf_counter() - started)
