"""The live widget under a ``%%gpujob`` cell.

``JobWidget`` owns its widgets and changes them only in ``refresh`` (state from a ``JobView``), ``append_log``
(pod output) and ``note`` (what the magic did: values pulled, waiting stopped). The cancel button calls the
``on_cancel`` it was given and shows any error in its own ``Output``, so a failure never escapes into a stray
traceback in another cell. Tests drive it without a browser: call ``refresh`` with a view, read the values,
``cancel_button.click()``.

Thread safety: the magic refreshes it from a background thread while the notebook runs other cells; every method
only assigns traits, which ipywidgets sends as comm messages through the kernel's thread-safe IOPub channel.
"""

from __future__ import annotations

import html
import threading
from datetime import datetime
from typing import Callable

import ipywidgets as w

from scheduler_core.schemas import JobView

from .fields import FIELD_LABELS, NONE, describe, utcnow

STATE_COLOURS = {
    "PENDING": "#b26a00",
    "ADMITTED": "#1565c0",
    "RUNNING": "#1565c0",
    "TERMINATING": "#b26a00",
    "SUCCEEDED": "#2e7d32",
    "FAILED": "#c62828",
    "TIMED_OUT": "#c62828",
    "CANCELLED": "#616161",
}


class JobWidget:
    """One job's live panel: its facts, a cancel button, rank 0's output and the magic's own notes."""

    def __init__(self, job_id: str, name: str, team: str, *, on_cancel: Callable[[], None],
                 clock: Callable[[], datetime] = utcnow) -> None:
        self.job_id = job_id
        self._on_cancel = on_cancel
        self._clock = clock
        self._lock = threading.Lock()
        self.title = w.HTML(self._title_html(name, team, "SUBMITTED"))
        self.values: dict[str, w.Label] = {key: w.Label(value="—") for key in FIELD_LABELS if key != "state"}
        self.state = w.Label(value="SUBMITTED")
        self.rows: dict[str, w.HBox] = {
            key: w.HBox([w.Label(value=label, layout=w.Layout(width="9.5em")), self.values[key]],
                        layout=w.Layout(display="none"))
            for key, label in FIELD_LABELS.items() if key != "state"
        }
        self.cancel_button = w.Button(description="Cancel job", button_style="danger", icon="stop",
                                      tooltip=f"cancel job {job_id}", layout=w.Layout(width="auto"))
        self.cancel_button.on_click(self._cancel_clicked)
        self.notes = w.HTML(value="")
        self.logs = w.Output(layout=w.Layout(max_height="24em", overflow="auto", border="1px solid #ddd"))
        self.log_title = w.HTML(value="<b>rank 0 output</b>")
        self.errors = w.Output()
        self.widget = w.VBox(
            [w.HBox([self.title, self.cancel_button], layout=w.Layout(justify_content="space-between")),
             w.VBox(list(self.rows.values())), self.notes, self.log_title, self.logs, self.errors],
            layout=w.Layout(border="1px solid #ccc", padding="6px", width="100%"),
        )
        self._name, self._team = name, team
        self.finished = False

    def _ipython_display_(self) -> None:
        from IPython.display import display
        display(self.widget)

    # -- the three ways it changes -------------------------------------------------------------------------------

    def refresh(self, view: JobView) -> None:
        """Show ``view``: the state badge, the rows that mean something in its state (the others fold away: no
        queue position once it runs, no empty restarts), and the button only while cancelling can do something."""
        facts = describe(view, self._clock())
        with self._lock:
            self.state.value = facts.values["state"]
            self.title.value = self._title_html(view.name, view.team, facts.values["state"], view.state)
            for key, label in self.values.items():
                label.value = facts.values[key]
                self.rows[key].layout.display = "none" if facts.values[key] == NONE else None
            self.finished = facts.finished
            self.cancel_button.disabled = facts.finished or view.cancel_requested
            if view.cancel_requested and not facts.finished:
                self.cancel_button.description = "Cancelling…"
            elif facts.finished:
                self.cancel_button.description = "Finished"

    def append_log(self, text: str, *, stderr: bool = False) -> None:
        if not text:
            return
        with self._lock:
            if stderr:
                self.logs.append_stderr(text)
            else:
                self.logs.append_stdout(text)

    def set_log_title(self, text: str) -> None:
        self.log_title.value = f"<b>{html.escape(text)}</b>"

    def note(self, message: str, *, error: bool = False) -> None:
        colour = "#c62828" if error else "#2e7d32"
        line = f'<div style="color:{colour}">{html.escape(message)}</div>'
        with self._lock:
            self.notes.value += line

    # -- internals -------------------------------------------------------------------------------------------------

    def _cancel_clicked(self, _button: w.Button) -> None:
        self.cancel_button.disabled = True
        self.cancel_button.description = "Cancelling…"
        try:
            self._on_cancel()
        except Exception as exc:  # the button is the boundary: show the error here, never lose it
            self.cancel_button.disabled = False
            self.cancel_button.description = "Cancel job"
            self.errors.append_stderr(f"cancel failed: {exc}\n")

    def _title_html(self, name: str, team: str, state_text: str, state: str | None = None) -> str:
        colour = STATE_COLOURS.get(state or "", "#455a64")
        return (f'<b>job {html.escape(self.job_id)}</b> {html.escape(name)} '
                f'<span style="color:#666">({html.escape(team)})</span> '
                f'<span style="background:{colour};color:white;padding:1px 8px;border-radius:8px">'
                f'{html.escape(state_text)}</span>')
