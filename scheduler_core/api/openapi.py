"""The OpenAPI 3.1 document of the API, generated from the pydantic bodies in ``scheduler_core.schemas``.

``python -m scheduler_core.api.openapi`` rewrites ``docs/openapi.json``; a test fails when the file is stale, so the
document cannot drift from the code. The server also serves it at ``/v1/openapi.json``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from .. import __version__
from ..cli.hub import SERVICE_PREFIX
from ..model.job import JobSpec
from ..model.sweep import SweepSpec
from ..schemas import (AddTrialRequest, CancelRequest, ErrorResponse, EventList, FinishSweepRequest,
                       FinishTrialRequest, IdleClockRequest, JobView, NodeActionRequest, NodeView, LogChunk, NodeList,
                       QueueList, QueueView, QuotaView, ReportRequest, ReportResponse,
                       SubmitResponse, SweepList, SweepView, TrialList, TrialView, UsageReport, WhoAmI)

_REF = "#/components/schemas/{model}"
Method = Literal["get", "post"]

_ERRORS: dict[int, str] = {
    400: "malformed request: body not JSON, bad query parameter or header",
    401: "missing or invalid bearer token",
    403: "the token's user may not act on this team or job",
    404: "no such job, team or endpoint",
    409: "conflicts with the current state (repeated Idempotency-Key with another body; job, trial or sweep "
         "already ended)",
    422: "well-formed but invalid: field-level messages in error.fields",
    503: "the store cannot take writes now (disk full, database down) or this server lost the scheduler's lease; "
         "nothing was stored: retry after the Retry-After header's seconds",
}
#: Every operation may answer these (the token is checked first; the store may be down).
_ALWAYS = (401, 503)
_INT64_MAX = 2 ** 63 - 1


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


def _path(name: str, description: str, pattern: str) -> dict[str, Any]:
    # The routes' own patterns (api.app): anything else is 404 before a handler runs.
    return {"name": name, "in": "path", "required": True, "description": description,
            "schema": {"type": "string", "pattern": pattern}}


def _count(description: str, minimum: int, maximum: int = _INT64_MAX) -> dict[str, Any]:
    return {"type": "integer", "minimum": minimum, "maximum": maximum, "description": description}


_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,127}$"
_JOB_ID = _path("job_id", "a job id such as job_8c41a2", _ID_PATTERN)
_SWEEP_ID = _path("sweep_id", "a sweep id such as sweep_3f9e01", _ID_PATTERN)
_NUMBER = _path("number", "a trial's Optuna number (0, 1, …)", r"^[0-9]{1,6}$")
_TEAM = _path("team", "a team name", r"^[^/]+$")
_KEY = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[ -~]+$"}
_JOB_STATES = "(PENDING|ADMITTED|RUNNING|TERMINATING|SUCCEEDED|FAILED|CANCELLED|TIMED_OUT)"
_SWEEP_STATES = "(RUNNING|CANCELLING|SUCCEEDED|FAILED|CANCELLED)"


def _states(names: str) -> dict[str, Any]:
    # Upper case as documented; the server also takes lower case and spaces after commas. Empty: the default.
    return {"type": "string", "pattern": f"^(|all|{names}(,{names})*)$"}


_NODE = _path("node", "a node name such as h100-b00-n03", r"^[a-z0-9][a-z0-9\-]{0,62}$")
_STATE = _query("state", "comma-separated job states, or 'all' (default: every state not finished)",
                {**_states(_JOB_STATES), "examples": ["PENDING", "PENDING,RUNNING", "all"]})
_WHEN = {"anyOf": [{"type": "string", "format": "date"}, {"type": "string", "format": "date-time"},
                   {"type": "string", "maxLength": 0, "description": "empty: the default"}]}

#: (path, method, summary, parameters, request body, success status, response body, error statuses)
_ROUTES: list[tuple[str, Method, str, list[dict[str, Any]], type[BaseModel] | None, int, type[BaseModel],
                    tuple[int, ...]]] = [
    ("/v1/jobs", "post", "Submit a job; it waits in its team's queue",
     [{"name": "Idempotency-Key", "in": "header", "required": False, "schema": _KEY,
       "description": "the same key with the same body returns the first job; with another body, 409"}],
     JobSpec, 202, SubmitResponse, (400, 401, 403, 409, 422)),
    ("/v1/jobs/{job_id}", "get", "A job: state, placement, restarts, last checkpoint, GPU-hours used",
     [_JOB_ID], None, 200, JobView, (401, 403, 404)),
    ("/v1/jobs/{job_id}:cancel", "post", "Cancel a job: at once if pending, by signal if running. The answer means "
     "the cancel is recorded: it holds across a scheduler restart",
     [_JOB_ID], CancelRequest, 202, JobView, (400, 401, 403, 404, 409, 422)),
    ("/v1/jobs/{job_id}:checkpoint", "post", "Ask a running job to checkpoint now (e.g. before maintenance)",
     [_JOB_ID], None, 202, JobView, (401, 403, 404, 409)),
    ("/v1/jobs/{job_id}:idle", "post",
     "A running notebook's idle clock, from the idle reaper: estimated starts count on its slice freeing then",
     [_JOB_ID], IdleClockRequest, 200, JobView, (400, 401, 403, 404, 409, 422)),
    ("/v1/jobs/{job_id}/logs", "get", "What one pod printed (its latest attempt, or ?attempt=), read on from a "
                                      "byte offset",
     [_JOB_ID, _query("rank", "the pod's rank (default 0)", _count("a rank", 0)),
      _query("attempt", "which launch (0 first; default the latest)", _count("an attempt", 0)),
      _query("offset", "byte offset to read from; pass the last answer's next_offset", _count("bytes", 0))],
     None, 200, LogChunk, (400, 401, 403, 404)),
    ("/v1/queues", "get", "Every queue the caller may read (their team's; all for an admin)",
     [_STATE], None, 200, QueueList, (400, 401)),
    ("/v1/queues/{team}", "get", "A team's queue with position, reason and estimated start",
     [_TEAM, _STATE], None, 200, QueueView, (400, 401, 403, 404)),
    ("/v1/teams/{team}/quota", "get", "Nominal, borrowed, lent and fair-share value per flavour",
     [_TEAM], None, 200, QuotaView, (401, 403, 404)),
    ("/v1/nodes", "get", "Nodes: health, capacity, allocated and free units", [], None, 200, NodeList, (401,)),
    *[(f"/v1/nodes/{{node}}:{action}", "post", summary, [_NODE], NodeActionRequest, 200, NodeView,
       (400, 401, 403, 404, 409)) for action, summary in (
        ("fail", "Fail a node (admin): into repair, its pods killed, their gangs restarted elsewhere"),
        ("drain", "Drain a node (admin): it takes no new work, its jobs finish"),
        ("repair", "Return a node to service (admin): it runs the scheduler's burn-in, and is ready if that passes"))],
    ("/v1/events", "get", "Decisions and observations, oldest first, paged with ?after=",
     [_query("job_id", "only this job's events", {"type": "string"}),
      _query("after", "events after this id", _count("an event id", 0)),
      _query("limit", "at most this many (1–1000, default 100)", _count("events", 1, 1000))],
     None, 200, EventList, (400, 401, 403, 404)),
    ("/v1/usage", "get", "GPU-seconds by day, team, flavour, nominal vs borrowed, and normalised by speed",
     [_query("team", "one team (default: the caller's; all teams for an admin)", {"type": "string"}),
      _query("since", "ISO-8601 date or time (UTC unless an offset is given)", _WHEN),
      _query("until", "ISO-8601 date or time (default: now); after since", _WHEN)],
     None, 200, UsageReport, (400, 401, 403, 404)),
    ("/v1/whoami", "get", "The caller's user, team and admin flag", [], None, 200, WhoAmI, (401,)),
    ("/v1/sweeps", "post", "Start a hyper-parameter sweep; each trial becomes its own job",
     [{"name": "Idempotency-Key", "in": "header", "required": False, "schema": _KEY,
       "description": "the same key with the same body returns the first sweep; with another body, 409"}],
     SweepSpec, 202, SweepView, (400, 401, 403, 409, 422)),
    ("/v1/sweeps", "get", "The caller's team's sweeps (all teams' for an admin), oldest first",
     [_query("team", "one team (admins)", {"type": "string"}),
      _query("state", "comma-separated sweep states, or 'all' (default)", _states(_SWEEP_STATES)),
      _query("limit", "the newest this many (1–10000, default 100)", _count("sweeps", 1, 10000))],
     None, 200, SweepList, (400, 401, 403)),
    ("/v1/sweeps/{sweep_id}", "get", "A sweep: progress, trial counts, best trial so far",
     [_SWEEP_ID], None, 200, SweepView, (401, 403, 404)),
    ("/v1/sweeps/{sweep_id}:cancel", "post", "Cancel a sweep: its running trials' jobs stop, no new trials start",
     [_SWEEP_ID], None, 202, SweepView, (401, 403, 404, 409)),
    ("/v1/sweeps/{sweep_id}/trials", "get", "A sweep's trials: parameters, reports, outcome, job state",
     [_SWEEP_ID], None, 200, TrialList, (401, 403, 404)),
    ("/v1/sweeps/{sweep_id}/trials", "post", "Record a trial and submit its job (the sweep controller; admin)",
     [_SWEEP_ID], AddTrialRequest, 201, TrialView, (400, 401, 403, 404, 409, 422)),
    ("/v1/sweeps/{sweep_id}/trials/{number}:finish", "post",
     "Record a trial's outcome: COMPLETE, PRUNED or FAILED (the sweep controller; admin)",
     [_SWEEP_ID, _NUMBER], FinishTrialRequest, 200, TrialView, (400, 401, 403, 404, 409, 422)),
    ("/v1/sweeps/{sweep_id}:finish", "post", "Close a sweep (the sweep controller; admin)",
     [_SWEEP_ID], FinishSweepRequest, 200, SweepView, (400, 401, 403, 404, 409, 422)),
    ("/v1/jobs/{job_id}:report", "post",
     "A trial reports a step's value or its final objective; the answer says whether to stop",
     [_JOB_ID], ReportRequest, 200, ReportResponse, (400, 401, 403, 404, 409, 422)),
]


#: Bodies a request may leave out (a cancel without a reason, an operator's reason for a node action).
_OPTIONAL_BODIES: frozenset[type[BaseModel]] = frozenset({CancelRequest, NodeActionRequest})


def _error_response(code: int, schema: dict[str, Any]) -> dict[str, Any]:
    response: dict[str, Any] = {"description": _ERRORS[code], "content": {"application/json": {"schema": schema}}}
    if code == 503:
        response["headers"] = {"Retry-After": {"description": "seconds to wait before sending the request again",
                                               "schema": {"type": "integer", "minimum": 1}}}
    return response


def document() -> dict[str, Any]:
    models: list[tuple[type[BaseModel], JsonSchemaMode]] = [(ErrorResponse, "serialization")]
    for *_, request, _, response, _ in _ROUTES:
        if request is not None:
            models.append((request, "validation"))
        models.append((response, "serialization"))
    refs, schema = models_json_schema(list(dict.fromkeys(models)), ref_template=_REF)
    paths: dict[str, dict[str, Any]] = {}
    for path, method, summary, parameters, request, status, response, errors in _ROUTES:
        codes = sorted(set(errors) | set(_ALWAYS) | ({400, 422} if request is not None else set()))
        operation: dict[str, Any] = {
            "summary": summary,
            "operationId": f"{method}_{path.strip('/').replace('/', '_').replace('{', '').replace('}', '')}"
                           .replace(":", "_"),
            "parameters": parameters,
            "responses": {
                str(status): {"description": {200: "OK", 201: "Created"}.get(status, "Accepted"),
                              "content": {"application/json": {"schema": refs[(response, "serialization")]}}},
                **{str(code): _error_response(code, refs[(ErrorResponse, "serialization")]) for code in codes},
            },
        }
        if request is not None:
            operation["requestBody"] = {"required": request not in _OPTIONAL_BODIES, "content": {
                "application/json": {"schema": refs[(request, "validation")]}}}
        paths.setdefault(path, {})[method] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "Shoal scheduler API", "version": __version__,
                 "description": "Submit and follow gang jobs on a shared GPU cluster. Authenticate with "
                                "'Authorization: Bearer <token>'. Errors are {\"error\": {\"code\", \"message\", "
                                "\"fields\"}}. Times are ISO-8601 UTC."},
        # The same API answers at its own root and, run as JupyterHub's service, under the hub's proxy.
        "servers": [{"url": "/", "description": "shoal up on its own host and port"},
                    {"url": SERVICE_PREFIX.rstrip("/"),
                     "description": "through JupyterHub's proxy, as the hub's service (shoal up starts the hub "
                                    "unless --no-hub)"}],
        "components": {
            "schemas": schema.get("$defs", {}),
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
    }


def render() -> str:
    return json.dumps(document(), indent=2, sort_keys=True) + "\n"


def default_path() -> Path:
    return Path(__file__).resolve().parents[2] / "docs" / "openapi.json"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else default_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(render())
    print(f"wrote {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
