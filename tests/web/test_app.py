"""The HTTP service over a real PostgreSQL: roles, validation with reasons, auth, paging, OpenAPI;
`/` and the API docs: no page of the service needs a host other than itself."""

from __future__ import annotations

import re
import socket
from http.client import HTTPConnection
from urllib.parse import urljoin, urlparse

import pytest
from scrapy.utils.project import get_project_settings

from cannaspider.tasks import roles
from tests.httpclient import http
from tests.tasks.conftest import add_store, add_stores
from tests.web.conftest import TOKEN, Service

pytestmark = pytest.mark.integration  # spawns (tests/tiers.py)

AUTH = {"Authorization": f"Bearer {TOKEN}"}
API_MAX_BODY = get_project_settings().getint("API_MAX_BODY_BYTES")


def test_roles_come_from_the_registry(api):
    reply = http("GET", api.base + "/api/worker-registry/roles")
    assert reply.status == 200
    listed = reply.json()
    assert [r["role"] for r in listed] == list(roles.names())
    resync = next(r for r in listed if r["role"] == "product_resync")
    assert resync["needs"] == "dispensary_id" and resync["frequency"] == "every 4 hours"


def test_post_creates_an_on_demand_task_then_reuses_it(api, sql):
    d = add_store(sql)
    first = http("POST", api.base + "/api/tasks", {"role": "product_resync", "dispensary_id": d}, AUTH)
    assert first.status == 201, first.text
    task = first.json()["task"]
    assert [task[k] for k in ("role", "dispensary_id", "priority", "status")] == ["product_resync", d, 10, "pending"]
    again = http("POST", api.base + "/api/tasks", {"role": "product_resync", "dispensary_id": d, "priority": 30}, AUTH)
    assert again.status == 200 and again.json()["reused"] and again.json()["task"]["id"] == task["id"]
    assert again.json()["task"]["priority"] == 30
    state = http("POST", api.base + "/api/tasks", {"role": "store_discovery", "state": "nv"}, AUTH)
    assert state.status == 201 and state.json()["task"]["payload"] == {"state": "NV"}
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 2


def test_the_seeds_task_payload_with_its_platform_is_accepted(api, sql):
    d = add_store(sql)
    body = {"role": "product_resync", "dispensary_id": d, "platform": "dutchie", "priority": 20}
    reply = http("POST", api.base + "/api/tasks", body, AUTH)
    assert reply.status == 201, reply.text
    assert [reply.json()["task"][k] for k in ("role", "platform", "dispensary_id", "priority")] == [
        "product_resync",
        "dutchie",
        d,
        20,
    ]
    other = http("POST", api.base + "/api/tasks", {**body, "platform": "weedmaps"}, AUTH)
    assert other.status == 422 and "unknown platform 'weedmaps' (supported: dutchie, jane)" in other.text
    jane = http("POST", api.base + "/api/tasks", {**body, "platform": "jane"}, AUTH)
    assert jane.status == 201 and jane.json()["task"]["platform"] == "jane", jane.text
    assert sql("SELECT role, platform FROM worker_tasks ORDER BY id") == [
        ("product_resync", "dutchie"),
        ("product_resync", "jane"),
    ]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"role": "product_rescan", "dispensary_id": 1}, "does not match any of the expected tags: 'store_discovery'"),
        ({"role": "product_resync"}, "Field required"),
        ({"role": "product_resync", "dispensary_id": "12"}, "Input should be a valid integer"),
        ({"role": "product_resync", "dispensary_id": 0}, "greater than or equal to 1"),
        ({"role": "product_resync", "dispensary_id": 1, "state": "AZ"}, "Extra inputs are not permitted"),
        ({"role": "store_discovery", "state": "A"}, "at least 2 characters"),
        ({"role": "analytics_refresh", "priority": 10**6}, "less than or equal to 1000"),
        ({"role": "analytics_refresh", "urgent": True}, "Extra inputs are not permitted"),
        ({"role": "analytics_refresh", "keyword_id": 1}, "Extra inputs are not permitted"),
    ],
)
def test_bad_input_is_a_422_with_the_reason_and_queues_nothing(api, sql, body, reason):
    add_store(sql)
    reply = http("POST", api.base + "/api/tasks", body, AUTH)
    assert reply.status == 422, reply.text
    assert reason in reply.text
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


