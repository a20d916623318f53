"""``SweepPanel`` without a browser: set widget values, click buttons, call ``refresh``; against a real API server.
The browser test (``test_panel_browser.py``) renders it in JupyterLab."""

from __future__ import annotations

from collections.abc import Iterator

import optuna
import pytest

from scheduler_core.client import ShoalClient
from scheduler_core.model.sweep import SweepState
from sweeps import SweepPanel
from sweeps.api_launcher import ApiLauncher
from sweeps.controller import SweepController
from tests.scheduler_core.api.harness import Harness, running_harness

from .test_over_the_api import Scheduler

optuna.logging.set_verbosity(optuna.logging.WARNING)
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def api() -> Iterator[Harness]:
    yield from running_harness()


@pytest.fixture
def panel(api: Harness) -> Iterator[SweepPanel]:
    panel = SweepPanel(ShoalClient(api.url, api.users["bob"]), autorefresh=False)
    yield panel
    panel.close()


def test_the_default_form_launches_a_valid_sweep(api: Harness, panel: SweepPanel) -> None:
    panel.name.value = "from-widget"
    panel.n_trials.value = 12
    panel.parallelism.value = 3
    panel.gpus.value = 2
    panel.pruner.value = "hyperband"
    panel.launch.click()
    [sweep] = api.store.list_sweeps()
    spec = sweep.spec
    assert panel.sweep_id == sweep.id and sweep.user == "bob"
    assert (spec.name, spec.team, spec.n_trials, spec.parallelism) == ("from-widget", "search", 12, 3)
    assert spec.trial.gpus_per_pod == 2 and spec.trial.flavour == ("h100-mig-1g",) and spec.pruner.name == "hyperband"
    assert spec.trial.command == ("python", "-m", "sweeps.examples.mlp", "--epochs", "30")
    assert spec.search_space["hidden"].model_dump() == {"type": "int", "low": 4, "high": 64, "log": False, "step": 1}
    assert spec.search_space["activation"].model_dump() == {"type": "categorical", "choices": ("tanh", "relu")}
    assert spec.search_space["lr"].log is True
    assert "Started sweep" in panel.message.value
    assert panel.live.layout.display is None and not panel.cancel.disabled
    assert panel.folded and panel.form.layout.display == "none" and panel.new_sweep.layout.display is None
    assert panel.progress.max == 12 and panel.progress.value == 0
    assert "pending <b>12</b>" in panel.counts.value


def test_parameters_are_added_and_removed(api: Harness, panel: SweepPanel) -> None:
    for row in list(panel.rows):
        row.remove.click()
    assert panel.params_box.children == ()
    row = panel.add_parameter()
    row.name.value = "momentum"
    row.low.value, row.high.value = 0.5, 0.99
    cat = panel.add_parameter("opt", "categorical")
    cat.choices.value = "sgd, adam, 3, true"
    assert [r.box for r in panel.rows] == list(panel.params_box.children)
    assert cat.low.layout.display == "none" and cat.choices.layout.display is None
    panel.launch.click()
    [sweep] = api.store.list_sweeps()
    assert sweep.spec.search_space["momentum"].model_dump()["high"] == 0.99
    assert sweep.spec.search_space["opt"].model_dump()["choices"] == ("sgd", "adam", 3, True)


@pytest.mark.parametrize(("change", "words"), [
    (lambda p: setattr(p.rows[0].low, "value", 0.0), "search_space.lr.float"),           # log range from 0
    (lambda p: setattr(p.rows[1].high, "value", 4.5), "search_space.hidden.int.high"),     # not whole
    (lambda p: setattr(p.time_limit, "value", "soon"), "trial.time_limit"),
    (lambda p: setattr(p.command, "value", "python 'unclosed"), "command"),
    (lambda p: setattr(p.flavour, "value", "a100"), "trial.flavour"),                       # no a100 here
    (lambda p: setattr(p.rows[2].choices, "value", ""), "search_space.activation"),
])
def test_mistakes_are_shown_and_nothing_is_submitted(api: Harness, panel: SweepPanel, change: object,
                                                     words: str) -> None:
    change(panel)  # type: ignore[operator]
    panel.launch.click()
    assert words in panel.message.value and "color:#cf222e" in panel.message.value
    assert api.store.list_sweeps() == [] and panel.sweep_id is None
    assert panel.live.layout.display == "none" and not panel.folded


