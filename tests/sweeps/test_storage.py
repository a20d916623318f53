"""``WriterStorage`` passes Optuna's own storage contract suite over SQLite, and other readers of the database
see every write at once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import optuna
import pytest
from optuna.storages import BaseStorage, RDBStorage
from optuna.testing.pytest_storages import StorageTestCase

from sweeps.storage import WriterStorage

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.mark.slow      # 46 cases, each migrating a fresh SQLite file: ~40 s on the 2-core machine
class TestWriterStorage(StorageTestCase):
    @pytest.fixture
    def storage(self, tmp_path: Path) -> Iterator[BaseStorage]:
        backend = RDBStorage(f"sqlite:///{tmp_path / 'optuna.db'}")
        yield WriterStorage(backend)
        backend.engine.dispose()


def test_other_readers_see_every_write(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    study = optuna.create_study(storage=WriterStorage(RDBStorage(url)), study_name="s")
    trial = study.ask({"x": optuna.distributions.FloatDistribution(0, 1)})
    trial.report(0.5, 0)
    trial.set_user_attr("job_id", "job_1")
    dashboard = optuna.load_study(study_name="s", storage=url)     # what optuna-dashboard does
    [seen] = dashboard.trials
    assert seen.params == trial.params and seen.intermediate_values == {0: 0.5}
    assert seen.user_attrs == {"job_id": "job_1"} and seen.state is optuna.trial.TrialState.RUNNING
    study.tell(trial, 0.25)
    assert dashboard.trials[0].value == 0.25 and study.best_value == 0.25
    again = optuna.load_study(study_name="s", storage=WriterStorage(RDBStorage(url)))   # after a restart
    assert again.trials[0].value == 0.25 and again.trials[0].params == trial.params


def test_a_forgotten_study_is_read_again_from_the_database(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    storage = WriterStorage(RDBStorage(url))
    study = optuna.create_study(storage=storage, study_name="s")
    study.tell(study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}), 0.5)
    storage.forget_study(study._study_id)
    assert storage._numbers == {} and storage._trials == {}
    assert [t.value for t in study.trials] == [0.5]
