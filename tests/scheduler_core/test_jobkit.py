"""The job contract helper: two-phase checkpoints, verified resume, signals, the "auto" interval."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from scheduler_core import jobkit
from scheduler_core.jobkit import CheckpointError, JobContext, young_daly_interval

REPO = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_ctx(tmp_path: Path, **kwargs: object) -> JobContext:
    defaults: dict[str, object] = {
        "checkpoint_uri": (tmp_path / "ckpt").as_uri(), "interval": "auto", "rank": 0, "gang_gpus": 8,
        "report_file": str(tmp_path / "reports.jsonl"), "environ": {},
    }
    defaults.update(kwargs)
    return JobContext(**defaults)  # type: ignore[arg-type]


def reports(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "reports.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


# -- save / resume ---------------------------------------------------------------------------------------------

def test_round_trip_of_named_files(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert ctx.resume() is None
    saved = ctx.save(7, {"model.pt": b"weights" * 1000, "optim.pt": b"moments"})
    assert saved is not None and saved.step == 7
    loaded = make_ctx(tmp_path).resume()
    assert loaded is not None
    assert loaded.step == 7
    assert loaded.read("model.pt") == b"weights" * 1000
    assert loaded.read("optim.pt") == b"moments"
    assert set(loaded.files) == {"model.pt", "optim.pt"}


def test_round_trip_of_raw_bytes_and_of_paths(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.save(1, b"")  # an empty state is still a state
    src = tmp_path / "src"
    src.mkdir()
    (src / "a.bin").write_bytes(os.urandom(3 * (1 << 20) + 5))  # several chunks
    (src / "b.txt").write_text("hello")
    ctx.save(2, [src / "a.bin", str(src / "b.txt")])
    latest = ctx.resume()
    assert latest is not None and latest.step == 2
    assert latest.read("a.bin") == (src / "a.bin").read_bytes()
    assert latest.read("b.txt") == b"hello"
    assert latest.bytes == (src / "a.bin").stat().st_size + 5


def test_newest_verified_checkpoint_wins(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, keep=0)
    for step in (10, 30, 20):
        ctx.save(step, {"s": str(step).encode()})
    latest = ctx.resume()
    assert latest is not None and (latest.step, latest.read("s")) == (30, b"30")


def corrupt_truncate(ckpt: Path) -> None:
    data = ckpt / "step-0000000002" / "model.pt"
    data.write_bytes(data.read_bytes()[:-3])


def corrupt_flip_byte(ckpt: Path) -> None:
    data = ckpt / "step-0000000002" / "model.pt"
    raw = bytearray(data.read_bytes())
    raw[0] ^= 0xFF
    data.write_bytes(bytes(raw))


def corrupt_bad_hash_in_manifest(ckpt: Path) -> None:
    manifest = ckpt / "manifest-0000000002.json"
    doc = json.loads(manifest.read_text())
    doc["files"][0]["sha256"] = "0" * 64
    manifest.write_text(json.dumps(doc))


def corrupt_missing_file(ckpt: Path) -> None:
    (ckpt / "step-0000000002" / "model.pt").unlink()


def corrupt_garbled_manifest(ckpt: Path) -> None:
    (ckpt / "manifest-0000000002.json").write_text('{"step": 2, "files": [')


def corrupt_manifest_of_other_step(ckpt: Path) -> None:
    manifest = ckpt / "manifest-0000000002.json"
    doc = json.loads(manifest.read_text())
    doc["step"] = 99
    manifest.write_text(json.dumps(doc))


@pytest.mark.parametrize("corrupt", [
    corrupt_truncate, corrupt_flip_byte, corrupt_bad_hash_in_manifest, corrupt_missing_file,
    corrupt_garbled_manifest, corrupt_manifest_of_other_step,
])
def test_a_corrupt_newest_checkpoint_is_skipped_never_loaded(tmp_path: Path, corrupt: object) -> None:
    ctx = make_ctx(tmp_path)
    ctx.save(1, {"model.pt": b"good one"})
    ctx.save(2, {"model.pt": b"newer but about to be damaged"})
    corrupt(tmp_path / "ckpt")  # type: ignore[operator]
    latest = make_ctx(tmp_path).resume()
    assert latest is not None
    assert latest.step == 1 and latest.read("model.pt") == b"good one"


def test_a_half_written_manifest_is_ignored(tmp_path: Path) -> None:
    """A crash between writing the temporary manifest and renaming it leaves a temp file: never a checkpoint."""
    ctx = make_ctx(tmp_path)
    ctx.save(1, {"model.pt": b"one"})
    ckpt = tmp_path / "ckpt"
    # Step 2's data written in full, its manifest only to the temporary name (the rename never happened).
    (ckpt / "step-0000000002").mkdir()
    (ckpt / "step-0000000002" / "model.pt").write_bytes(b"two")
    good = json.loads((ckpt / "manifest-0000000001.json").read_text())
    good["step"] = 2
    (ckpt / ".manifest-0000000002.json.tmp-123-abcd").write_text(json.dumps(good))
    latest = ctx.resume()
    assert latest is not None and latest.step == 1


def test_only_rank_zero_writes_by_default(tmp_path: Path) -> None:
    assert make_ctx(tmp_path, rank=3).save(5, b"x") is None
    assert not (tmp_path / "ckpt").exists()
    assert make_ctx(tmp_path, rank=3).save(5, b"x", all_ranks=True) is not None


def test_old_checkpoints_are_pruned_newest_kept(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, keep=2)
    for step in range(5):
        ctx.save(step, {"s": b"%d" % step})
    ckpt = tmp_path / "ckpt"
    assert sorted(p.name for p in ckpt.glob("manifest-*.json")) == [
        "manifest-0000000003.json", "manifest-0000000004.json"]
    assert sorted(p.name for p in ckpt.glob("step-*")) == ["step-0000000003", "step-0000000004"]


@pytest.mark.parametrize("data, message", [
    ({"../escape": b"x"}, "bad checkpoint file name"),
    ({"a/b": b"x"}, "bad checkpoint file name"),
    ({"ok": "not bytes"}, "expected bytes"),
    ({}, "nothing to save"),
    (["/nonexistent/file"], "not a readable file"),
])
def test_bad_input_is_refused_and_writes_nothing(tmp_path: Path, data: object, message: str) -> None:
    ctx = make_ctx(tmp_path)
    with pytest.raises(CheckpointError, match=message):
        ctx.save(1, data)  # type: ignore[arg-type]
    assert ctx.resume() is None


def test_unsupported_uri_scheme_names_the_way_out(tmp_path: Path) -> None:
    with pytest.raises(CheckpointError, match="only file://"):
        make_ctx(tmp_path, checkpoint_uri="s3://bucket/x").save(1, b"x")


def test_checkpoints_and_step_times_are_reported(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    ctx.save(4, {"m": b"abc"})
    ctx.report_step_time(0.25, step=12)
    first, second = reports(tmp_path)
    assert first["kind"] == "checkpoint" and first["step"] == 4 and first["bytes"] == 3
    assert first["verified"] is True and str(first["uri"]).endswith("manifest-0000000004.json")
    assert second == {"kind": "step_time", "rank": 0, "step_time_s": 0.25, "step": 12, "at": second["at"]}
    with pytest.raises(ValueError):
        ctx.report_step_time(-1)


# -- interval ---------------------------------------------------------------------------------------------------

def test_young_daly_follows_the_square_root_law() -> None:
    # 1,024 GPUs at one failure per 50,700 GPU-hours: M = 178,242 s; C = 60 s → τ = √(2·60·178,242) ≈ 4,625 s.
    assert young_daly_interval(60, 1024) == pytest.approx(4624.8, rel=1e-3)
    assert young_daly_interval(240, 1024) == pytest.approx(2 * young_daly_interval(60, 1024))
    assert young_daly_interval(60, 8) == pytest.approx(young_daly_interval(60, 1024) * (1024 / 8) ** 0.5)
    with pytest.raises(ValueError):
        young_daly_interval(60, 0)


def test_auto_interval_comes_from_the_environment_and_then_from_measured_cost(tmp_path: Path) -> None:
    clock = FakeClock()
    env = {"SHOAL_CHECKPOINT_URI": (tmp_path / "c").as_uri(), "SHOAL_CHECKPOINT_INTERVAL": "auto",
           "SHOAL_CHECKPOINT_COST": "60", "WORLD_SIZE": "128", "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    ctx = JobContext(environ=env, clock=clock)
    assert ctx.gang_gpus == 1024
    assert ctx.interval_s == pytest.approx(young_daly_interval(60, 1024))
    assert not ctx.should_checkpoint()
    clock.advance(ctx.interval_s - 1)
    assert not ctx.should_checkpoint()
    clock.advance(1)
    assert ctx.should_checkpoint()
    ctx.save(1, b"x")  # the fake clock does not move while saving: measured cost is 0
    assert ctx.interval_s < young_daly_interval(60, 1024)
    assert not ctx.should_checkpoint()


def test_fixed_interval_from_the_environment(tmp_path: Path) -> None:
    clock = FakeClock()
    ctx = JobContext(environ={"SHOAL_CHECKPOINT_INTERVAL": "600", "SHOAL_GANG_GPUS": "16"}, clock=clock)
    assert ctx.interval_s == 600 and ctx.gang_gpus == 16
    clock.advance(599.9)
    assert not ctx.should_checkpoint()
    clock.advance(0.1)
    assert ctx.should_checkpoint()
    with pytest.raises(ValueError):
        JobContext(environ={"SHOAL_CHECKPOINT_INTERVAL": "0"})


def test_request_stop_asks_for_a_checkpoint(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path)
    assert not ctx.should_stop() and not ctx.should_checkpoint()
    ctx.request_stop()
    assert ctx.should_stop() and ctx.should_checkpoint()


def test_a_raised_counter_in_the_control_file_asks_for_one_checkpoint(tmp_path: Path) -> None:
    """Where no signal can be sent (a Kubernetes pod), the scheduler raises a counter in the control file."""
    clock = FakeClock()
    control = tmp_path / "control"
    ctx = make_ctx(tmp_path, control_file=str(control), clock=clock, interval=3600)
    assert not ctx.should_checkpoint()                     # no file yet: no request
    control.write_text("1")
    assert not ctx.should_checkpoint()                     # read at most every control_poll_s
    clock.advance(0.5)
    assert ctx.should_checkpoint()
    ctx.save(1, b"x")
    clock.advance(0.5)
    assert not ctx.should_checkpoint()                     # the same counter is one request, served once
    control.write_text("not a number")
    clock.advance(0.5)
    assert not ctx.should_checkpoint()                     # a half-written file is no request
    control.write_text("2")
    clock.advance(0.5)
    assert ctx.should_checkpoint()


# -- real signals -----------------------------------------------------------------------------------------------

TRAINER = textwrap.dedent("""
    import sys, time
    from scheduler_core import jobkit
    ckpt = jobkit.resume()
    step = ckpt.step + 1 if ckpt else 0
    print("ready", step, flush=True)
    while True:
        time.sleep(0.01)
        stop = jobkit.should_stop()  # read once: a SIGTERM landing mid-step still gets its checkpoint
        if stop or jobkit.should_checkpoint():
            jobkit.save(step, {"state": str(step).encode()})
            print("saved", step, flush=True)
        if stop:
            sys.exit(0)
        step += 1
