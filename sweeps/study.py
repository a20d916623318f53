"""The Optuna side of a sweep: its study, sampler, pruner and distributions, built from a ``SweepSpec``.

The study lives in standard Optuna RDB storage (``sqlite:///…`` by default, ``postgresql+psycopg://…`` in
production), named ``shoal-<sweep id>``, so ``optuna-dashboard <storage url>`` opens it as it is.
"""

from __future__ import annotations

import sqlite3
import warnings
from contextlib import closing
from pathlib import Path
from typing import Any

from sqlalchemy import event

import optuna
from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

from scheduler_core.model.sweep import (
    CategoricalParam, FloatParam, GridSampler, HyperbandPruner, IntParam, MedianPruner, NoPruner, RandomSampler,
    SweepSpec, TpeSampler,
)

from .storage import WriterStorage

STUDY_PREFIX = "shoal-"


def default_storage_url(state_dir: Path) -> str:
    """The embedded default: one SQLite file next to the scheduler's own state."""
    return f"sqlite:///{(state_dir / 'sweeps.db').resolve()}"


def study_name(sweep_id: str) -> str:
    return f"{STUDY_PREFIX}{sweep_id}"


def distributions(spec: SweepSpec) -> dict[str, BaseDistribution]:
    out: dict[str, BaseDistribution] = {}
    for name, param in spec.search_space.items():
        if isinstance(param, FloatParam):
            out[name] = FloatDistribution(param.low, param.high, log=param.log, step=param.step)
        elif isinstance(param, IntParam):
            out[name] = IntDistribution(param.low, param.high, log=param.log, step=param.step)
        elif isinstance(param, CategoricalParam):
            out[name] = CategoricalDistribution(list(param.choices))
        else:  # pragma: no cover - the model's discriminated union has exactly these three
            raise TypeError(f"unknown parameter type {type(param).__name__}")
    return out


def make_sampler(spec: SweepSpec) -> optuna.samplers.BaseSampler:
    sampler = spec.sampler
    if isinstance(sampler, TpeSampler):
        return optuna.samplers.TPESampler(seed=sampler.seed, n_startup_trials=sampler.n_startup_trials,
                                          multivariate=sampler.multivariate)
    if isinstance(sampler, RandomSampler):
        return optuna.samplers.RandomSampler(seed=sampler.seed)
    if isinstance(sampler, GridSampler):
        return optuna.samplers.GridSampler(spec.grid(), seed=sampler.seed)
    raise TypeError(f"unknown sampler {sampler!r}")  # pragma: no cover


def make_pruner(spec: SweepSpec) -> optuna.pruners.BasePruner:
    pruner = spec.pruner
    if isinstance(pruner, MedianPruner):
        return optuna.pruners.MedianPruner(n_startup_trials=pruner.n_startup_trials,
                                           n_warmup_steps=pruner.n_warmup_steps, interval_steps=pruner.interval_steps)
    if isinstance(pruner, HyperbandPruner):
        return optuna.pruners.HyperbandPruner(min_resource=pruner.min_resource, max_resource=pruner.max_resource,
                                              reduction_factor=pruner.reduction_factor)
    if isinstance(pruner, NoPruner):
        return optuna.pruners.NopPruner()
    raise TypeError(f"unknown pruner {pruner!r}")  # pragma: no cover


def open_study(storage: str | optuna.storages.BaseStorage, sweep_id: str, spec: SweepSpec) -> optuna.Study:
    """Create the sweep's study, or load it after a restart; the sampler and pruner are rebuilt from the spec."""
    study = optuna.create_study(
        storage=storage, study_name=study_name(sweep_id), direction=spec.objective.direction.value,
        sampler=make_sampler(spec), pruner=make_pruner(spec), load_if_exists=True)
    if study.metric_names is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([spec.objective.metric])
        for key, value in _study_attrs(sweep_id, spec).items():
            study.set_user_attr(key, value)
    return study


def _study_attrs(sweep_id: str, spec: SweepSpec) -> dict[str, Any]:
    return {"shoal_sweep_id": sweep_id, "team": spec.team, "name": spec.name, "n_trials": spec.n_trials,
            "parallelism": spec.parallelism}


def make_storage(url: str) -> optuna.storages.BaseStorage:
    """The controller's storage for ``url``: Optuna's RDB storage (SQLite gets a busy timeout, so a dashboard
    reading the file never fails a write), read through ``WriterStorage``'s copy — the controller is its
    studies' only writer, and asking 500 running trials' study must not re-read them all each time."""
    engine_kwargs: dict[str, Any] = {}
    sqlite_file = url.removeprefix("sqlite:///") if url.startswith("sqlite:///") else None
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": 30}
    if sqlite_file and sqlite_file != ":memory:":
        # WAL (kept by the file): a write is a cheap append, not a synced rewrite — Optuna commits after every
        # parameter and attribute — and readers such as optuna-dashboard never block the controller.
        Path(sqlite_file).parent.mkdir(parents=True, exist_ok=True)
        with closing(sqlite3.connect(sqlite_file)) as connection:
            connection.execute("PRAGMA journal_mode=WAL")
    backend = optuna.storages.RDBStorage(url, engine_kwargs=engine_kwargs)
    if sqlite_file:
        event.listen(backend.engine, "connect", _synchronous_normal)
        backend.engine.dispose()     # connections made before the listener reconnect with it
    return WriterStorage(backend)


def _synchronous_normal(dbapi_connection: Any, _record: Any) -> None:
    """With WAL, NORMAL syncs at checkpoints only: a crash keeps the database whole and may lose the last
    transactions, which the controller repairs from the scheduler's record on its next pass."""
    dbapi_connection.execute("PRAGMA synchronous=NORMAL")
