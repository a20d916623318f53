"""Sweeps and their trials (DESIGN §6): the scheduler's record; the Optuna study lives in Optuna's storage.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "sweeps",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("team", sa.String(63), nullable=False),
        sa.Column("user_name", sa.String(128), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("spec", sa.Text(), nullable=False),
        sa.Column("idempotency_key", sa.String(256), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name="pk_sweeps"),
        sa.UniqueConstraint("id", name="uq_sweeps_id"),
        sa.UniqueConstraint("idempotency_key", name="uq_sweeps_idempotency_key"),
    )
    op.create_index("ix_sweeps_state", "sweeps", ["state"])
    op.create_table(
        "sweep_trials",
        sa.Column("sweep_id", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("value", sa.Double(), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(["sweep_id"], ["sweeps.id"], name="fk_sweep_trials_sweep_id_sweeps"),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name="fk_sweep_trials_job_id_jobs"),
        sa.PrimaryKeyConstraint("sweep_id", "number", name="pk_sweep_trials"),
        sa.UniqueConstraint("job_id", name="uq_sweep_trials_job_id"),
    )
    op.create_table(
        "sweep_trial_values",
        sa.Column("sweep_id", sa.String(64), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("step", sa.Integer(), nullable=False),
        sa.Column("value", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("sweep_id", "number", "step", name="pk_sweep_trial_values"),
    )


def downgrade() -> None:
    op.drop_table("sweep_trial_values")
    op.drop_table("sweep_trials")
    op.drop_index("ix_sweeps_state", table_name="sweeps")
    op.drop_table("sweeps")
