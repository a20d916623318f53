"""``SweepPanel``: define a sweep in a notebook, launch it, and watch it run.

    from sweeps import SweepPanel
    SweepPanel()                  # the form; "Launch" submits, the form folds away and the live view takes over
    SweepPanel(sweep_id="sweep_3f9e01")   # watch a sweep that already runs (no form until "New sweep")

The panel owns its widgets and redraws everything in one method, ``refresh``: a background thread calls it every
``poll_s`` seconds while a sweep runs, and tests call it directly (they set widget values and ``click()`` buttons;
no browser needed). While a sweep is shown the form is folded away, so its defaults and its "Launch" button never
sit above a sweep they did not make; "New sweep" unfolds it, filled in from the sweep on show. It talks to the
scheduler through the client SDK only, finding the API as every Shoal client does (``SHOAL_URL``/``SHOAL_TOKEN``,
the JupyterHub server's own token, the config file) unless given a client. Mistakes — a bad range, a flavour the cluster lacks — appear in the panel
and nothing is submitted.
"""

from __future__ import annotations

import html
import io
import json
import shlex
import threading
from collections.abc import Callable
from typing import Any

import ipywidgets as w
from pydantic import ValidationError

from scheduler_core.client import ShoalClient
from scheduler_core.errors import ShoalError
from scheduler_core.model.flavours import FLAVOURS
from scheduler_core.model.sweep import SweepSpec
from scheduler_core.schemas import FINISHED_SWEEP_STATES, SweepView, TrialView

PARAM_TYPES = ("float", "int", "categorical")


class ParamRow:
    """One parameter of the search space: name, type, range (or choices), log scale."""

    def __init__(self, name: str = "", kind: str = "float", low: float = 0.0, high: float = 1.0, log: bool = False,
                 choices: str = "", on_remove: Callable[[ParamRow], None] | None = None) -> None:
        self.name = w.Text(value=name, placeholder="name", layout=w.Layout(width="130px"))
        self.kind = w.Dropdown(options=PARAM_TYPES, value=kind, layout=w.Layout(width="120px"))
        self.low = w.FloatText(value=low, description="low", layout=w.Layout(width="150px"),
                               style={"description_width": "30px"})
        self.high = w.FloatText(value=high, description="high", layout=w.Layout(width="150px"),
                                style={"description_width": "30px"})
        self.log = w.Checkbox(value=log, description="log", indent=False, layout=w.Layout(width="60px"))
        self.choices = w.Text(value=choices, placeholder="a, b, c", layout=w.Layout(width="200px"))
        self.remove = w.Button(description="✕", tooltip="remove this parameter", layout=w.Layout(width="36px"))
        if on_remove is not None:
            self.remove.on_click(lambda _: on_remove(self))
        self.kind.observe(lambda _: self._show(), names="value")
        self.box = w.HBox([self.name, self.kind, self.low, self.high, self.log, self.choices, self.remove])
        self._show()

    def _show(self) -> None:
        categorical = self.kind.value == "categorical"
        for widget in (self.low, self.high, self.log):
            widget.layout.display = "none" if categorical else None
        self.choices.layout.display = None if categorical else "none"

    def spec(self) -> dict[str, Any]:
        """This row as a search-space entry; ``SweepSpec`` validates it."""
        if self.kind.value == "categorical":
            return {"type": "categorical", "choices": [_choice(c) for c in self.choices.value.split(",")
                                                       if c.strip()]}
        if self.kind.value == "int":
            return {"type": "int", "low": _whole(self.low.value), "high": _whole(self.high.value),
                    "log": self.log.value}
        return {"type": "float", "low": self.low.value, "high": self.high.value, "log": self.log.value}


def _whole(value: float) -> int | float:
    """An int for a whole number; anything else goes through unchanged, for the model to refuse by name."""
    return int(value) if float(value).is_integer() else value


def _choice(text: str) -> bool | int | float | str:
    """``"3"`` → 3, ``"0.5"`` → 0.5, ``"true"`` → True, anything else stays a string."""
    value = text.strip()
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    for kind in (int, float):
        try:
            return kind(value)
        except ValueError:
            pass
    return value


