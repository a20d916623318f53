"""Fields worked out once from others (``JobRequest.units`` and ``shape``, ``RunningJob.band``): a copy made with
``dataclasses.replace`` works them out again, so no stage ever reads a stale one."""

from __future__ import annotations

from dataclasses import replace

import pytest

from scheduler_core.model import PriorityClass
from scheduler_core.policy.snapshot import AdmittedAs, band_of

from .builders import make_cluster, make_job, make_snapshot


def test_a_request_s_units_and_shape_follow_its_pods() -> None:
    request = make_job("j").pods(2, 4).build()
    assert (request.units, request.shape[1:3]) == (8, (2, 4))
    wider = replace(request, pods=3)
    assert (wider.units, wider.shape[1:3]) == (12, (3, 4))


@pytest.mark.parametrize("priority", list(PriorityClass))
@pytest.mark.parametrize("admitted_as", list(AdmittedAs))
def test_a_running_job_s_band_follows_its_class_and_label(priority: PriorityClass, admitted_as: AdmittedAs) -> None:
    snap = (make_snapshot(make_cluster().block("b0", 1)).team("fraud", h100=8)
            .run(make_job("r").pods(1, 1), "b0-n00", started=-60).build())
    job = snap.running[0]
    relabelled = replace(job, request=replace(job.request, priority_class=priority), admitted_as=admitted_as)
    assert relabelled.band is band_of(priority, admitted_as)
