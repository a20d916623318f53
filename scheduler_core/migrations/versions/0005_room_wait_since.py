"""How long a pending job has waited for room rather than quota (the current run's start and the seconds of
earlier runs), so a block-sized gang's two hours to find whole blocks count only that time (a gang held six
hours by its team's quota should still get its two hours).

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("room_wait_since", sa.Double(), nullable=True))
        batch.add_column(sa.Column("room_waited_s", sa.Double(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("room_waited_s")
        batch.drop_column("room_wait_since")