class SweepPanel:
    def __init__(self, client: ShoalClient | None = None, *, sweep_id: str | None = None, team: str | None = None,
                 poll_s: float = 2.0, autorefresh: bool = True) -> None:
        self.client = client or ShoalClient()
        self.poll_s = poll_s
        self.autorefresh = autorefresh
        self.sweep_id: str | None = None
        self.view: SweepView | None = None
        self.trials: list[TrialView] = []
        self._poller: threading.Thread | None = None
        self._stop = threading.Event()
        self._build(team)
        if sweep_id is not None:
            self.watch(sweep_id)

    # -- layout --------------------------------------------------------------------------------------------------
    def _build(self, team: str | None) -> None:
        label = {"style": {"description_width": "110px"}, "layout": w.Layout(width="330px")}
        self.name = w.Text(value="sweep", description="name", **label)
        self.team = w.Text(value=team or "", placeholder="your token's team", description="team", **label)
        self.command = w.Text(value="python -m sweeps.examples.mlp --epochs 30", description="command",
                              style={"description_width": "110px"}, layout=w.Layout(width="670px"))
        self.flavour = w.Dropdown(options=list(FLAVOURS), value="h100-mig-1g", description="flavour", **label)
        self.gpus = w.BoundedIntText(value=1, min=1, max=56, description="GPUs per trial", **label)
        self.n_trials = w.BoundedIntText(value=20, min=1, max=10_000, description="trials", **label)
        self.parallelism = w.BoundedIntText(value=4, min=1, max=1_000, description="parallelism", **label)
        self.time_limit = w.Text(value="30m", description="time per trial", **label)
        self.metric = w.Text(value="val_loss", description="objective", **label)
        self.direction = w.Dropdown(options=["minimize", "maximize"], value="minimize", description="direction",
                                    **label)
        self.sampler = w.Dropdown(options=["tpe", "random", "grid"], value="tpe", description="sampler", **label)
        self.pruner = w.Dropdown(options=["median", "hyperband", "none"], value="median", description="pruner",
                                 **label)
        self.rows: list[ParamRow] = []
        self.params_box = w.VBox([])
        self.add_param = w.Button(description="Add parameter", icon="plus")
        self.add_param.on_click(lambda _: self.add_parameter())
        self.launch = w.Button(description="Launch sweep", button_style="primary", icon="rocket")
        self.launch.on_click(lambda _: self.submit())
        self.cancel = w.Button(description="Cancel sweep", button_style="danger", disabled=True)
        self.cancel.on_click(lambda _: self.cancel_sweep())
        self.new_sweep = w.Button(description="New sweep", icon="plus", tooltip="define another sweep")
        self.new_sweep.on_click(lambda _: self.unfold())
        self.message = w.HTML()
        self.form = w.VBox([
            w.HTML("<b>Sweep</b>"),
            w.HBox([self.name, self.team]), self.command,
            w.HBox([self.flavour, self.gpus]), w.HBox([self.n_trials, self.parallelism]),
            w.HBox([self.time_limit, self.metric]), w.HBox([self.direction, self.sampler]), self.pruner,
            w.HTML("<b>Search space</b>"), self.params_box, self.add_param,
            self.launch,
        ])
        self.title = w.HTML()
        self.progress = w.IntProgress(value=0, min=0, max=1, description="progress",
                                      layout=w.Layout(width="670px"))
        self.counts = w.HTML()
        self.best = w.HTML()
        self.plot = w.Image(format="png", layout=w.Layout(width="640px"))
        self.live = w.VBox([self.title, self.progress, self.counts, self.best, self.plot,
                            w.HBox([self.cancel, self.new_sweep])], layout=w.Layout(display="none"))
        self.widget = w.VBox([self.form, self.message, self.live])
        for name, low, high, log in (("lr", 0.01, 10.0, True), ("hidden", 4, 64, False)):
            self.add_parameter(name, "int" if name == "hidden" else "float", low, high, log)
        self.add_parameter("activation", "categorical", choices="tanh, relu")

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        """Displayed in a notebook as its widget tree."""
        return self.widget._repr_mimebundle_(**kwargs)

    def add_parameter(self, name: str = "", kind: str = "float", low: float = 0.0, high: float = 1.0,
                      log: bool = False, choices: str = "") -> ParamRow:
        row = ParamRow(name, kind, low, high, log, choices, on_remove=self.remove_parameter)
        self.rows.append(row)
        self.params_box.children = tuple(r.box for r in self.rows)
        return row

    def remove_parameter(self, row: ParamRow) -> None:
        self.rows.remove(row)
        self.params_box.children = tuple(r.box for r in self.rows)

    # -- the form ------------------------------------------------------------------------------------------------
    def spec_data(self) -> dict[str, Any]:
        """The sweep the form describes, as the JSON body of ``POST /v1/sweeps``."""
        space: dict[str, Any] = {}
        for row in self.rows:
            space[row.name.value.strip()] = row.spec()
        return {
            "name": self.name.value.strip(), "team": self.team.value.strip(),
            "n_trials": self.n_trials.value, "parallelism": self.parallelism.value,
            "objective": {"metric": self.metric.value.strip(), "direction": self.direction.value},
            "sampler": self.sampler.value, "pruner": self.pruner.value, "search_space": space,
            "trial": {"flavour": self.flavour.value, "gpus_per_pod": self.gpus.value,
                      "command": shlex.split(self.command.value), "time_limit": self.time_limit.value.strip()},
        }

    def submit(self) -> str | None:
        """Validate the form, start the sweep, switch to the live view; the sweep id, or ``None`` (and the
        reason shown in the panel) if nothing was started."""
        try:
            data = self.spec_data()
            if not data["team"]:
                data["team"] = self.client.whoami().team
                self.team.value = data["team"]
            spec = SweepSpec.model_validate(data)
            view = self.client.create_sweep(spec)
        except ValidationError as exc:
            self._error("The sweep is not valid", [(".".join(str(p) for p in e["loc"]) or "sweep",
                                                    e["msg"].removeprefix("Value error, ")) for e in exc.errors()])
            return None
        except ValueError as exc:                         # shlex: an unclosed quote in the command
            self._error("The command cannot be read", [("command", str(exc))])
            return None
        except ShoalError as exc:
            fields = list(getattr(exc, "fields", {}).items())
            self._error(getattr(exc, "message", str(exc)), fields)
            return None
        self.message.value = (f"<span style='color:#1a7f37'>Started sweep <code>{view.sweep_id}</code>: "
                              f"{view.n_trials} trials, {view.parallelism} at once.</span>")
        self.watch(view.sweep_id)
        return view.sweep_id

    def _error(self, headline: str, fields: list[tuple[str, str]]) -> None:
        items = "".join(f"<li><code>{html.escape(f)}</code>: {html.escape(m)}</li>" for f, m in fields)
        self.message.value = (f"<div style='color:#cf222e'><b>{html.escape(headline)}</b>"
                              f"{'<ul>' + items + '</ul>' if items else ''}</div>")

    # -- the live view -------------------------------------------------------------------------------------------
    @property
    def folded(self) -> bool:
        """The form is hidden (a sweep is on show)."""
        return bool(self.form.layout.display == "none")

    def watch(self, sweep_id: str) -> None:
        """Show ``sweep_id`` live, with the form folded away ("New sweep" brings it back)."""
        self.sweep_id = sweep_id
        self.form.layout.display = "none"
        self.new_sweep.layout.display = None
        self.live.layout.display = None
        self.cancel.disabled = False
        self.refresh()
        if self.autorefresh:
            self._start_polling()

    def unfold(self) -> None:
        """Bring the form back for another sweep, filled in from the one on show (the live view stays below)."""
        if self.view is not None:
            self.fill(self.view)
        self.message.value = ""
        self.form.layout.display = None
        self.new_sweep.layout.display = "none"

    def fill(self, view: SweepView) -> None:
        """Set the form to ``view``'s spec, so "New sweep" starts from the settings of the sweep on show."""
        spec, trial = view.spec, view.spec.trial
        self.name.value, self.team.value = spec.name, spec.team
        self.command.value = shlex.join(trial.command)
        if trial.flavour and trial.flavour[0] in self.flavour.options:
            self.flavour.value = trial.flavour[0]
        self.gpus.value = trial.gpus_per_pod
        self.n_trials.value, self.parallelism.value = spec.n_trials, spec.parallelism
        self.time_limit.value = _duration(trial.time_limit)
        self.metric.value, self.direction.value = spec.objective.metric, str(spec.objective.direction)
        self.sampler.value, self.pruner.value = spec.sampler.name, spec.pruner.name
        for row in list(self.rows):
            self.remove_parameter(row)
        for name, param in spec.search_space.items():
            if param.type == "categorical":
                self.add_parameter(name, "categorical", choices=", ".join(str(c) for c in param.choices))
            else:
                self.add_parameter(name, param.type, param.low, param.high, param.log)

    def cancel_sweep(self) -> None:
        if self.sweep_id is None:
            return
        try:
            self.client.cancel_sweep(self.sweep_id)
        except ShoalError as exc:
            self._error(getattr(exc, "message", str(exc)), [])
        self.refresh()

    def refresh(self) -> None:
        """Fetch the sweep and its trials once and redraw the live view."""
        if self.sweep_id is None:
            return
        try:
            view = self.client.sweep(self.sweep_id)
            trials = self.client.trials(self.sweep_id).trials
        except ShoalError as exc:
            self.counts.value = f"<span style='color:#cf222e'>{html.escape(str(exc))}</span>"
            return
        self.view, self.trials = view, trials
        self.plot.value = plot_png(view, trials)    # first: the text below is never ahead of the picture
        c = view.counts
        done = c.complete + c.pruned + c.failed
        self.title.value = (f"<b>{html.escape(view.name)}</b> <code>{view.sweep_id}</code> — {view.state} "
                            f"({view.direction} {html.escape(view.objective)}; study <code>{view.study_name}</code>)")
        self.progress.max = view.n_trials
        self.progress.value = done
        self.progress.description = f"{done}/{view.n_trials}"
        self.progress.bar_style = {"SUCCEEDED": "success", "FAILED": "danger", "CANCELLED": "warning"}.get(
            view.state, "info")
        self.counts.value = (f"pending <b>{c.pending + c.not_started}</b> · running <b>{c.running}</b> · "
                             f"done <b>{c.complete}</b> · pruned <b>{c.pruned}</b> · failed <b>{c.failed}</b>")
        if view.best is not None:
            self.best.value = (f"best: trial <b>{view.best.number}</b>, {html.escape(view.objective)} = "
                               f"<b>{view.best.value:.6g}</b> with <code>"
                               f"{html.escape(json.dumps(view.best.params))}</code>")
        else:
            self.best.value = "best: none yet"
        if view.message:
            self.best.value += f"<br><i>{html.escape(view.message)}</i>"
        if view.state in FINISHED_SWEEP_STATES or view.state == "CANCELLING":
            self.cancel.disabled = True

    def _start_polling(self) -> None:
        if self._poller is not None and self._poller.is_alive():
            return
        self._stop.clear()
        self._poller = threading.Thread(target=self._poll, name="sweep-panel", daemon=True)
        self._poller.start()

    def _poll(self) -> None:
        while not self._stop.wait(self.poll_s):
            self.refresh()
            if self.view is not None and self.view.state in FINISHED_SWEEP_STATES:
                return

    def close(self) -> None:
        """Stop polling and close the widgets."""
        self._stop.set()
        self.widget.close()


