"""Schemathesis (property-based tests from /openapi.json) against the HTTP service on loopback,
with and without the bearer token, NUL bytes allowed in strings: no answer is a 500, and every
answer's status, headers and body are the ones the schema documents, and no request the schema
allows is refused as malformed (ST202). The seed is fixed
(derandomized) and the examples per operation bounded, so a run is the same run every time."""

from __future__ import annotations

import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import positive_data_acceptance

from cannaspider import settings as defaults
from cannaspider.web.app import create_app
from tests.conftest import TABLES
from tests.httpclient import http
from tests.web.conftest import TOKEN, Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

EXAMPLES = 12  # per operation, mode (valid and invalid input) and token

# the schema the service describes, loaded from the app itself to list its operations at collection;
# the requests go to a running service over loopback
SCHEMA = schemathesis.openapi.from_dict(
    create_app("postgresql://unused", TOKEN, pool_max_size=defaults.DB_POOL_MAX_SIZE).openapi()
)
SCHEMA.config.generation.update(allow_x00=True, deterministic=True, max_examples=EXAMPLES)
OPERATIONS = {result.ok().label: result.ok() for result in SCHEMA.get_all_operations()}


def negatable(label: str) -> bool:
    """Whether invalid input exists for the operation: a body, or a parameter that is more than any text."""
    raw = OPERATIONS[label].definition.raw
    schemas = [
        {k: v for k, v in p["schema"].items() if k not in ("title", "description")} for p in raw.get("parameters", [])
    ]
    return "requestBody" in raw or any(schema != {"type": "string"} for schema in schemas)


CASES = [(label, GenerationMode.POSITIVE) for label in sorted(OPERATIONS)]
CASES += [(label, GenerationMode.NEGATIVE) for label in sorted(OPERATIONS) if negatable(label)]


@pytest.fixture(scope="module")
def service(db_url):
    # stores 1-3 with products, so that the filters and histories reach their queries
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute(f"TRUNCATE {', '.join(TABLES)} RESTART IDENTITY CASCADE")
        for i in (1, 2, 3):
            conn.execute("INSERT INTO dispensaries (name, state) VALUES (%s, 'AZ')", (f"store {i}",))
            conn.execute(
                "INSERT INTO store_products (dispensary_id, provider_product_id, name_raw, name, brand_name_raw,"
                " category) VALUES (%s, '0', 'x', 'x', 'b', 'c')",
                (i,),
            )
    with Service(db_url, TOKEN) as svc:
        yield svc


@pytest.mark.parametrize("token", [TOKEN, None], ids=["with-token", "without-token"])
@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{label}-{mode.value}" for label, mode in CASES])
def test_every_operation_answers_as_documented(service, label, mode, token):
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    @given(case=OPERATIONS[label].as_strategy(mode))
    @settings(
        max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    def check(case):
        # every check, ST202 (a schema-valid request refused) included: what the schema cannot know
        # (a target or a cursor that leads nowhere, an image not stored) is a documented 404
        case.call_and_validate(base_url=service.base, headers=headers)

    check()


# Operations whose schema states every rule of their input, so that no schema-valid request is
# refused (schemathesis' ST202): the day's range, a date or date-time `since`, a locale's shape, a
# cursor's form (one that leads nowhere is a 404); a task's body per role with its target (a target
# that names no store, keyword or state is a 404, TargetNotFound). With the token: the write is made.
ACCEPTING = ["GET /api/events", "GET /api/market", "GET /api/keywords/{keyword_id}/profile", "POST /api/tasks"]


@pytest.mark.parametrize("label", ACCEPTING)
def test_a_schema_valid_request_is_never_refused(service, label):
    @given(case=OPERATIONS[label].as_strategy(GenerationMode.POSITIVE))
    @settings(max_examples=50, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def check(case):
        case.call_and_validate(
            base_url=service.base, headers={"Authorization": f"Bearer {TOKEN}"}, checks=[positive_data_acceptance]
        )

    check()


def test_a_405_allows_every_method_of_the_path(service):
    """OPTIONS /api/tasks once said `Allow: POST` (the first route of the path), hiding its GET (ST205)."""
    for method in ("OPTIONS", "DELETE", "PUT"):
        reply = http(method, service.base + "/api/tasks")
        assert reply.status == 405 and reply.headers["allow"] == "GET, POST", (method, reply.headers)
    reply = http("DELETE", service.base + "/api/tasks/1")
    assert reply.status == 405 and reply.headers["allow"] == "GET"
