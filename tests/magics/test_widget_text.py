"""The widget and the terminal text show the same facts; the widget is driven without a browser."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Iterator

import pytest

from magics.fields import describe
from magics.text import job_block, queue_table, state_line
from magics.widget import JobWidget
from tests.magics.builders import NOW, make_queue, make_view


@pytest.fixture(autouse=True)
def utc_local_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


class CancelRecorder:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls = 0
        self.error = error

    def __call__(self) -> None:
        self.calls += 1
        if self.error is not None:
            raise self.error


def widget(on_cancel: CancelRecorder | None = None) -> JobWidget:
    return JobWidget("j-1", "train", "fraud-ml", on_cancel=on_cancel or CancelRecorder(), clock=lambda: NOW)


def shown(ui: JobWidget) -> dict[str, str]:
    return {"state": ui.state.value, **{key: label.value for key, label in ui.values.items()}}


CASES = [
    ("pending", make_view().pending(2, "WaitingForCapacity", "needs 16 free h100", timedelta(minutes=12)),
     {"state": "PENDING", "position": "#2 in fraud-ml's queue",
      "reason": "WaitingForCapacity: needs 16 free h100", "estimated_start": "12:12:00 (in 12m)",
      "placement": "—", "restarts": "—", "checkpoint": "—", "gpu_hours": "—"}),
    ("running", make_view().running().restarts(1, 2, 1).checkpoint(1200, timedelta(minutes=3)).gpu_hours(2.5),
     {"state": "RUNNING", "position": "—", "reason": "—", "estimated_start": "—",
      "placement": "2 × h100 pods on h100-a-n0, h100-a-n1 (block h100-a), nominal",
      "restarts": "1 (+2 after node failures, 1 preemptions)", "checkpoint": "step 1200, 11:57:00 (3m ago)",
      "gpu_hours": "2.50"}),
    ("cancelling", make_view().running().cancelling(),
     {"state": "TERMINATING (cancelling)"}),
    ("failed", make_view().running().finished("FAILED", 1, "exited 1, restart budget spent"),
     {"state": "FAILED (exit 1)", "reason": "exited 1, restart budget spent"}),
    ("cancelled", make_view().running().finished("CANCELLED", message="cancelled by ana"),
     {"state": "CANCELLED", "reason": "cancelled by ana"}),
]


@pytest.mark.parametrize(("case", "view", "expected"), CASES, ids=[c[0] for c in CASES])
def test_widget_shows_each_field(case: str, view: object, expected: dict[str, str]) -> None:
    ui = widget()
    ui.refresh(view.build())  # type: ignore[attr-defined]
    assert {k: shown(ui)[k] for k in expected} == expected


ROWS_SHOWN = [
    ("pending", make_view().pending(2, "WaitingForCapacity", "needs 16 free h100", timedelta(minutes=12)),
     ["position", "reason", "estimated_start"]),
    ("pending again after a preemption", make_view().pending(1, "QuotaFull", "full", None).restarts(0, 0, 1)
     .checkpoint(300, timedelta(minutes=9)).gpu_hours(1.5), ["position", "reason", "restarts", "checkpoint",
                                                              "gpu_hours"]),
    ("running", make_view().running(), ["placement", "gpu_hours"]),
    ("running, restarted", make_view().running().restarts(1).checkpoint(10, timedelta(minutes=1)),
     ["placement", "restarts", "checkpoint", "gpu_hours"]),
    ("succeeded", make_view().running().finished("SUCCEEDED", 0).gpu_hours(0.5), ["placement", "gpu_hours"]),
    ("failed", make_view().running().finished("FAILED", 1, "exited 1"), ["reason", "placement", "gpu_hours"]),
]


@pytest.mark.parametrize(("case", "view", "rows"), ROWS_SHOWN, ids=[c[0] for c in ROWS_SHOWN])
def test_widget_shows_only_the_rows_that_mean_something_in_the_state(case: str, view: object,
                                                                    rows: list[str]) -> None:
    ui = widget()
    ui.refresh(make_view().pending(1, "WaitingForCapacity", "x", timedelta(minutes=1)).build())
    ui.refresh(view.build())  # type: ignore[attr-defined]
    assert [key for key, row in ui.rows.items() if row.layout.display != "none"] == rows


def test_many_nodes_are_summarised() -> None:
    nodes = tuple(f"h100-a-n{i}" for i in range(6))
    facts = describe(make_view().running(nodes).build(), NOW)
    assert facts.values["placement"] == ("6 × h100 pods on h100-a-n0, h100-a-n1, h100-a-n2, h100-a-n3 +2 more "
                                         "(block h100-a), nominal")


def test_cancel_button_calls_cancel_once_and_is_disabled_while_cancelling() -> None:
    recorder = CancelRecorder()
    ui = widget(recorder)
    ui.refresh(make_view().running().build())
    assert not ui.cancel_button.disabled
    ui.cancel_button.click()
    assert recorder.calls == 1
    assert ui.cancel_button.disabled and ui.cancel_button.description == "Cancelling…"
    ui.refresh(make_view().running().finished("CANCELLED").build())
    assert ui.cancel_button.disabled and ui.cancel_button.description == "Finished"
    assert "CANCELLED" in ui.title.value and ui.state.value == "CANCELLED"


def test_cancel_failure_is_shown_in_the_widget_and_the_button_comes_back() -> None:
    recorder = CancelRecorder(RuntimeError("scheduler unreachable"))
    ui = widget(recorder)
    ui.refresh(make_view().running().build())
    ui.cancel_button.click()
    assert recorder.calls == 1
    assert not ui.cancel_button.disabled and ui.cancel_button.description == "Cancel job"
    assert ui.errors.outputs == ({"output_type": "stream", "name": "stderr",
                                  "text": "cancel failed: scheduler unreachable\n"},)


def test_finished_job_has_no_cancel() -> None:
    ui = widget()
    ui.refresh(make_view().running().finished("SUCCEEDED", 0).build())
    assert ui.cancel_button.disabled and ui.finished


def test_logs_and_notes_accumulate() -> None:
    ui = widget()
    ui.append_log("step 1\n")
    ui.append_log("")
    ui.append_log("oops\n", stderr=True)
    assert [o["text"] for o in ui.logs.outputs] == ["step 1\n", "oops\n"]
    ui.note("pulled into the notebook: loss")
    ui.note("could not pull", error=True)
    assert "pulled into the notebook: loss" in ui.notes.value and "#c62828" in ui.notes.value


def test_text_block_leaves_out_empty_fields() -> None:
    view = make_view().pending(3, "QuotaFull", "fraud-ml uses 16 of 16 h100", timedelta(hours=1)).build()
    assert job_block(describe(view, NOW)) == (
        "job j-1 'train' (fraud-ml)\n"
        "  state            PENDING\n"
        "  queue position   #3 in fraud-ml's queue\n"
        "  reason           QuotaFull: fraud-ml uses 16 of 16 h100\n"
        "  estimated start  13:00:00 (in 1h)"
    )


def test_state_line_for_terminal_following() -> None:
    view = make_view().pending(1, "BehindReservation", "", timedelta(minutes=5)).build()
    assert state_line(describe(view, NOW)) == (
        "[shoal] job j-1 PENDING · #1 in fraud-ml's queue · BehindReservation · starts 12:05:00 (in 5m)")


def test_queue_table() -> None:
    queue = make_queue(
        {"job_id": "j-2", "name": "big", "state": "PENDING", "pods": 4, "gpus_per_pod": 8, "position": 1,
         "reason": "WaitingForTopology", "estimated_start": NOW + timedelta(minutes=30)},
        {"job_id": "j-1", "name": "small", "state": "RUNNING", "admitted_as": "borrowed",
         "flavour": ["h100", "a100"]},
    )
    assert queue_table(queue, NOW).splitlines() == [
        "fraud-ml:",
        "  ID   NAME   USER  STATE    SHAPE          POS  REASON / EST. START",
        "  j-2  big    ana   PENDING  4x8 h100       1    WaitingForTopology 12:30:00 (in 30m)",
        "  j-1  small  ana   RUNNING  1x1 h100,a100       borrowed",
    ]
    assert queue_table(make_queue(), NOW) == "fraud-ml: no pending or running jobs"
