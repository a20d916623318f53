"""The first schema: nodes, teams, jobs, allocations, bound units, checkpoints, usage, events, the lease.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.Column("health", sa.String(16), nullable=False),
        sa.Column("health_reason", sa.Text(), nullable=False),
        sa.Column("heartbeat_at", sa.Double(), nullable=True),
        sa.Column("gpu_utilization", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_nodes"),
    )
    op.create_table(
        "teams",
        sa.Column("name", sa.String(63), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("config", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_teams"),
    )
    op.create_table(
        "jobs",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("queued_at", sa.Double(), nullable=False),
        sa.Column("front_of_queue", sa.Boolean(), nullable=False),
        sa.Column("admitted_as", sa.String(16), nullable=True),
        sa.Column("placement", sa.Text(), nullable=True),
        sa.Column("admitted_at", sa.Double(), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("terminate_by", sa.Double(), nullable=True),
        sa.Column("requeue_on_exit", sa.Boolean(), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("infra_restarts", sa.Integer(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("attained_gpu_s", sa.Double(), nullable=False),
        sa.Column("last_checkpoint_id", _BIG_ID, nullable=True),
        sa.Column("restart_block", sa.String(63), nullable=True),
        sa.Column("avoid_nodes", sa.Text(), nullable=False),
        sa.Column("wait_reason", sa.String(32), nullable=True),
        sa.Column("wait_message", sa.Text(), nullable=False),
        sa.Column("queue_position", sa.Integer(), nullable=True),
        sa.Column("estimated_start", sa.Double(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("checkpoint_requested", sa.Boolean(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_jobs"),
        sa.UniqueConstraint("id", name="uq_jobs_id"),
        sa.UniqueConstraint("idempotency_key", name="uq_jobs_idempotency_key"),
    )
    op.create_index("ix_jobs_state_submitted_at", "jobs", ["state", "submitted_at"])
    op.create_index("ix_jobs_team_submitted_at", "jobs", ["team", "submitted_at"])
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("admitted_as", sa.String(16), nullable=False),
        sa.Column("placement", sa.Text(), nullable=False),
        sa.Column("bound_at", sa.Double(), nullable=False),
        sa.Column("released_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_allocations_job_id_jobs"),
        sa.PrimaryKeyConstraint("id", name="pk_allocations"),
    )
    op.create_index("ix_allocations_job_id", "allocations", ["job_id"])
    op.create_table(
        "bound_units",
        sa.Column("node", sa.String(63), nullable=False),
        sa.Column("flavour", sa.String(32), nullable=False),
        sa.Column("unit", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("allocation_id", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_bound_units_job_id_jobs"),
        sa.ForeignKeyConstraint(["allocation_id"], ["allocations.id"], name="fk_bound_units_allocation_id_allocations"),
        # The guard against a double allocation: one row per unit, so two binds of a unit cannot both commit.
        sa.PrimaryKeyConstraint("node", "flavour", "unit", name="pk_bound_units"),
    )
    op.create_index("ix_bound_units_job_id", "bound_units", ["job_id"])
    op.create_table(
        "checkpoints",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("uri", sa.Text(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("written_at", sa.Double(), nullable=False),
        sa.Column("verified", sa.Boolean(), nullable=False),
        sa.Column("cost_s", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_checkpoints_job_id_jobs"),
        sa.PrimaryKeyConstraint("id", name="pk_checkpoints"),
    )
    op.create_index("ix_checkpoints_job_id", "checkpoints", ["job_id"])
    op.create_table(
        "usage",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("flavour", sa.String(32), nullable=False),
        sa.Column("admitted_as", sa.String(16), nullable=False),
        sa.Column("start_at", sa.Double(), nullable=False),
        sa.Column("end_at", sa.Double(), nullable=False),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_usage"),
    )
    op.create_index("ix_usage_end_at", "usage", ["end_at"])
    op.create_index("ix_usage_team_end_at", "usage", ["team", "end_at"])
    op.create_table(
        "events",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(64), nullable=False),
        sa.Column("reason", sa.String(64), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("node", sa.String(63), nullable=True),
        sa.Column("team", sa.String(63), nullable=True),
        sa.Column("data", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_events"),
    )
    op.create_index("ix_events_job_id_id", "events", ["job_id", "id"])
    lease = op.create_table(
        "lease",
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("holder", sa.String(256), nullable=True),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("name", name="pk_lease"),
    )
    op.bulk_insert(lease, [{"name": "scheduler", "holder": None, "epoch": 0, "expires_at": None}])


def downgrade() -> None:
    for table in ("lease", "events", "usage", "checkpoints", "bound_units", "allocations", "jobs", "teams",
                  "nodes"):
        op.drop_table(table)
