"""The helper for trial code: read this trial's parameters, report progress, report the final value.

    from sweeps import trial

    p = trial.params()                       # {"lr": 0.01, "hidden": 64}
    for epoch in range(start, epochs):
        loss = train_one_epoch(...)
        if trial.report(epoch, loss):        # True: the pruner stopped this trial (its job is being cancelled)
            break
    trial.finish(loss)                       # the objective; the trial is complete

Import-light on purpose: standard library only, so it works in any trial image with nothing but this file.

Authentication: the sweep controller gives every trial job ``SHOAL_API_URL`` and ``SHOAL_API_TOKEN``, a token of the
sweep owner's team (never an admin token) minted for that sweep and revoked when the sweep ends; the job's own id
(``SHOAL_JOB_ID``, from the job contract) names the trial. The API lets a token report only for its own team's jobs.

Outside a sweep (no ``SHOAL_TRIAL_PARAMS``), ``params(default)`` returns ``default``, and ``report`` and ``finish``
only print, so the same script runs on a laptop.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import urllib.error
import urllib.request
from typing import Any

ENV_TRIAL_PARAMS = "SHOAL_TRIAL_PARAMS"     # the names are those of scheduler_core.model.sweep (kept in step by a test)
ENV_TRIAL_NUMBER = "SHOAL_TRIAL_NUMBER"
ENV_API_URL = "SHOAL_API_URL"
ENV_API_TOKEN = "SHOAL_API_TOKEN"
ENV_JOB_ID = "SHOAL_JOB_ID"
#: How long ``report`` keeps retrying an unreachable scheduler (default 30 s; ``finish`` waits ten times as long).
ENV_TIMEOUT = "SHOAL_TRIAL_TIMEOUT_S"

_MISSING: Any = object()


class TrialError(RuntimeError):
    """The scheduler refused a report (``status`` is the HTTP status), or could not be reached in time."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def in_trial() -> bool:
    """Whether this process runs as a sweep trial."""
    return ENV_TRIAL_PARAMS in os.environ


def params(default: dict[str, Any] | None = _MISSING) -> dict[str, Any]:
    """This trial's parameters (also passed as ``--name value`` arguments)."""
    raw = os.environ.get(ENV_TRIAL_PARAMS)
    if raw is None:
        if default is _MISSING:
            raise TrialError(f"not running as a sweep trial ({ENV_TRIAL_PARAMS} is not set); "
                             f"pass params(default={{...}}) to run outside a sweep")
        return dict(default or {})
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise TrialError(f"{ENV_TRIAL_PARAMS} is not a JSON object: {raw[:80]!r}")
    return value


def number() -> int | None:
    """This trial's Optuna number, or ``None`` outside a sweep."""
    raw = os.environ.get(ENV_TRIAL_NUMBER)
    return int(raw) if raw is not None else None


def report(step: int, value: float) -> bool:
    """Record the objective's value after ``step``; returns whether to stop (the trial was pruned or cancelled).

    A step reported twice (after resuming from a checkpoint) keeps its first value. If the scheduler cannot be
    reached for a while the value is dropped with a warning and training goes on: progress reports are advisory.
    """
    body = {"step": _step(step), "value": _finite(value)}
    if not _connected():
        print(f"[trial] step {step}: {value}", file=sys.stderr)
        return False
    try:
        answer = _post(body, deadline_s=_timeout())
    except TrialError as exc:
        if exc.status == 409:
            return True
        print(f"[trial] warning: could not report step {step}: {exc}", file=sys.stderr)
        return False
    return bool(answer.get("should_stop", False))


def finish(value: float) -> bool:
    """Record the final objective: the trial is complete. Returns ``False`` if the trial had already ended (pruned,
    or its sweep cancelled), in which case the value is not recorded. Retries an unreachable scheduler for ten
    times as long as ``report`` does (5 minutes by default) before raising ``TrialError``: the final value is what
    the trial was run for."""
    body = {"value": _finite(value), "final": True}
    if not _connected():
        print(f"[trial] final: {value}", file=sys.stderr)
        return True
    try:
        _post(body, deadline_s=10 * _timeout())
    except TrialError as exc:
        if exc.status == 409:
            return False
        raise
    return True


# -- plumbing ----------------------------------------------------------------------------------------------------
def _timeout() -> float:
    return float(os.environ.get(ENV_TIMEOUT) or 30.0)


def _connected() -> bool:
    return all(os.environ.get(name) for name in (ENV_API_URL, ENV_API_TOKEN, ENV_JOB_ID))


def _step(step: int) -> int:
    if isinstance(step, bool) or int(step) != step or step < 0:
        raise ValueError(f"step must be a whole number ≥ 0, got {step!r}")
    return int(step)


def _finite(value: float) -> float:
    number_ = float(value)
    if not math.isfinite(number_):
        raise ValueError(f"the objective must be a finite number, got {value!r}")
    return number_


def _post(body: dict[str, Any], *, deadline_s: float) -> dict[str, Any]:
    """POST to ``/v1/jobs/{id}:report``; retry connection errors and 5xx with backoff until ``deadline_s``.
    A 4xx is final and raised as ``TrialError("<status> <message>")``."""
    url = f"{os.environ[ENV_API_URL].rstrip('/')}/v1/jobs/{os.environ[ENV_JOB_ID]}:report"
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"Bearer {os.environ[ENV_API_TOKEN]}", "Content-Type": "application/json"})
    give_up = time.monotonic() + deadline_s
    delay = 0.2
    while True:
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                answer = json.loads(response.read() or b"{}")
                return answer if isinstance(answer, dict) else {}
        except urllib.error.HTTPError as exc:
            detail = _error_message(exc)
            if exc.code < 500:
                raise TrialError(f"the scheduler refused the report ({exc.code}): {detail}", exc.code) from None
            problem = f"{exc.code} {detail}"
        except (urllib.error.URLError, OSError) as exc:
            problem = str(exc)
        if time.monotonic() + delay > give_up:
            raise TrialError(f"the scheduler at {url} did not answer: {problem}")
        time.sleep(delay)  # backoff between retries of an unreachable API, not a wait for a condition
        delay = min(delay * 2, 5.0)


def _error_message(exc: urllib.error.HTTPError) -> str:
    try:
        data = json.loads(exc.read() or b"{}")
    except ValueError:
        return exc.reason or ""
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(error)
    return str(data)
