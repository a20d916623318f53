"""``WriterStorage``: Optuna RDB storage for the one process that writes its studies, reading from memory.

Why: Optuna's RDB storage caches only *finished* trials, so every ``study.ask()`` reads every running trial back
from the database (twice: the waiting-trial check and the sampler's history). A sweep of 500 trials running at once
makes that quadratic — measured here at ~0.4 s per ask near the end, three minutes to start 500 trials. The sweep
controller is the only writer of its studies (one per deployment, DESIGN §6), so it can keep an exact copy:

* every write goes to the database first (so it is durable, and optuna-dashboard sees it at once), then to the
  copy: parameters and attributes as the database stores them, anything else by reading that one trial back;
* every read of a trial is served from the copy, loaded once per study per process from the database.

Other processes (optuna-dashboard, a notebook) read the database directly and see every write. Should another
process write to one of these studies, this copy would not see it: that is the price, and why this storage is
used by the sweep controller alone. Optuna's own storage contract suite (``StorageTestCase``) runs against it.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Container, Sequence
from typing import Any

from optuna.distributions import BaseDistribution
from optuna.storages import BaseStorage, RDBStorage
from optuna.study._frozen import FrozenStudy
from optuna.study._study_direction import StudyDirection
from optuna.trial import FrozenTrial, TrialState


class WriterStorage(BaseStorage):
    def __init__(self, backend: RDBStorage) -> None:
        self.backend = backend
        self._lock = threading.RLock()
        self._trials: dict[int, FrozenTrial] = {}             # trial id → trial
        self._numbers: dict[int, dict[int, int]] = {}          # study id → trial number → trial id
        self._study_of: dict[int, int] = {}                     # trial id → study id

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (Optuna does, to hand a storage to worker processes): the database only; a copy is rebuilt
        wherever it is unpickled."""
        return {"backend": self.backend}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["backend"])  # type: ignore[misc]

    # -- studies: straight to the database (rare, and cheap) --------------------------------------------------
    def create_new_study(self, directions: Sequence[StudyDirection], study_name: str | None = None) -> int:
        return self.backend.create_new_study(directions, study_name)

    def delete_study(self, study_id: int) -> None:
        self.backend.delete_study(study_id)
        self.forget_study(study_id)

    def set_study_user_attr(self, study_id: int, key: str, value: Any) -> None:
        self.backend.set_study_user_attr(study_id, key, value)

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        self.backend.set_study_system_attr(study_id, key, value)

    def get_study_id_from_name(self, study_name: str) -> int:
        return self.backend.get_study_id_from_name(study_name)

    def get_study_name_from_id(self, study_id: int) -> str:
        return self.backend.get_study_name_from_id(study_id)

    def get_study_directions(self, study_id: int) -> list[StudyDirection]:
        return self.backend.get_study_directions(study_id)

    def get_study_user_attrs(self, study_id: int) -> dict[str, Any]:
        return self.backend.get_study_user_attrs(study_id)

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return self.backend.get_study_system_attrs(study_id)

    def get_all_studies(self) -> list[FrozenStudy]:
        return self.backend.get_all_studies()

    # -- trial writes: the database first, then the copy --------------------------------------------------------
    def create_new_trial(self, study_id: int, template_trial: FrozenTrial | None = None) -> int:
        with self._lock:
            self._load(study_id)
            trial_id = self.backend.create_new_trial(study_id, template_trial)
            self._put(study_id, self.backend.get_trial(trial_id))
            return trial_id

    def set_trial_param(self, trial_id: int, param_name: str, param_value_internal: float,
                        distribution: BaseDistribution) -> None:
        with self._lock:
            self.backend.set_trial_param(trial_id, param_name, param_value_internal, distribution)
            old = self._trials.get(trial_id)
            if old is not None:            # what the database now holds, without reading it back
                trial = self._fresh(old)
                trial.distributions = {**old.distributions, param_name: distribution}
                trial.params = {**old.params, param_name: distribution.to_external_repr(param_value_internal)}

    def set_trial_state_values(self, trial_id: int, state: TrialState,
                               values: Sequence[float] | None = None) -> bool:
        with self._lock:
            changed = self.backend.set_trial_state_values(trial_id, state, values)
            self._refresh(trial_id)
            return changed

    def set_trial_intermediate_value(self, trial_id: int, step: int, intermediate_value: float) -> None:
        with self._lock:
            self.backend.set_trial_intermediate_value(trial_id, step, intermediate_value)
            self._refresh(trial_id)

    def set_trial_user_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            self.backend.set_trial_user_attr(trial_id, key, value)
            old = self._trials.get(trial_id)
            if old is not None:            # as stored: JSON
                self._fresh(old).user_attrs = {**old.user_attrs, key: json.loads(json.dumps(value))}

    def set_trial_system_attr(self, trial_id: int, key: str, value: Any) -> None:
        with self._lock:
            self.backend.set_trial_system_attr(trial_id, key, value)
            old = self._trials.get(trial_id)
            if old is not None:
                self._fresh(old).system_attrs = {**old.system_attrs, key: json.loads(json.dumps(value))}

    # -- trial reads: the copy ----------------------------------------------------------------------------------
    def get_trial_id_from_study_id_trial_number(self, study_id: int, trial_number: int) -> int:
        with self._lock:
            self._load(study_id)
            trial_id = self._numbers[study_id].get(trial_number)
        if trial_id is None:
            return self.backend.get_trial_id_from_study_id_trial_number(study_id, trial_number)
        return trial_id

    def get_trial_number_from_id(self, trial_id: int) -> int:
        return self._trial(trial_id).number

    def get_trial_param(self, trial_id: int, param_name: str) -> float:
        trial = self._trial(trial_id)
        return trial.distributions[param_name].to_internal_repr(trial.params[param_name])

    def get_trial(self, trial_id: int) -> FrozenTrial:
        return copy.deepcopy(self._trial(trial_id))

    def get_all_trials(self, study_id: int, deepcopy: bool = True,
                       states: Container[TrialState] | None = None) -> list[FrozenTrial]:
        with self._lock:
            self._load(study_id)
            trials = [self._trials[t] for _, t in sorted(self._numbers[study_id].items())]
        if states is not None:
            trials = [t for t in trials if t.state in states]
        return copy.deepcopy(trials) if deepcopy else trials

    def remove_session(self) -> None:
        self.backend.remove_session()

    def forget_study(self, study_id: int) -> None:
        """Drop a study's copy (a closed sweep's): the database keeps it; a later read loads it again."""
        with self._lock:
            for trial_id in self._numbers.pop(study_id, {}).values():
                self._trials.pop(trial_id, None)
                self._study_of.pop(trial_id, None)

    # -- the copy -----------------------------------------------------------------------------------------------
    def _load(self, study_id: int) -> None:
        """Copy a study's trials from the database the first time this process touches it (``KeyError`` if there
        is no such study, as Optuna's storages raise)."""
        if study_id in self._numbers:
            return
        trials = self.backend.get_all_trials(study_id, deepcopy=False)
        self._numbers[study_id] = {}
        for trial in trials:
            self._put(study_id, trial)

    def _put(self, study_id: int, trial: FrozenTrial) -> None:
        self._trials[trial._trial_id] = trial
        self._numbers[study_id][trial.number] = trial._trial_id
        self._study_of[trial._trial_id] = study_id

    def _fresh(self, old: FrozenTrial) -> FrozenTrial:
        """A new object in ``old``'s place: trials handed out without a deep copy never change under a caller."""
        trial = copy.copy(old)
        self._trials[old._trial_id] = trial
        return trial

    def _refresh(self, trial_id: int) -> None:
        study_id = self._study_of.get(trial_id)
        if study_id is not None:
            self._trials[trial_id] = self.backend.get_trial(trial_id)

    def _trial(self, trial_id: int) -> FrozenTrial:
        with self._lock:
            trial = self._trials.get(trial_id)
        return trial if trial is not None else self.backend.get_trial(trial_id)