def test_new_sweep_unfolds_the_form_filled_in_from_the_sweep_on_show(api: Harness) -> None:
    sweep_id = api.client("bob").create_sweep({
        "name": "old", "team": "search", "n_trials": 7, "parallelism": 2, "pruner": {"name": "none"},
        "objective": {"metric": "acc", "direction": "maximize"},
        "search_space": {"x": {"type": "float", "low": 0.5, "high": 2, "log": True},
                         "opt": {"type": "categorical", "choices": ["sgd", "adam"]}},
        "trial": {"flavour": "h100-mig-1g", "command": ["python", "train.py", "--name", "a b"],
                  "time_limit": "45m"}}).sweep_id
    panel = SweepPanel(ShoalClient(api.url, api.users["bob"]), sweep_id=sweep_id, autorefresh=False)
    assert panel.folded and panel.form.layout.display == "none" and panel.live.layout.display is None
    panel.new_sweep.click()
    assert not panel.folded and panel.new_sweep.layout.display == "none"
    assert (panel.name.value, panel.n_trials.value, panel.parallelism.value) == ("old", 7, 2)
    assert (panel.metric.value, panel.direction.value, panel.pruner.value) == ("acc", "maximize", "none")
    assert (panel.command.value, panel.time_limit.value) == ("python train.py --name 'a b'", "45m")
    assert [(r.name.value, r.kind.value) for r in panel.rows] == [("x", "float"), ("opt", "categorical")]
    assert panel.rows[0].log.value and panel.rows[1].choices.value == "sgd, adam"
    panel.name.value = "again"
    panel.launch.click()
    again = next(s for s in api.store.list_sweeps() if s.spec.name == "again")
    assert panel.sweep_id == again.id and panel.folded
    assert again.spec.trial.command == ("python", "train.py", "--name", "a b") and again.spec.n_trials == 7
    panel.close()


def test_the_live_view_follows_the_sweep(api: Harness, panel: SweepPanel) -> None:
    panel.n_trials.value = 3
    panel.parallelism.value = 2
    panel.pruner.value = "none"
    panel.launch.click()
    admin = ShoalClient(api.url, api.users["root"])
    controller = SweepController(ApiLauncher(admin, job_api_url=api.url),
                                 optuna.storages.InMemoryStorage())
    cluster, bob = Scheduler(api), ShoalClient(api.url, api.users["bob"])
    controller.run_once()
    jobs = [t.job_id for t, _ in api.store.list_trials(panel.sweep_id or "")]
    cluster.start(jobs[0])
    bob.report(jobs[0], 0.8, step=0)
    panel.refresh()
    assert "pending <b>2</b> · running <b>1</b> · done <b>0</b>" in panel.counts.value
    assert panel.best.value == "best: none yet"
    bob.report(jobs[0], 0.6, final=True)
    cluster.exit(jobs[0])
    cluster.start(jobs[1])
    cluster.exit(jobs[1], 1, "Traceback: boom")
    controller.run_once()
    panel.refresh()
    assert panel.progress.value == 2 and panel.progress.description == "2/3"
    assert "done <b>1</b> · pruned <b>0</b> · failed <b>1</b>" in panel.counts.value
    assert "trial <b>0</b>" in panel.best.value and "<b>0.6</b>" in panel.best.value
    assert bytes(panel.plot.value).startswith(PNG) and len(bytes(panel.plot.value)) > 5000
    panel.cancel.click()
    assert api.store.get_sweep(panel.sweep_id or "").state is SweepState.CANCELLING
    assert panel.cancel.disabled and "CANCELLING" in panel.title.value
    controller.run_once()
    panel.refresh()
    assert panel.progress.bar_style == "warning" and "CANCELLED" in panel.title.value
    admin.close()
    bob.close()


def test_watching_an_existing_sweep(api: Harness) -> None:
    sweep_id = api.client("bob").create_sweep({
        "name": "old", "team": "search", "n_trials": 2,
        "search_space": {"x": {"type": "float", "low": 0, "high": 1}},
        "trial": {"flavour": "h100-mig-1g", "command": ["x"]}}).sweep_id
    panel = SweepPanel(ShoalClient(api.url, api.users["bob"]), sweep_id=sweep_id, autorefresh=False)
    assert panel.sweep_id == sweep_id and "<b>old</b>" in panel.title.value and panel.progress.max == 2
    panel.close()
    other = SweepPanel(ShoalClient(api.url, api.users["alice"]), sweep_id=sweep_id, autorefresh=False)
    assert "may not see or change it" in other.counts.value
    other.close()