@pytest.mark.parametrize(
    ("body", "field", "reason"),
    [
        ({"role": "product_resync", "dispensary_id": 424242}, "dispensary_id", "dispensary 424242 does not exist"),
        ({"role": "product_resync", "dispensary_id": 2**70}, "dispensary_id", f"dispensary {2**70} does not exist"),
        ({"role": "entry_point_discovery", "dispensary_id": 7}, "dispensary_id", "dispensary 7 does not exist"),
        ({"role": "crawl_onpage", "keyword_id": 9}, "keyword_id", "keyword 9 does not exist"),
        ({"role": "store_discovery", "state": "Atlantis"}, "state", "unknown US state 'Atlantis'"),
        ({"role": "store_discovery", "state": "00"}, "state", "unknown US state '00'"),  # schemathesis' ST202
        ({"role": "store_discovery", "state": "\x00\x00"}, "state", "unknown US state"),
    ],
)
def test_a_well_formed_target_that_names_nothing_is_a_404(api, sql, body, field, reason):
    """The body's schema cannot know which stores, keywords and states exist: a target of the right
    form that names none is a documented 404 (TargetNotFound), not a 422 (once: a 422 for a body the
    schema accepts, schemathesis' ST202) nor a 500."""
    add_store(sql)
    reply = http("POST", api.base + "/api/tasks", body, AUTH)
    assert reply.status == 404, reply.text
    assert reply.json() == {"detail": reply.json()["detail"], "field": field}
    assert reason in reply.json()["detail"]
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


def test_a_whole_number_written_with_a_fraction_is_the_integer_it_is(api, sql):
    """JSON Schema's `integer` is any number without a fraction: `7.0` is one (schemathesis sent it
    and got a 422, ST202). A fraction, a string or a bool stays refused."""
    d = add_store(sql)
    body = {"role": "product_resync", "dispensary_id": float(d), "priority": 20.0, "max_attempts": 3.0}
    reply = http("POST", api.base + "/api/tasks", body, AUTH)
    assert reply.status == 201, reply.text
    assert [reply.json()["task"][k] for k in ("dispensary_id", "priority", "max_attempts")] == [d, 20, 3]
    for bad in ({"priority": 20.5}, {"priority": "20"}, {"priority": True}, {"dispensary_id": d + 0.5}):
        reply = http("POST", api.base + "/api/tasks", {**body, **bad}, AUTH)
        assert reply.status == 422 and "valid integer" in reply.text, (bad, reply.text)


def test_the_task_body_is_one_schema_per_role_naming_its_target(api):
    """POST /api/tasks takes a `oneOf` of one body per role (told apart by `role`), each requiring
    its role's target and refusing any other: a body the schema accepts is one the handler takes."""
    spec = http("GET", api.base + "/openapi.json").json()
    operation = spec["paths"]["/api/tasks"]["post"]
    body = operation["requestBody"]["content"]["application/json"]["schema"]
    assert body["discriminator"]["propertyName"] == "role"
    assert set(body["discriminator"]["mapping"]) == set(roles.names()) and len(body["oneOf"]) == len(roles.names())
    schemas = spec["components"]["schemas"]
    for role in roles.all_roles().values():
        schema = schemas[body["discriminator"]["mapping"][role.name].rsplit("/", 1)[1]]
        assert schema["properties"]["role"]["const"] == role.name and schema["additionalProperties"] is False
        targets = {"dispensary_id", "state", "keyword_id"} & set(schema["properties"])
        assert targets == ({role.needs} if role.needs != "nothing" else set())
        assert set(schema["required"]) == {"role", *targets}
    not_found = operation["responses"]["404"]
    assert not_found["description"].startswith("TargetNotFound")
    assert not_found["content"]["application/json"]["schema"]["$ref"].endswith("/TargetNotFoundOut")
    assert set(schemas["TargetNotFoundOut"]["required"]) == {"detail", "field"}


def test_malformed_json_is_a_422(api):
    reply = http("POST", api.base + "/api/tasks", b"{not json", {**AUTH, "content-type": "application/json"})
    assert reply.status == 422 and "JSON decode error" in reply.text


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Basic {TOKEN}"}, {"Authorization": TOKEN}],
)
def test_writes_need_the_bearer_token(api, sql, headers):
    d = add_store(sql)
    reply = http("POST", api.base + "/api/tasks", {"role": "product_resync", "dispensary_id": d}, headers)
    assert reply.status == 401 and reply.headers.get("www-authenticate") == "Bearer"
    assert TOKEN not in reply.text
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


def test_auth_is_checked_before_the_body(api):
    reply = http("POST", api.base + "/api/tasks", {"role": "nope"}, {})
    assert reply.status == 401


def test_without_a_configured_token_writes_are_refused_and_reads_work(api_without_token, sql):
    reply = http("POST", api_without_token.base + "/api/tasks", {"role": "analytics_refresh"}, AUTH)
    assert reply.status == 403 and "CANNASPIDER_API_TOKEN" in reply.text
    assert http("GET", api_without_token.base + "/api/tasks").status == 200
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


