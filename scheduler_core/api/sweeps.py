"""What the API does for sweeps (DESIGN §6), without HTTP: who may do what, validation, the store, the answer.

Users create, read and cancel sweeps of their own team (admins: any). The sweep controller — a service holding an
admin token — adds trials, finishes them and closes sweeps. Trial jobs report through ``POST /v1/jobs/{id}:report``
with a token of their own team. A sweep is validated as strictly as a job, and more: its trial template must make
a job this cluster could run, or nothing is stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ..auth.tokens import Identity
from ..errors import Forbidden, ValidationFailed
from ..model.sweep import SweepSpec, SweepState, TrialState
from ..schemas import (AddTrialRequest, BestTrial, FinishSweepRequest, FinishTrialRequest, ReportRequest,
                       ReportResponse, SweepList, SweepView, TrialCounts, TrialList, TrialView, utc)
from ..store.base import Store
from ..store.records import Event, JobRecord, JobState, SweepRecord, TrialRecord
from .limits import check_spec
from .service import ApiService, InvalidSpec

M = TypeVar("M", bound=BaseModel)

#: The study each sweep's controller keeps in Optuna storage (``sweeps.study.study_name`` makes the same name).
STUDY_PREFIX = "shoal-"


class SweepService:
    """The sweep endpoints' logic, over the ``ApiService``'s store, teams and cluster limits."""

    def __init__(self, api: ApiService) -> None:
        self.api = api

    @property
    def store(self) -> Store:
        return self.api.store

    # -- users ---------------------------------------------------------------------------------------------------
    def create(self, identity: Identity, payload: Any, *, idempotency_key: str | None = None) -> SweepView:
        spec = parse(SweepSpec, payload, "sweep spec")
        if spec.team not in self.api.teams:
            raise InvalidSpec(f"unknown team {spec.team!r}", {
                "team": f"unknown team {spec.team!r}; teams here: {', '.join(sorted(self.api.teams))}"})
        if not identity.may_act_on(spec.team):
            raise Forbidden(f"user {identity.user!r} of team {identity.team!r} may not start sweeps for team "
                            f"{spec.team!r}")
        probe = spec.trial_job(sweep_id="probe", number=0, params=spec.example_params())
        problems = {f"trial.{field}": message for field, message in check_spec(probe, self.api.limits).items()}
        if problems:
            field, message = next(iter(problems.items()))
            raise InvalidSpec(f"this sweep's trials can never run here: {field}: {message}", problems)
        key = f"{identity.user}/{idempotency_key}" if idempotency_key is not None else None
        now = self.api.clock()
        record = self.store.create_sweep(spec, user=identity.user, now=now, idempotency_key=key)
        if record.created_at == now:
            self._event(record, "SweepCreated", f"{spec.n_trials} trials, {spec.parallelism} at once, by "
                                                f"{identity.user}")
        self.api.wake()
        return sweep_view(record, [])

    def get(self, identity: Identity, sweep_id: str) -> SweepView:
        record = self._visible(identity, sweep_id)
        return sweep_view(record, self.store.list_trials(sweep_id))

    def list(self, identity: Identity, *, team: str | None = None,
             states: Sequence[SweepState] | None = None, limit: int = 100) -> SweepList:
        """The caller's team's sweeps (an admin's: every team's, or ``team``'s), newest last."""
        if team is not None and not identity.may_act_on(team):
            raise Forbidden(f"user {identity.user!r} of team {identity.team!r} may not read team {team!r}")
        if team is None and not identity.admin:
            team = identity.team
        records = self.store.list_sweeps(team=team, states=states)[-limit:]
        return SweepList(sweeps=[sweep_view(r, self.store.list_trials(r.id)) for r in records])

    def cancel(self, identity: Identity, sweep_id: str) -> SweepView:
        record = self._visible(identity, sweep_id)
        updated = self.store.cancel_sweep(sweep_id, self.api.clock())
        if updated.state is not record.state:
            self._event(updated, "SweepCancelRequested", f"cancel requested by {identity.user}")
        self.api.wake()
        return sweep_view(updated, self.store.list_trials(sweep_id))

    def trials(self, identity: Identity, sweep_id: str) -> TrialList:
        self._visible(identity, sweep_id)
        return TrialList(trials=[trial_view(t, j) for t, j in self.store.list_trials(sweep_id)])

    def report(self, identity: Identity, job_id: str, payload: Any) -> ReportResponse:
        """A trial job's progress or final value; the answer says whether it should stop (pruned or cancelled)."""
        request = parse(ReportRequest, payload, "report")
        job = self.store.get(job_id)
        if not identity.may_act_on(job.team):
            raise Forbidden(f"job {job_id} belongs to team {job.team!r}; user {identity.user!r} of team "
                            f"{identity.team!r} may not report for it")
        trial, job = self.store.report_trial(job_id, step=request.step, value=request.value, final=request.final,
                                             now=self.api.clock())
        # "Stop" once the job itself is being stopped (the controller cancels a pruned trial's job right after
        # recording it): a trial that stopped on its own a moment earlier would exit 0 and end SUCCEEDED, not
        # CANCELLED, so the answer follows the job, never just the trial's record.
        should_stop = job.cancel_requested or job.state.finished
        return ReportResponse(should_stop=should_stop, trial=trial_view(trial, job))

    # -- the sweep controller (admin) ----------------------------------------------------------------------------
    def add_trial(self, identity: Identity, sweep_id: str, payload: Any) -> TrialView:
        _controller_only(identity, "add trials")
        request = parse(AddTrialRequest, payload, "trial")
        sweep = self.store.get_sweep(sweep_id)
        try:
            job = sweep.spec.trial_job(sweep_id=sweep_id, number=request.number, params=dict(request.params),
                                       env=dict(request.env))
        except ValidationError as exc:
            raise _invalid(exc, "trial job") from None
        except ValueError as exc:
            raise InvalidSpec(str(exc), {"params": str(exc)}) from None
        problems = check_spec(job, self.api.limits)
        if problems:
            field, message = next(iter(problems.items()))
            raise InvalidSpec(f"this trial's job can never run here: {field}: {message}", problems)
        trial, record = self.store.add_trial(sweep_id, request.number, dict(request.params), job,
                                             now=self.api.clock())
        self.api.wake()
        return trial_view(trial, record)

    def finish_trial(self, identity: Identity, sweep_id: str, number: int, payload: Any) -> TrialView:
        _controller_only(identity, "finish trials")
        request = parse(FinishTrialRequest, payload, "trial outcome")
        sweep = self.store.get_sweep(sweep_id)
        trial = self.store.finish_trial(sweep_id, number, TrialState(request.state), value=request.value,
                                        message=request.message, now=self.api.clock())
        if trial.state is not TrialState.COMPLETE:
            reason = "TrialPruned" if trial.state is TrialState.PRUNED else "TrialFailed"
            self.store.append_event(Event(at=self.api.clock(), kind="sweep", reason=reason, job_id=trial.job_id,
                                          team=sweep.team, message=f"trial {number}: {request.message}",
                                          data={"sweep_id": sweep_id, "trial": number}))
        job = self.store.get(trial.job_id)
        return trial_view(trial, job)

    def finish(self, identity: Identity, sweep_id: str, payload: Any) -> SweepView:
        _controller_only(identity, "close sweeps")
        request = parse(FinishSweepRequest, payload, "sweep outcome")
        record = self.store.finish_sweep(sweep_id, SweepState(request.state), request.message, self.api.clock())
        self._event(record, "SweepFinished", f"{record.state}: {record.message}")
        return sweep_view(record, self.store.list_trials(sweep_id))

    # -- helpers -------------------------------------------------------------------------------------------------
    def _visible(self, identity: Identity, sweep_id: str) -> SweepRecord:
        record: SweepRecord = self.store.get_sweep(sweep_id)
        if not identity.may_act_on(record.team):
            raise Forbidden(f"sweep {sweep_id} belongs to team {record.team!r}; user {identity.user!r} of team "
                            f"{identity.team!r} may not see or change it")
        return record

    def _event(self, record: SweepRecord, reason: str, message: str) -> None:
        self.store.append_event(Event(at=self.api.clock(), kind="sweep", reason=reason, team=record.team,
                                      message=f"sweep {record.id} ({record.spec.name}): {message}",
                                      data={"sweep_id": record.id}))


def _controller_only(identity: Identity, what: str) -> None:
    if not identity.admin:
        raise Forbidden(f"only the sweep controller (an admin token) may {what}; user {identity.user!r} is not "
                        f"an admin")


def parse(model: type[M], payload: Any, what: str) -> M:
    """``model`` from a decoded JSON body, or ``InvalidSpec`` naming every bad field."""
    try:
        return model.model_validate(payload)
    except ValidationError as exc:
        raise _invalid(exc, what) from None


def _invalid(exc: ValidationError, what: str) -> ValidationFailed:
    fields: dict[str, str] = {}
    for error in exc.errors():
        field = ".".join(str(part) for part in error["loc"]) or what.replace(" ", "_")
        fields.setdefault(field, error["msg"].removeprefix("Value error, "))
    first_field, first_message = next(iter(fields.items()))
    more = len(fields) - 1
    suffix = f" (and {more} more field{'s' if more > 1 else ''})" if more else ""
    return InvalidSpec(f"invalid {what}: {first_field}: {first_message}{suffix}", fields)


# -- views --------------------------------------------------------------------------------------------------------

def trial_view(trial: TrialRecord, job: JobRecord) -> TrialView:
    created = utc(trial.created_at)
    assert created is not None
    return TrialView(
        sweep_id=trial.sweep_id, number=trial.number, job_id=trial.job_id, state=trial.state.value,
        job_state=job.state.value, params=dict(trial.params), value=trial.value,
        intermediate=[(step, value) for step, value in trial.intermediate], message=trial.message,
        job_message=job.message, exit_code=job.exit_code, preemptions=job.preemptions, restarts=job.restarts,
        cancel_requested=job.cancel_requested, created_at=created, finished_at=utc(trial.finished_at))


def trial_counts(n_trials: int, trials: Iterable[tuple[TrialRecord, JobRecord]]) -> TrialCounts:
    counts = {"pending": 0, "running": 0, "complete": 0, "pruned": 0, "failed": 0}
    seen = 0
    for trial, job in trials:
        seen += 1
        if trial.state is TrialState.ACTIVE:
            counts["pending" if job.state is JobState.PENDING else "running"] += 1
        else:
            counts[trial.state.value.lower()] += 1
    return TrialCounts(not_started=max(n_trials - seen, 0), **counts)


def best_trial(record: SweepRecord, trials: Iterable[tuple[TrialRecord, JobRecord]]) -> BestTrial | None:
    best: TrialRecord | None = None
    for trial, _ in trials:
        if trial.state is not TrialState.COMPLETE or trial.value is None:
            continue
        if best is None or best.value is None or record.spec.objective.better(trial.value, best.value):
            best = trial
    if best is None or best.value is None:
        return None
    return BestTrial(number=best.number, value=best.value, params=dict(best.params), job_id=best.job_id)


def sweep_view(record: SweepRecord, trials: Sequence[tuple[TrialRecord, JobRecord]]) -> SweepView:
    spec = record.spec
    counts = trial_counts(spec.n_trials, trials)
    created = utc(record.created_at)
    assert created is not None
    done = counts.complete + counts.pruned + counts.failed
    return SweepView(
        sweep_id=record.id, name=spec.name, team=spec.team, user=record.user, state=record.state.value,
        message=record.message, created_at=created, finished_at=utc(record.finished_at),
        study_name=f"{STUDY_PREFIX}{record.id}", n_trials=spec.n_trials, parallelism=spec.parallelism,
        objective=spec.objective.metric, direction=spec.objective.direction.value, counts=counts,
        progress=round(min(done / spec.n_trials, 1.0), 6), best=best_trial(record, trials), spec=spec)


__all__ = ["SweepService", "best_trial", "parse", "sweep_view", "trial_counts", "trial_view"]
