"""Prometheus metrics of one app: request latency, index size, queue depth, encoder throughput."""

from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class _IndexCollector:
    """Reads live values from the service at scrape time."""

    def __init__(self, read: Callable[[], dict[str, Any]]) -> None:
        self.read = read

    def collect(self):  # prometheus_client collector protocol
        values = self.read()
        for name, help_text in (("documents", "Documents in the index."), ("chunks", "Chunks in the index."),
                                ("failed_files", "Files whose last attempt failed."), ("queue_depth", "Write requests waiting."),
                                ("encode_tokens_per_second", "Encoder throughput of the current or last indexing batch.")):
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
        self.latency = Histogram("lodex_request_seconds", "Request latency by route.", ["method", "route", "status"],
                                 buckets=BUCKETS, registry=self.registry)
        self.registry.register(_IndexCollector(read))

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one request."""
        self.latency.labels(method, route, str(status)).observe(seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition."""
        return generate_latest(self.registry)
