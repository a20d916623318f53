"""Alembic migrations of the SQL store. Applied by ``scheduler_core.store.sql.open_store`` (configured in code,
so they run from an installed package); ``alembic.ini`` here is for developers writing a new revision."""
