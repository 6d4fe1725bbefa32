"""Property-based run against the OpenAPI schema (schemathesis): no 5xx, every response matches the schema."""

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from lodex.api.http.app import create_app
from tests.test_api import _service

CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]


def test_every_operation_conforms_to_the_schema(tmp_path: Path) -> None:
    service = _service(tmp_path)
    service.settings.api.allowed_hosts = ["testserver"]  # schemathesis's ASGI client calls the app by that name
    try:
        schema = schemathesis.openapi.from_asgi("/openapi.json", create_app(service))
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 11
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
            def check(case) -> None:
                case.validate_response(case.call(), checks=CHECKS)

            check()
    finally:
        service.close()
