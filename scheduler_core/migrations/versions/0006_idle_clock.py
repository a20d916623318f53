"""A running notebook's idle clock as the idle reaper reports it (last activity, idle limit), so the estimated
start of a notebook waiting for a slice counts when the reaper will free the idle ones, not their time limits.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("idle_since", sa.Double(), nullable=True))
        batch.add_column(sa.Column("idle_limit_s", sa.Double(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("idle_limit_s")
        batch.drop_column("idle_since")
