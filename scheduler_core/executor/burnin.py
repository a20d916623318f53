"""The built-in burn-in: the short check job the scheduler runs on a node before it takes work again (DESIGN §3.3).

Run as a pod holding every unit of the node (``runtime.health_keeper``), it checks each device it is given in
``CUDA_VISIBLE_DEVICES``:

* **GPU mode** (torch imports and sees CUDA devices): per GPU, an ``n × n`` float32 matrix product (TF32 off)
  checked against the same product in float64, then repeated for ``--seconds``, each result compared with the
  first (silent data corruption shows as a product that changes), timed in TFLOP/s. A GPU under ``--slow``
  of its peers' median throughput fails too.
* **Virtual mode** (no torch, or no CUDA device: a virtual cluster's slots): per slot, a small integer matrix
  product in pure Python, verified by Freivalds' check — a process that exercises each slot it was given.

Exit 0: every device passed. 2: a product came out wrong. 3: a GPU is much slower than its peers. 4: a GPU
could not be used (a CUDA error). One JSON line per device on stdout, then a summary line.

Stdlib only (torch optional, imported lazily), and runnable by path (``python3 burnin.py``), so it runs in any
image and on a GPU machine without Shoal's dependencies.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any

PASSED, WRONG, SLOW, UNUSABLE = 0, 2, 3, 4


@dataclass(frozen=True, slots=True)
class DeviceResult:
    device: str
    mode: str
    ok: bool
    exit_code: int
    message: str
    tflops: float | None = None
    max_rel_error: float | None = None
    iterations: int = 0


def visible_devices(env: dict[str, str] | os._Environ[str] = os.environ) -> list[str]:
    raw = env.get("CUDA_VISIBLE_DEVICES", "").strip()
    return [part.strip() for part in raw.split(",") if part.strip()] or ["0"]


# -- virtual mode ---------------------------------------------------------------------------------------------------

def virtual_check(device: str, *, size: int = 48, rounds: int = 8, seed: int = 0) -> DeviceResult:
    """Exercise one slot on the CPU: C = A·B in pure Python, then Freivalds' check A(Br) = Cr for random r."""
    rng = random.Random(f"{seed}:{device}")
    a = [[rng.randint(-9, 9) for _ in range(size)] for _ in range(size)]
    b = [[rng.randint(-9, 9) for _ in range(size)] for _ in range(size)]
    columns = list(zip(*b))
    c = [[sum(x * y for x, y in zip(row, col)) for col in columns] for row in a]
    for _ in range(rounds):
        r = [rng.randint(0, 1) for _ in range(size)]
        br = [sum(x * y for x, y in zip(row, r)) for row in b]
        abr = [sum(x * y for x, y in zip(row, br)) for row in a]
        cr = [sum(x * y for x, y in zip(row, r)) for row in c]
        if abr != cr:
            return DeviceResult(device, "virtual", False, WRONG, "the matrix product failed Freivalds' check")
    return DeviceResult(device, "virtual", True, PASSED, f"{size}x{size} product verified")


# -- GPU mode -------------------------------------------------------------------------------------------------------

def gpu_check(torch: Any, index: int, *, size: int, seconds: float, tolerance: float = 1e-3) -> DeviceResult:
    """One GPU: a float32 product against float64, then repeats that must equal the first, timed."""
    name = f"cuda:{index}"
    try:
        device = torch.device(name)
        torch.backends.cuda.matmul.allow_tf32 = False
        generator = torch.Generator(device="cpu").manual_seed(1234 + index)
        a = torch.randn(size, size, generator=generator).to(device)
        b = torch.randn(size, size, generator=generator).to(device)
        first = a @ b
        reference = a.double() @ b.double()
        rel = float(((first.double() - reference).abs().max() / reference.abs().max()).item())
        if not rel < tolerance:
            return DeviceResult(name, "gpu", False, WRONG, f"float32 product is off by {rel:.2e} (limit "
                                f"{tolerance:g})", max_rel_error=rel)
        torch.cuda.synchronize(device)
        iterations, worst = 0, 0.0
        started = time.perf_counter()
        while True:
            again = a @ b
            iterations += 1
            if iterations % 8 == 0:
                torch.cuda.synchronize(device)
                worst = max(worst, float((again - first).abs().max().item()))
                if time.perf_counter() - started >= seconds:
                    break
        elapsed = time.perf_counter() - started
        scale = float(first.abs().max().item()) or 1.0
        if worst / scale > tolerance:
            return DeviceResult(name, "gpu", False, WRONG, f"a repeated product differed by {worst / scale:.2e} "
                                f"of the first (silent corruption?)", max_rel_error=rel, iterations=iterations)
        tflops = 2.0 * size**3 * iterations / elapsed / 1e12
        return DeviceResult(name, "gpu", True, PASSED, f"{iterations} products of {size}x{size} in {elapsed:.1f}s",
                            tflops=tflops, max_rel_error=rel, iterations=iterations)
    except Exception as exc:   # a CUDA error: the GPU cannot be used
        return DeviceResult(name, "gpu", False, UNUSABLE, f"{type(exc).__name__}: {exc}".splitlines()[0])


def _torch_with_cuda() -> Any | None:
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() and torch.cuda.device_count() > 0 else None
    except Exception:
        return None


def judge_speed(results: list[DeviceResult], slow: float) -> list[DeviceResult]:
    """Fail passing GPUs whose throughput is below ``slow`` × the median of all (needs two or more)."""
    speeds = [r.tflops for r in results if r.ok and r.tflops is not None]
    if len(speeds) < 2:
        return results
    median = statistics.median(speeds)
    judged = []
    for result in results:
        if result.ok and result.tflops is not None and result.tflops < slow * median:
            result = DeviceResult(result.device, result.mode, False, SLOW,
                                  f"{result.tflops:.1f} TFLOP/s, under {slow:g}x its peers' median {median:.1f}",
                                  result.tflops, result.max_rel_error, result.iterations)
        judged.append(result)
    return judged


def run(argv: list[str] | None = None) -> tuple[int, list[DeviceResult]]:
    parser = argparse.ArgumentParser(prog="burnin", description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("auto", "gpu", "virtual"), default="auto")
    parser.add_argument("--size", type=int, default=4096, help="matrix size on a GPU")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long each GPU repeats its product")
    parser.add_argument("--slow", type=float, default=0.8, help="fail a GPU under this fraction of the median")
    args = parser.parse_args(argv)
    torch = None if args.mode == "virtual" else _torch_with_cuda()
    if args.mode == "gpu" and torch is None:
        result = DeviceResult("cuda", "gpu", False, UNUSABLE, "no CUDA device visible to torch (or no torch)")
        return UNUSABLE, [result]
    if torch is None:
        results = [virtual_check(device) for device in visible_devices()]
    else:
        results = judge_speed([gpu_check(torch, i, size=args.size, seconds=args.seconds)
                               for i in range(torch.cuda.device_count())], args.slow)
    failed = [r for r in results if not r.ok]
    return (max(r.exit_code for r in failed) if failed else PASSED), results


def main(argv: list[str] | None = None) -> int:
    code, results = run(argv)
    for result in results:
        print(json.dumps(asdict(result)), flush=True)
    print(json.dumps({"burnin": "passed" if code == PASSED else "failed", "exit_code": code,
                      "devices": len(results), "node": os.environ.get("SHOAL_NODE", "")}), flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
