"""The NVML path on a real GPU machine, in one command: ``python3 scheduler_core/executor/nvml_check.py``.

What it does, printing one JSON document (and writing it to ``$OUT/nvml_check.json`` when ``OUT`` is set):

1. NVML: every GPU's name, UUID and ECC mode, and the error counters Shoal reads (``nvml_errors``: hardware XID
   events, uncorrected volatile ECC errors, failed row remaps), before and after the burn-in;
2. the built-in burn-in (``burnin.py --mode gpu``) as the scheduler launches it, over every GPU: its per-GPU lines
   (float32 product error against float64, TFLOP/s), exit code and wall time;
3. that the check can fail on real hardware: the same product judged with an impossible tolerance (1e-12) must
   come out WRONG (exit code 2).

Needs only Python, ``nvidia-ml-py`` (``pynvml``) and torch with CUDA: it loads its two neighbours by path and none
of Shoal's dependencies. Exit 0 when NVML answered, the burn-in passed and the negative check failed as it should.
About a minute on one GPU (``--seconds`` per GPU, default 20).
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
try:
    from . import burnin, nvml_errors   # as part of the package
except ImportError:                     # run by path, where Shoal's dependencies may be missing
    sys.path.insert(0, str(HERE))
    import burnin  # type: ignore[import-not-found, no-redef]
    import nvml_errors  # type: ignore[import-not-found, no-redef]


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def nvml_inventory() -> dict[str, Any]:
    try:
        pynvml = importlib.import_module("pynvml")
    except ImportError as exc:
        return {"ok": False, "error": f"pynvml not importable: {exc}"}
    try:
        pynvml.nvmlInit()
        count = pynvml.nvmlDeviceGetCount()
    except Exception as exc:
        return {"ok": False, "error": f"NVML: {exc}"}
    gpus = []
    for index in range(count):
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        info: dict[str, Any] = {"index": index, "name": _text(pynvml.nvmlDeviceGetName(handle)),
                                "uuid": _text(pynvml.nvmlDeviceGetUUID(handle))}
        try:
            current, _pending = pynvml.nvmlDeviceGetEccMode(handle)
            info["ecc_enabled"] = bool(current)
        except Exception as exc:
            info["ecc_enabled"] = f"unknown ({exc})"
        try:
            info["driver"] = _text(pynvml.nvmlSystemGetDriverVersion())
        except Exception:
            pass
        gpus.append(info)
    return {"ok": True, "gpus": gpus, "module": pynvml}


def counters_view(counters: nvml_errors.NvmlErrorCounters) -> list[dict[str, Any]]:
    return [{**asdict(gpu), "total": gpu.total, "describe": gpu.describe()} for gpu in counters.read()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each GPU repeats its product")
    parser.add_argument("--size", type=int, default=4096)
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"python": sys.version.split()[0], "host": os.uname().nodename}

    inventory = nvml_inventory()
    module = inventory.pop("module", None)
    report["nvml"] = inventory
    counters = nvml_errors.open_counters(module) if module is not None else None
    if counters is not None:
        report["counters_before"] = counters_view(counters)
        report["listens_for_xids"] = counters.listens_for_xids

    env = dict(os.environ)
    if inventory.get("ok"):
        env["CUDA_VISIBLE_DEVICES"] = ",".join(str(g["index"]) for g in inventory["gpus"])
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(HERE / "burnin.py"), "--mode", "gpu", "--seconds", str(args.seconds),
                           "--size", str(args.size)], env=env, capture_output=True, text=True,
                          timeout=60 + 4 * args.seconds * max(1, len(inventory.get("gpus", []))))
    lines = []
    for line in done.stdout.splitlines():
        try:
            lines.append(json.loads(line))
        except ValueError:
            lines.append({"raw": line})
    report["burnin"] = {"exit_code": done.returncode, "wall_s": round(time.perf_counter() - started, 2),
                        "lines": lines, "stderr_tail": done.stderr[-2000:]}

    torch = burnin._torch_with_cuda()
    if torch is not None:
        negative = burnin.gpu_check(torch, 0, size=1024, seconds=0.5, tolerance=1e-12)
        report["negative_check"] = asdict(negative)
    if counters is not None:
        report["counters_after"] = counters_view(counters)

    ok = (bool(inventory.get("ok")) and done.returncode == burnin.PASSED
          and report.get("negative_check", {}).get("exit_code") == burnin.WRONG)
    report["ok"] = ok
    text = json.dumps(report, indent=2, default=str)
    print(text)
    out = os.environ.get("OUT")
    if out:
        Path(out, "nvml_check.json").write_text(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