""")


def start_trainer(tmp_path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO), SHOAL_CHECKPOINT_URI=(tmp_path / "ckpt").as_uri(),
               SHOAL_CHECKPOINT_INTERVAL="3600", SHOAL_REPORT_FILE=str(tmp_path / "reports.jsonl"), RANK="0")
    proc = subprocess.Popen([sys.executable, "-c", TRAINER], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("ready")
    return proc


def test_sigusr1_checkpoints_and_sigterm_checkpoints_then_exits_zero(tmp_path: Path) -> None:
    proc = start_trainer(tmp_path)
    assert proc.stdout is not None
    proc.send_signal(signal.SIGUSR1)
    assert proc.stdout.readline().startswith("saved")
    assert proc.poll() is None  # a checkpoint request does not stop the job
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 0
    saved = [line for line in proc.stdout.read().splitlines() if line.startswith("saved")]
    assert len(saved) == 1
    latest = make_ctx(tmp_path).resume()
    assert latest is not None and latest.step == int(saved[0].split()[1])
    saves = [r["step"] for r in reports(tmp_path) if r["kind"] == "checkpoint"]
    assert saves == sorted(saves) and len(saves) == 2
    # Installing the handlers is reported first, so an executor that cannot see them may stop the job now.
    assert reports(tmp_path)[0]["kind"] == "ready"
    # A restart resumes after the newest checkpoint.
    again = start_trainer(tmp_path)
    again.send_signal(signal.SIGTERM)
    assert again.wait(timeout=30) == 0


def test_module_functions_install_handlers_that_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGUSR1, lambda signum, frame: seen.append(signum))
    previous_term = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(jobkit, "_context", None)
    monkeypatch.setenv("SHOAL_CHECKPOINT_URI", (tmp_path / "c").as_uri())
    monkeypatch.setenv("SHOAL_CHECKPOINT_INTERVAL", "3600")
    try:
        assert not jobkit.should_checkpoint()
        os.kill(os.getpid(), signal.SIGUSR1)
        deadline = time.monotonic() + 5
        while not jobkit.should_checkpoint() and time.monotonic() < deadline:
            time.sleep(0.001)
        assert jobkit.should_checkpoint() and not jobkit.should_stop()
        assert seen == [signal.SIGUSR1]  # the program's own handler still ran
    finally:
        signal.signal(signal.SIGUSR1, previous)
        signal.signal(signal.SIGTERM, previous_term)


@pytest.mark.parametrize("corrupt", [corrupt_garbled_manifest, corrupt_flip_byte, corrupt_missing_file])
def test_pruning_keeps_keep_good_checkpoints_and_drops_corrupt_ones(tmp_path: Path, corrupt: object) -> None:
    """Steps 20 and 30 corrupt, then 11, 12, 13 saved (a job resumed from 10): the good 11–13 are kept, not the
    corrupt two in their place."""
    ctx = make_ctx(tmp_path, keep=3)
    ckpt = tmp_path / "ckpt"
    for step in (10, 20, 30):
        ctx.save(step, {"model.pt": b"state %d" % step})
    for step in (20, 30):
        # The corruption helpers damage step 2; point them at these steps by renaming around them.
        (ckpt / f"manifest-{step:010d}.json").rename(ckpt / "manifest-0000000002.json")
        (ckpt / f"step-{step:010d}").rename(ckpt / "step-0000000002")
        doc = json.loads((ckpt / "manifest-0000000002.json").read_text())
        doc["step"] = 2
        (ckpt / "manifest-0000000002.json").write_text(json.dumps(doc))
        corrupt(ckpt)  # type: ignore[operator]
        manifest = ckpt / "manifest-0000000002.json"
        try:
            doc = json.loads(manifest.read_text())
            doc["step"] = step   # only the helper's damage is left
            manifest.write_text(json.dumps(doc))
        except ValueError:
            pass
        manifest.rename(ckpt / f"manifest-{step:010d}.json")
        (ckpt / "step-0000000002").rename(ckpt / f"step-{step:010d}")
    resumed = make_ctx(tmp_path, keep=3)
    first = resumed.resume()
    assert first is not None and first.step == 10
    for step in (11, 12, 13):
        resumed.save(step, {"model.pt": b"state %d" % step})
    kept = sorted(int(p.name[9:19]) for p in ckpt.glob("manifest-*.json"))
    assert kept == [11, 12, 13]
    assert sorted(p.name for p in ckpt.glob("step-*")) == [f"step-{s:010d}" for s in (11, 12, 13)]
    latest = make_ctx(tmp_path).resume()
    assert latest is not None and latest.read("model.pt") == b"state 13"