def _duration(seconds: float) -> str:
    """``1800.0`` → ``30m``: the form's way of writing a time limit."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


def plot_png(view: SweepView, trials: list[TrialView]) -> bytes:
    """Objective vs trial number: completed trials as dots, pruned ones at their last report, the best so far."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 3.2), dpi=100)
    axes = figure.add_subplot()
    complete = [(t.number, t.value) for t in trials if t.state == "COMPLETE" and t.value is not None]
    pruned = [(t.number, t.intermediate[-1][1]) for t in trials if t.state == "PRUNED" and t.intermediate]
    failed = [t.number for t in trials if t.state == "FAILED"]
    if complete:
        axes.scatter(*zip(*complete), color="#1f6feb", label="complete", zorder=3)
        best: list[float] = []
        better = min if view.direction == "minimize" else max
        for _, value in sorted(complete):
            best.append(value if not best else better(best[-1], value))
        axes.step([n for n, _ in sorted(complete)], best, where="post", color="#1a7f37", label="best so far")
    if pruned:
        axes.scatter(*zip(*pruned), marker="x", color="#bf8700", label="pruned (last report)", zorder=3)
    if failed:
        axes.scatter(failed, [0.0] * len(failed), marker="|", color="#cf222e", label="failed",
                     transform=axes.get_xaxis_transform(), zorder=3)
    axes.set_xlabel("trial")
    axes.set_ylabel(view.objective)
    axes.set_xlim(-0.5, max(view.n_trials - 0.5, 0.5))
    axes.grid(alpha=0.3)
    if complete or pruned or failed:
        axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()
