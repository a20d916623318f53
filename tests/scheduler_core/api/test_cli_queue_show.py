"""``shoal queue`` and ``shoal show`` in the habits of ``squeue`` and ``scontrol show job``, against a real API server
(the fake clock moves; the controller's part is played on the store, its events written as the controller writes
them): elapsed, limit and time left, node lists, per-rank placement, every start kept, times to the second, columns
picked with ``-o``, a line when the queue is empty, reasons in words with their code; and the names ``shoal submit``
gives a job from its command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scheduler_core.cli.jobs import _default_name
from scheduler_core.cli.queue_columns import COLUMNS
from scheduler_core.model import AdmittedAs, Reason
from scheduler_core.policy.quota import quota_full_message
from scheduler_core.store.records import Event, JobState

from ..runtime_builders import make_spec, whole_nodes
from .harness import T0, Harness, Shoal

RAW_TIMESTAMP = re.compile(r"\b1\.\d+e\+09\b|\b1[78]\d{8}(\.\d+)?\b")


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def test_an_empty_queue_says_so(shoal: Shoal) -> None:
    assert shoal("queue") == (0, "no pending or running jobs in fraud-ml's queue\n", "")
    assert shoal("queue", "--state", "all") == (0, "no jobs in fraud-ml's queue\n", "")


def test_queue_shows_elapsed_limit_left_nodes_and_estimated_start(api: Harness, shoal: Shoal) -> None:
    running = api.run(make_spec("trainer").pods(2, 8).time_limit(7200).build(),
                      whole_nodes("h100-b0-n00", "h100-b0-n01"))
    waiting = api.submit(make_spec("waiter").pods(1, 8).build())
    api.store.set_waits([(waiting.id, Reason.QUOTA_FULL, "fraud-ml uses all 16 of its h100", 1, T0 + 3605)], T0)
    api.clock.advance(3723)  # 1 h 2 min 3 s

    code, out, err = shoal("queue")

    assert (code, err) == (0, "")
    assert table(out) == [
        ["JOB", "TEAM", "NAME", "USER", "STATE", "SHAPE", "ELAPSED", "LIMIT", "LEFT", "POS", "START",
         "NODELIST(REASON)"],
        [waiting.id, "fraud-ml", "waiter", "alice", "PENDING", "1×8", "h100", "-", "1-00:00:00", "-", "1",
         "2026-10-27T01:00:05Z", "(QuotaFull)"],
        [running.id, "fraud-ml", "trainer", "alice", "RUNNING", "2×8", "h100", "1:02:03", "2:00:00", "57:57", "-",
         "2026-10-27T00:00:00Z", "h100-b0-n00,h100-b0-n01"],
    ]


def test_format_picks_columns_and_refuses_unknown_ones_all_at_once(api: Harness, shoal: Shoal) -> None:
    waiting = api.submit(make_spec("waiter").pods(1, 8).build())
    api.store.set_waits([(waiting.id, Reason.QUOTA_FULL, "fraud-ml uses all 16 of its h100", 1, None)], T0)

    code, out, _ = shoal("queue", "-o", "job,reason,why")
    assert code == 0
    assert out.splitlines() == [f"JOB{' ' * (len(waiting.id) - 1)}REASON     WHY",
                                f"{waiting.id}  QuotaFull  fraud-ml uses all 16 of its h100"]
    code, _, err = shoal("queue", "--format", "job,colour,size")
    assert code == 2 and "unknown columns colour, size; choose from job, team," in err


def test_queue_help_documents_every_column(shoal: Shoal) -> None:
    code, out, _ = shoal("queue", "--help")
    assert code == 0
    listed = out[out.index("Columns for --format"):]
    assert all(re.search(rf"^\s+{column.name}\s+\S", listed, re.M) for column in COLUMNS)


def test_show_has_limits_the_command_each_rank_and_every_start(api: Harness, shoal: Shoal) -> None:
    job = api.run(make_spec("trainer").pods(2, 8).time_limit(7200).command("python", "train.py", "--lr", "0.1")
                  .build(), whole_nodes("h100-b0-n00", "h100-b0-n01"))
    api.store.append_event(Event(at=T0, kind="admit", reason="nominal", job_id=job.id, team="fraud-ml",
                                 message="nominal on h100-b0-n00, h100-b0-n01",
                                 data={"nodes": ["h100-b0-n00", "h100-b0-n01"]}))
    api.store.append_event(Event(at=T0 + 4, kind="running", reason="AllPodsStarted", job_id=job.id,
                                 team="fraud-ml", message="all 2 pods started"))
    api.clock.advance(600)
    api.store.release(job.id, state=JobState.PENDING, now=api.clock(), epoch=0, message="node h100-b0-n01 lost",
                      infra_fault=True)
    api.store.append_event(Event(at=api.clock(), kind="requeue", reason="NodeLost", job_id=job.id, team="fraud-ml",
                                 message="node h100-b0-n01 lost"))
    api.clock.advance(30)
    api.store.bind(job.id, whole_nodes("h100-b0-n00", "h100-b0-n02"), AdmittedAs.NOMINAL, epoch=0, now=api.clock())
    api.store.append_event(Event(at=api.clock(), kind="admit", reason="nominal", job_id=job.id, team="fraud-ml",
                                 message="nominal", data={"nodes": ["h100-b0-n00", "h100-b0-n02"]}))
    api.clock.advance(5)
    api.store.mark_running(job.id, api.clock())
    api.store.append_event(Event(at=api.clock(), kind="running", reason="AllPodsStarted", job_id=job.id,
                                 team="fraud-ml", message="all 2 pods started"))
    api.clock.advance(65)

    code, out, _ = shoal("show", job.id)

    assert code == 0
    fields = dict(line.strip().split(": ", 1) for line in out.splitlines())
    assert fields["command"] == "python train.py --lr 0.1"
    assert fields["time limit"] == "2:00:00 per run"
    assert fields["elapsed"] == "1:05 (this run)" and fields["time left"] == "1:58:55"
    assert fields["rank 0"] == "h100-b0-n00, h100 units 0,1,2,3,4,5,6,7"
    assert fields["rank 1"] == "h100-b0-n02, h100 units 0,1,2,3,4,5,6,7"
    assert fields["started"] == ("2026-10-27T00:00:04Z → 2026-10-27T00:10:00Z NodeLost (node h100-b0-n01 lost), "
                                 "nominal on h100-b0-n00,h100-b0-n01")
    assert fields["restart 1"] == "2026-10-27T00:10:35Z → now, nominal on h100-b0-n00,h100-b0-n02"
    assert fields["submitted"] == "2026-10-27T00:00:00Z"
    assert not RAW_TIMESTAMP.search(out)


def test_show_gives_a_pending_jobs_reason_in_words_with_its_code(api: Harness, shoal: Shoal) -> None:
    waiting = api.submit(make_spec("big").pods(3, 8).build())
    words = quota_full_message("fraud-ml", "h100", 24, 8, 16, 24)
    api.store.set_waits([(waiting.id, Reason.QUOTA_FULL, words, 2, None)], T0)

    code, out, _ = shoal("show", waiting.id)

    fields = dict(line.strip().split(": ", 1) for line in out.splitlines())
    assert code == 0
    assert fields["reason"] == ("QuotaFull — fraud-ml uses all 8 of its h100 and 16 borrowed; this job needs 24 "
                                "more")
    assert (fields["position"], fields["estimated start"]) == ("2", "N/A")
    assert "elapsed" not in fields and "time left" not in fields


QUOTA_WORDS = [
    # usage, nominal, borrowing limit, units asked → the words
    (24, 8, 16, 24, "fraud-ml uses all 8 of its h100 and 16 borrowed; this job needs 24 more"),
    (8, 8, 0, 8, "fraud-ml uses all 8 of its h100 and may not borrow; this job needs 8 more"),
    (20, 8, 16, 8, "fraud-ml uses all 8 of its h100 and 12 borrowed; this job needs 8, and its borrowing limit of "
                   "16 leaves room for 4"),
    (4, 8, 2, 8, "fraud-ml uses 4 of its 8 h100; this job needs 8, and its borrowing limit of 2 leaves room for 6"),
]


@pytest.mark.parametrize(("usage", "nominal", "limit", "units", "words"), QUOTA_WORDS)
def test_quota_reasons_are_written_for_people(usage: int, nominal: int, limit: int, units: int, words: str) -> None:
    assert quota_full_message("fraud-ml", "h100", usage, nominal, limit, units) == words


NAMES = [
    (["python", "train.py", "--lr", "0.1"], "train"),
    (["python", "-m", "scheduler_core.examples.train", "--steps", "5"], "train"),
    (["python3", "-u", "scripts/finetune.py"], "finetune"),
    (["torchrun", "--nproc_per_node", "8", "pretrain.py"], "pretrain"),
    (["torchrun", "--nproc_per_node=8", "pretrain.py"], "pretrain"),
    (["sh", "-c", "echo hello; sleep 1"], "echo"),
    (["bash", "run_eval.sh"], "run_eval"),
    (["env", "A=1", "./bin/serve"], "serve"),
    (["python", "-c", "print(1)"], "print-1"),
    (["python"], "job"),
]


@pytest.mark.parametrize(("command", "name"), NAMES)
def test_a_job_submitted_with_flags_is_named_after_what_it_runs(command: list[str], name: str) -> None:
    assert _default_name(None, command) == name
    assert _default_name(Path("jobs/gang.yaml"), command) == "gang"


def test_submit_names_a_module_job_after_the_module(api: Harness, shoal: Shoal) -> None:
    code, _, _ = shoal("submit", "--", "python", "-m", "scheduler_core.examples.train", "--steps", "3")
    assert code == 0
    [job] = api.store.list_jobs()
    assert job.spec.name == "train"
