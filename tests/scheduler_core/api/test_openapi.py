"""The OpenAPI document in docs/ is generated from the code and must be current; the server serves the same."""

from __future__ import annotations

import json
import re

from scheduler_core.api import make_app
from scheduler_core.api.openapi import default_path, document, render

from .harness import Harness


def test_docs_openapi_json_is_current() -> None:
    assert default_path().read_text() == render(), (
        "docs/openapi.json is stale: run `python -m scheduler_core.api.openapi`")


def test_every_route_the_server_has_is_documented(api: Harness) -> None:
    doc = document()
    served = api.http("GET", "/v1/openapi.json", who=None).json()

    app = make_app(api.service, authenticator=None)  # type: ignore[arg-type]
    routes = {re.sub(r"\(\?P<(\w+)>[^)]*\)", r"{\1}", rule.matcher.regex.pattern).rstrip("$")
              for rule in app.wildcard_router.rules}  # type: ignore[attr-defined]
    assert served == json.loads(json.dumps(doc))
    assert set(doc["paths"]) == {r for r in routes if r.startswith("/v1/") and r != "/v1/openapi.json"}
    assert len(doc["paths"]) == 23  # 11 + GET /v1/jobs/{job_id}/logs (magics) + 7 for sweeps + 3 node actions + :idle
    submit = doc["paths"]["/v1/jobs"]["post"]
    assert set(submit["responses"]) == {"202", "400", "401", "403", "409", "422", "503"}