def test_list_filters_and_pages(api, sql):
    for d in add_stores(sql, 5):
        http("POST", api.base + "/api/tasks", {"role": "product_resync", "dispensary_id": d}, AUTH)
    http("POST", api.base + "/api/tasks", {"role": "analytics_refresh"}, AUTH)
    sql("UPDATE worker_tasks SET status = 'failed' WHERE id = 2")
    url = api.base + "/api/tasks?role=product_resync&limit=2"
    pages, before = [], None
    while True:
        reply = http("GET", url + (f"&before_id={before}" if before else ""))
        assert reply.status == 200
        body = reply.json()
        pages.append([t["id"] for t in body["tasks"]])
        before = body["next_before_id"]
        if before is None:
            break
    assert pages == [[5, 4], [3, 2], [1]]
    failed = http("GET", api.base + "/api/tasks?status=failed").json()["tasks"]
    assert [t["id"] for t in failed] == [2]
    assert http("GET", api.base + "/api/tasks?dispensary_id=3").json()["tasks"][0]["dispensary_id"] == 3
    assert http("GET", api.base + "/api/tasks/6").json()["role"] == "analytics_refresh"
    assert http("GET", api.base + "/api/tasks/99").status == 404
    for bad in ("status=done", "role=nope", "limit=0", "limit=501", "before_id=x"):
        assert http("GET", api.base + "/api/tasks?" + bad).status == 422, bad


def test_openapi_describes_the_endpoints_and_the_bearer_scheme(api):
    spec = http("GET", api.base + "/openapi.json").json()
    assert {"/api/worker-registry/roles", "/api/tasks", "/api/tasks/{task_id}"} <= set(spec["paths"])
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    assert spec["paths"]["/api/tasks"]["post"]["security"] == [{"HTTPBearer": []}]
    assert "security" not in spec["paths"]["/api/tasks"]["get"]
    roles_enum = spec["components"]["schemas"]["RoleName"]["enum"]
    assert roles_enum == list(roles.names())


def test_an_unreachable_database_is_a_503_not_a_crash():
    # a request waits for a connection up to the pool's timeout (10 s: a restart ridden out), then 503
    url = "postgresql://nobody:pw@127.0.0.1:1/none?connect_timeout=1"
    with Service(url, TOKEN, pool_timeout_s=1.0) as service:
        reply = http("GET", service.base + "/api/tasks", timeout=30)
        assert reply.status == 503 and "database is unavailable" in reply.text
        assert "pw" not in reply.text
        assert http("GET", service.base + "/api/worker-registry/roles").status == 200


def test_the_service_serves_the_image_proxy(api):
    """`scrapy serve`'s app carries GET /img (docs/images.md): listed in the OpenAPI description,
    and a path outside the image store is a 404, never a file."""
    assert "/img/{path}" in http("GET", api.base + "/openapi.json").json()["paths"]
    assert http("GET", api.base + "/img/..%2F..%2Fetc%2Fpasswd").status == 404
    assert http("GET", api.base + "/img/products/az/none.webp?w=abc").status in (400, 404)


# --- writes are refused from their headers; bodies are capped (docs/operations.md) --------------
def raw_request(base: str, head: str, body: bytes = b"", timeout: float = 10) -> tuple[int, bytes]:
    """Send `head` and `body` (maybe less than the head announces), then read the whole answer.
    Nothing sent stays unread in the server's socket: no reset loses the answer."""
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(head.encode() + body)
        reply = b""
        while not _whole(reply) and (chunk := sock.recv(65536)):
            reply += chunk
    return int(reply.split(b" ", 2)[1]), reply


def _whole(reply: bytes) -> bool:
    head, _, body = reply.partition(b"\r\n\r\n")
    length = re.search(rb"content-length: (\d+)", head, re.I)
    return length is not None and len(body) >= int(length[1])


def post_head(size: int | None, headers: str = "") -> str:
    length = f"Content-Length: {size}\r\n" if size is not None else "Transfer-Encoding: chunked\r\n"
    return f"POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{length}{headers}\r\n"


def chunked(size: int, count: int) -> bytes:
    return (f"{size:x}\r\n".encode() + b" " * size + b"\r\n") * count  # no last chunk: the body goes on


@pytest.mark.parametrize(
    "head", [post_head(200 * 1024**2), post_head(60_000), post_head(None)], ids=["200MB", "60KB", "chunked"]
)
def test_an_unauthenticated_write_is_refused_before_its_body_is_read(api, head):
    # a 200 MB body announced and none of it sent: an answer at all means nobody waited for the body
    status, reply = raw_request(api.base, head, timeout=5)
    assert status == 401 and b"www-authenticate: Bearer" in reply
    assert reply.endswith(b'"this endpoint needs Authorization: Bearer <token>"}')


