"""Tornado handlers of the sweep endpoints and of trial reports: thin, like ``handlers``; the logic is in
``api.sweeps.SweepService``."""

from __future__ import annotations

from ..model.sweep import SweepState
from .errors import BadRequest
from .handlers import _MAX_KEY, ApiContext, BaseHandler
from .sweeps import SweepService


class SweepBaseHandler(BaseHandler):
    sweeps: SweepService

    def initialize(self, ctx: ApiContext, sweeps: SweepService) -> None:  # type: ignore[override]
        super().initialize(ctx)
        self.sweeps = sweeps

    def sweep_states_arg(self) -> tuple[SweepState, ...] | None:
        value = self.get_query_argument("state", None)
        if value is None or value == "" or value.lower() == "all":
            return None
        states = []
        for part in value.split(","):
            try:
                states.append(SweepState(part.strip().upper()))
            except ValueError:
                raise BadRequest(f"unknown sweep state {part.strip()!r}; use one or more of "
                                 f"{', '.join(s.value for s in SweepState)}, or 'all'",
                                 fields={"state": f"unknown state {part.strip()!r}"}) from None
        return tuple(states)


class SweepsHandler(SweepBaseHandler):
    async def post(self) -> None:
        key = self.request.headers.get("Idempotency-Key")
        if key is not None and not (0 < len(key) <= _MAX_KEY and key.isascii() and key.isprintable()):
            raise BadRequest(f"Idempotency-Key must be 1–{_MAX_KEY} printable ASCII characters",
                             fields={"Idempotency-Key": "1–255 printable ASCII characters"})
        payload = self.json_body()
        self.send(await self.call(self.sweeps.create, self.identity, payload, idempotency_key=key), 202)

    async def get(self) -> None:
        team = self.get_query_argument("team", None) or None
        limit = self.int_arg("limit", 100, minimum=1, maximum=10000)
        assert limit is not None
        self.send(await self.call(self.sweeps.list, self.identity, team=team, states=self.sweep_states_arg(),
                                  limit=limit))


class SweepHandler(SweepBaseHandler):
    async def get(self, sweep_id: str) -> None:
        self.send(await self.call(self.sweeps.get, self.identity, sweep_id))


class SweepCancelHandler(SweepBaseHandler):
    async def post(self, sweep_id: str) -> None:
        self.send(await self.call(self.sweeps.cancel, self.identity, sweep_id), 202)


class SweepFinishHandler(SweepBaseHandler):
    async def post(self, sweep_id: str) -> None:
        payload = self.json_body()
        self.send(await self.call(self.sweeps.finish, self.identity, sweep_id, payload))


class SweepTrialsHandler(SweepBaseHandler):
    async def get(self, sweep_id: str) -> None:
        self.send(await self.call(self.sweeps.trials, self.identity, sweep_id))

    async def post(self, sweep_id: str) -> None:
        payload = self.json_body()
        self.send(await self.call(self.sweeps.add_trial, self.identity, sweep_id, payload), 201)


class SweepTrialFinishHandler(SweepBaseHandler):
    async def post(self, sweep_id: str, number: str) -> None:
        payload = self.json_body()
        self.send(await self.call(self.sweeps.finish_trial, self.identity, sweep_id, int(number), payload))


class JobReportHandler(SweepBaseHandler):
    async def post(self, job_id: str) -> None:
        payload = self.json_body()
        self.send(await self.call(self.sweeps.report, self.identity, job_id, payload))
