"""The SQL schema at the newest migration (``scheduler_core/migrations``): the store's queries are written against it.

Design notes:

* ``bound_units`` has one row per GPU or MIG slice a job holds, keyed by (node, flavour, unit). The primary key is
  what makes a double allocation impossible: two binds of one unit cannot both commit, whichever process or
  scheduler they come from.
* ``lease`` is one row per lease name. Every fenced write reads its epoch inside the same transaction (with a share
  lock on PostgreSQL), so a lease taken over mid-write waits for that write or makes it fail — never both.
* ``allocations`` keeps every binding ever made (job, placement, epoch, from/until), ``usage`` the bill, and
  ``events`` is append-only; nothing in the store updates or deletes them.
* Times are seconds since the epoch as double precision: the store never reads a clock, callers pass ``now``.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger, Boolean, Column, Double, ForeignKey, Index, Integer, MetaData, String, Table, Text,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = MetaData(naming_convention=NAMING)

#: 64-bit ids that are still SQLite's auto-incrementing INTEGER PRIMARY KEY there.
BigId = BigInteger().with_variant(Integer, "sqlite")

#: The one lease the active scheduler holds.
SCHEDULER_LEASE = "scheduler"

nodes = Table(
    "nodes", metadata,
    Column("name", String(63), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("config", Text, nullable=False),
    Column("health", String(16), nullable=False),
    Column("health_reason", Text, nullable=False, default=""),
    Column("health_changed_at", Double, nullable=True),
    Column("heartbeat_at", Double, nullable=True),
    Column("gpu_utilization", Double, nullable=True),
)

teams = Table(
    "teams", metadata,
    Column("name", String(63), primary_key=True),
    Column("position", Integer, nullable=False),
    Column("config", Text, nullable=False),
)

jobs = Table(
    "jobs", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("team", String(63), nullable=False),
    Column("user_name", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("spec", Text, nullable=False),
    Column("idempotency_key", String(256), nullable=True, unique=True),
    Column("submitted_at", Double, nullable=False),
    Column("queued_at", Double, nullable=False),
    Column("front_of_queue", Boolean, nullable=False, default=False),
    Column("admitted_as", String(16), nullable=True),
    Column("placement", Text, nullable=True),
    Column("admitted_at", Double, nullable=True),
    Column("labelled_at", Double, nullable=True),
    Column("started_at", Double, nullable=True),
    Column("finished_at", Double, nullable=True),
    Column("terminate_by", Double, nullable=True),
    Column("requeue_on_exit", Boolean, nullable=False, default=False),
    Column("restarts", Integer, nullable=False, default=0),
    Column("infra_restarts", Integer, nullable=False, default=0),
    Column("preemptions", Integer, nullable=False, default=0),
    Column("attained_gpu_s", Double, nullable=False, default=0.0),
    Column("last_checkpoint_id", BigId, nullable=True),
    Column("restart_block", String(63), nullable=True),
    Column("avoid_nodes", Text, nullable=False, default="[]"),
    Column("wait_reason", String(32), nullable=True),
    Column("room_wait_since", Double, nullable=True),
    Column("room_waited_s", Double, nullable=False, default=0.0, server_default="0"),
    Column("wait_message", Text, nullable=False, default=""),
    Column("queue_position", Integer, nullable=True),
    Column("estimated_start", Double, nullable=True),
    Column("exit_code", Integer, nullable=True),
    Column("message", Text, nullable=False, default=""),
    Column("cancel_requested", Boolean, nullable=False, default=False),
    Column("checkpoint_requested", Boolean, nullable=False, default=False),
    Column("epoch", Integer, nullable=False, default=0),
    Column("idle_since", Double, nullable=True),
    Column("idle_limit_s", Double, nullable=True),
    Index(None, "state", "submitted_at"),
    Index(None, "team", "submitted_at"),
)

allocations = Table(
    "allocations", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("job_id", String(64), ForeignKey("jobs.id"), nullable=False),
    Column("epoch", Integer, nullable=False),
    Column("admitted_as", String(16), nullable=False),
    Column("placement", Text, nullable=False),
    Column("bound_at", Double, nullable=False),
    Column("released_at", Double, nullable=True),
    Index(None, "job_id"),
)

bound_units = Table(
    "bound_units", metadata,
    Column("node", String(63), primary_key=True),
    Column("flavour", String(32), primary_key=True),
    Column("unit", Integer, primary_key=True),
    Column("job_id", String(64), ForeignKey("jobs.id"), nullable=False),
    Column("allocation_id", Integer, ForeignKey("allocations.id"), nullable=False),
    Index(None, "job_id"),
)

checkpoints = Table(
    "checkpoints", metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("job_id", String(64), ForeignKey("jobs.id"), nullable=False),
    Column("step", Integer, nullable=False),
    Column("uri", Text, nullable=False),
    Column("bytes", BigInteger, nullable=False),
    Column("written_at", Double, nullable=False),
    Column("verified", Boolean, nullable=False),
    Column("cost_s", Double, nullable=True),
    Index(None, "job_id"),
)

usage = Table(
    "usage", metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("team", String(63), nullable=False),
    Column("job_id", String(64), nullable=False),
    Column("flavour", String(32), nullable=False),
    Column("admitted_as", String(16), nullable=False),
    Column("start_at", Double, nullable=False),
    Column("end_at", Double, nullable=False),
    Column("units", Integer, nullable=False),
    Index(None, "end_at"),
    Index(None, "team", "end_at"),
)

events = Table(
    "events", metadata,
    Column("id", BigId, primary_key=True, autoincrement=True),
    Column("at", Double, nullable=False),
    Column("kind", String(64), nullable=False),
    Column("reason", String(64), nullable=False),
    Column("message", Text, nullable=False, default=""),
    Column("job_id", String(64), nullable=True),
    Column("node", String(63), nullable=True),
    Column("team", String(63), nullable=True),
    Column("data", Text, nullable=False, default="{}"),
    Index(None, "job_id", "id"),
)

lease = Table(
    "lease", metadata,
    Column("name", String(32), primary_key=True),
    Column("holder", String(256), nullable=True),
    Column("epoch", Integer, nullable=False),
    Column("expires_at", Double, nullable=True),
)

api_tokens = Table(
    "api_tokens", metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("user_name", String(128), nullable=False),
    Column("team", String(63), nullable=False),
    Column("admin", Boolean, nullable=False, default=False),
    Column("note", Text, nullable=False, default=""),
    Column("created_at", Double, nullable=False),
    Column("revoked", Boolean, nullable=False, default=False),
)

#: Sweeps (DESIGN §6): the scheduler's record of each sweep and its trials. The Optuna study is elsewhere (Optuna's
#: own storage); ``sweep_trials.job_id`` ties a trial to its ordinary job row.
sweeps = Table(
    "sweeps", metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),
    Column("id", String(64), nullable=False, unique=True),
    Column("team", String(63), nullable=False),
    Column("user_name", String(128), nullable=False),
    Column("state", String(16), nullable=False),
    Column("spec", Text, nullable=False),
    Column("idempotency_key", String(256), nullable=True, unique=True),
    Column("created_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
    Column("message", Text, nullable=False, default=""),
    Index(None, "state"),
)

sweep_trials = Table(
    "sweep_trials", metadata,
    Column("sweep_id", String(64), ForeignKey("sweeps.id"), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("job_id", String(64), ForeignKey("jobs.id"), nullable=False, unique=True),
    Column("params", Text, nullable=False),
    Column("state", String(16), nullable=False),
    Column("value", Double, nullable=True),
    Column("message", Text, nullable=False, default=""),
    Column("created_at", Double, nullable=False),
    Column("finished_at", Double, nullable=True),
)

#: One row per reported step; the primary key keeps a step's first value (a resumed trial repeats steps).
sweep_trial_values = Table(
    "sweep_trial_values", metadata,
    Column("sweep_id", String(64), primary_key=True),
    Column("number", Integer, primary_key=True),
    Column("step", Integer, primary_key=True),
    Column("value", Double, nullable=False),
)

__all__ = ["SCHEDULER_LEASE", "allocations", "api_tokens", "bound_units", "checkpoints",
           "events", "jobs", "lease", "metadata", "nodes", "sweep_trial_values", "sweep_trials", "sweeps", "teams",
           "usage"]
