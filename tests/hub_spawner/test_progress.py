"""The spawn page's lines for a job, as the scheduler last answered (``progress_event``, pure)."""

from __future__ import annotations

from hub_spawner.progress import progress_event
from hub_spawner.scheduler import NotebookJob


def test_a_granted_slice_says_where_and_whether_it_is_borrowed() -> None:
    own = NotebookJob(id="j1", state="ADMITTED", node="mig-a-n00", devices=("MIG-1",), admitted_as="nominal")
    lent = NotebookJob(id="j2", state="ADMITTED", node="mig-a-n00", devices=("MIG-2",), admitted_as="borrowed")
    assert progress_event(own, 0.0) == {
        "progress": 60, "message": "Slice granted on mig-a-n00 (MIG-1); starting the notebook server"}
    message = progress_event(lent, 0.0)["message"]
    assert message.startswith("Slice granted on mig-a-n00 (MIG-2) (borrowed from another team")
    assert "the idle reaper gives it back sooner" in message