def test_a_body_over_the_cap_is_a_413_on_every_route(api, sql):
    auth = f"Authorization: Bearer {TOKEN}\r\n"
    refusal = f'{{"detail":"the request body is over {API_MAX_BODY} bytes (API_MAX_BODY_BYTES)"}}'.encode()
    status, reply = raw_request(api.base, post_head(10 * 1024**2, auth), timeout=5)
    assert status == 413 and reply.endswith(refusal)
    # chunked: no length to judge by, so the cap holds while it streams (the body never ends here)
    status, reply = raw_request(api.base, post_head(None, auth), chunked(16 * 1024, API_MAX_BODY // 16384 + 1))
    assert status == 413 and reply.endswith(refusal)
    big = http("GET", api.base + "/api/tasks", b"x" * (API_MAX_BODY + 1), {"content-type": "application/json"})
    assert big.status == 413  # reads too
    small = {"role": "analytics_refresh", "padding": " " * 100}
    assert http("POST", api.base + "/api/tasks", small, AUTH).status == 422  # under the cap: judged as usual
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


# --- bad input is a 4xx with a reason, never a 500 (the schema's own shape for 422) ---------------
@pytest.mark.parametrize(
    "path",
    [
        "/api/stores?state=A%00",
        "/api/stores/{d}/products?brand=Bud%00Bros",
        "/api/stores/{d}/products?category=%00",
        "/api/stores/{d}/products/a%00b/history",
        "/dashboard/stores?state=%00",
        "/dashboard/stores/{d}?brand=%00",
        "/dashboard/stores/{d}?category=x%00",
        "/dashboard/stores/{d}/products/a%00b",
    ],
)
def test_a_nul_in_a_parameter_is_a_422_with_the_reason(api, sql, path):
    d = add_store(sql)
    reply = http("GET", api.base + path.format(d=d))
    assert reply.status == 422, reply.text
    (error,) = reply.json()["detail"]
    assert error["type"] == "string_pattern_mismatch" and error["loc"][0] in ("query", "path")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b'{"role": "analytics_refresh", "priority": NaN}', "Input should be a valid integer"),
        (b'{"role": "analytics_refresh", "priority": Infinity}', "Input should be a valid integer"),
        (b'{"role": "\\ud800"}', "does not match any of the expected tags"),
        (b'{"role": "store_discovery", "state": "A\\udfff"}', "unable to parse raw data as a unicode string"),
        (b'{"role": "analytics_refresh", "\\ud800": 1}', "unable to parse raw data as a unicode string"),
    ],
)
def test_values_json_cannot_carry_back_are_a_422_not_a_500(api, sql, body, reason):
    reply = http("POST", api.base + "/api/tasks", body, {**AUTH, "content-type": "application/json"})
    assert reply.status == 422, reply.text
    assert reason in reply.text and isinstance(reply.json()["detail"], list)
    assert sql("SELECT count(*) FROM worker_tasks")[0][0] == 0


def test_a_refusal_of_the_body_has_the_documented_422_shape(api):
    reply = http("POST", api.base + "/api/tasks", {"role": "product_resync"}, AUTH)
    assert reply.status == 422
    [error] = reply.json()["detail"]
    assert error["loc"] == ["body", "product_resync", "dispensary_id"] and error["type"] == "missing"


@pytest.mark.parametrize("query", ["?w=%C2%B2", "?q=%C2%B2", "?h=%E2%91%A0", "?w=%D9%A3"])
def test_img_takes_ascii_digits_only(api, query):
    reply = http("GET", api.base + "/img/products/az/none.webp" + query)
    assert reply.status == 400 and "must be a whole number" in reply.json()["detail"], reply.text


# `/` and the API docs: no page of the service needs a host other than itself.

URL = re.compile(r"""(?:src|href|url)\s*[=:]\s*['"]([^'"]+)['"]|url\(([^)]+)\)""")


def test_root_redirects_to_the_dashboard(api):
    conn = HTTPConnection("127.0.0.1", api.port, timeout=10)
    conn.request("GET", "/")
    reply = conn.getresponse()
    assert reply.status in (302, 303, 307) and reply.getheader("location") == "/dashboard/"
    assert http("GET", api.base + "/").status == 200  # followed: the dashboard
    assert "/" not in http("GET", api.base + "/openapi.json").json()["paths"]


def test_the_docs_pages_load_everything_from_the_service_itself(api):
    for page in ("/docs", "/redoc"):
        reply = http("GET", api.base + page)
        assert reply.status == 200, page
        refs = [a or b for a, b in URL.findall(reply.text)]
        assert refs, page
        for ref in refs:
            absolute = urljoin(api.base + page, ref.strip())
            host = urlparse(absolute).hostname
            assert host == "127.0.0.1", f"{page} references {ref}"
            # every asset it names is served, non-empty
            asset = http("GET", absolute)
            assert asset.status == 200 and asset.body, absolute
        assert "cdn" not in reply.text.lower() and "googleapis" not in reply.text
    assert "validatorUrl" in http("GET", api.base + "/docs").text  # no badge calling swagger.io
