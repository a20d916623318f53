"""How a cell travels to its pods, and how values come back: a job bundle, one directory per submission.

Why a directory under the notebook's working directory: the job must see what the notebook sees — its files, its
Python environment — and the one thing a notebook server and its jobs share is that filesystem (the same machine
for the local executor; the user's shared home volume on Kubernetes). So the bundle holds the cell's source, the
pushed values as pickles and a manifest (interpreter, working directory, ``sys.path``); every pod runs
``<the notebook's python> -m magics.runner <bundle>``; rank 0 writes the pulled values back beside them.

Layout::

    <cwd>/.shoal/jobs/<key>/manifest.json    what the runner restores (see ``Manifest``)
                           /cell.py          the cell's source, so tracebacks show its lines
                           /push/<name>.pkl  values sent with --push
                           /pull/<name>.pkl  values rank 0 sends back with --pull
                           /pull/_result.json  rank 0's account: which names it wrote, which failed and why

The key doubles as the submission's ``Idempotency-Key``: a retried submit of the same bundle is the same job.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

MANIFEST = "manifest.json"
CELL = "cell.py"
PUSH_DIR = "push"
PULL_DIR = "pull"
RESULT = "_result.json"
MANIFEST_VERSION = 1
#: Pushes are for small inputs; anything bigger belongs in a file the job reads from the shared directory.
MAX_PUSH_BYTES = 256 * 1024 * 1024


class BundleError(Exception):
    """A value cannot be packed or unpacked; the message names the variable and what to do."""


@dataclass(frozen=True, slots=True)
class Manifest:
    """What a pod needs to run the cell as the notebook would have: same interpreter, directory and import path."""

    version: int
    python: str
    cwd: str
    sys_path: list[str]
    push: list[str]
    pull: list[str]
    created_at: float
    source_name: str = CELL
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def load(cls, bundle: Path) -> Manifest:
        data = json.loads((bundle / MANIFEST).read_text())
        if data.get("version") != MANIFEST_VERSION:
            raise BundleError(f"{bundle / MANIFEST}: manifest version {data.get('version')!r}, "
                              f"this runner reads version {MANIFEST_VERSION}")
        return cls(**data)


@dataclass(frozen=True, slots=True)
class PullResult:
    """Rank 0's account of ``--pull``: values it wrote, and for the others why not."""

    written: list[str]
    errors: dict[str, str]


def new_key(now: float | None = None) -> str:
    """Sortable by time, unique without coordination: ``20250101-120000-1a2b3c4d``."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(4)}"


def package_root() -> str:
    """The directory holding the ``magics`` package, so ``python -m magics.runner`` imports in any pod."""
    return str(Path(__file__).resolve().parent.parent)


def runner_command(bundle: Path, python: str | None = None) -> tuple[str, ...]:
    return (python or sys.executable, "-m", "magics.runner", str(bundle))


def runner_env() -> dict[str, str]:
    """Env the packaging adds to every pod: unbuffered output (so logs stream) and the runner importable."""
    return {"PYTHONUNBUFFERED": "1", "PYTHONPATH": package_root()}


def write_bundle(root: Path, key: str, *, source: str, push: Mapping[str, Any], pull: Sequence[str],
                 cwd: str | None = None, sys_path: Sequence[str] | None = None, python: str | None = None,
                 now: float | None = None) -> Path:
    """Write a bundle under ``root/key`` and return its path; nothing is left behind if a value cannot be pickled.

    Raises ``BundleError`` naming the variable that cannot travel.
    """
    blobs: dict[str, bytes] = {}
    total = 0
    for name, value in push.items():
        try:
            blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:  # pickle raises PicklingError, TypeError, AttributeError… depending on the object
            raise BundleError(f"--push {name}: cannot be pickled ({type(exc).__name__}: {exc}); send data "
                              f"(numbers, strings, lists, dicts, arrays), or define it inside the cell") from None
        total += len(blob)
        if total > MAX_PUSH_BYTES:
            raise BundleError(f"--push {name}: pushed values exceed {MAX_PUSH_BYTES // 2**20} MiB; save large "
                              f"data to a file in the working directory and read it in the cell instead")
        blobs[name] = blob
    bundle = root / key
    bundle.mkdir(parents=True, exist_ok=False)
    (bundle / PUSH_DIR).mkdir()
    (bundle / PULL_DIR).mkdir()
    (bundle / CELL).write_text(source)
    for name, blob in blobs.items():
        (bundle / PUSH_DIR / f"{name}.pkl").write_bytes(blob)
    manifest = Manifest(
        version=MANIFEST_VERSION,
        python=python or sys.executable,
        cwd=cwd or os.getcwd(),
        sys_path=[p for p in (sys.path if sys_path is None else sys_path)],
        push=list(push),
        pull=list(pull),
        created_at=time.time() if now is None else now,
    )
    _atomic_write(bundle / MANIFEST, json.dumps(asdict(manifest), indent=1).encode())
    return bundle


def load_pushed(bundle: Path, manifest: Manifest) -> dict[str, Any]:
    values = {}
    for name in manifest.push:
        with open(bundle / PUSH_DIR / f"{name}.pkl", "rb") as fh:
            values[name] = pickle.load(fh)
    return values


def write_pulled(bundle: Path, names: Sequence[str], namespace: Mapping[str, Any]) -> PullResult:
    """Rank 0, after the cell: pickle each pulled name. A missing or unpicklable one is reported, not fatal to
    the others, and the caller decides the exit code."""
    written: list[str] = []
    errors: dict[str, str] = {}
    for name in names:
        if name not in namespace:
            errors[name] = f"the cell did not define {name!r}"
            continue
        try:
            blob = pickle.dumps(namespace[name], protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            errors[name] = f"cannot be pickled ({type(exc).__name__}: {exc})"
            continue
        _atomic_write(bundle / PULL_DIR / f"{name}.pkl", blob)
        written.append(name)
    result = PullResult(written=written, errors=errors)
    _atomic_write(bundle / PULL_DIR / RESULT, json.dumps(asdict(result)).encode())
    return result


def read_pull_result(bundle: Path) -> PullResult | None:
    try:
        data = json.loads((bundle / PULL_DIR / RESULT).read_text())
    except FileNotFoundError:
        return None
    return PullResult(written=list(data["written"]), errors=dict(data["errors"]))


def load_pulled(bundle: Path, names: Sequence[str]) -> dict[str, Any]:
    """The values rank 0 sent back. ``BundleError`` says which name is missing and why."""
    result = read_pull_result(bundle)
    if result is None:
        raise BundleError(f"the job wrote no --pull values (no {bundle / PULL_DIR / RESULT}); "
                          f"rank 0 did not finish the cell")
    problems = [f"{name}: {result.errors[name]}" for name in names if name in result.errors]
    if problems:
        raise BundleError("--pull " + "; ".join(problems))
    values = {}
    for name in names:
        path = bundle / PULL_DIR / f"{name}.pkl"
        try:
            with open(path, "rb") as fh:
                values[name] = pickle.load(fh)
        except FileNotFoundError:
            raise BundleError(f"--pull {name}: rank 0 wrote no value for it") from None
        except Exception as exc:
            raise BundleError(f"--pull {name}: cannot be unpickled here ({type(exc).__name__}: {exc}); a class "
                              f"defined inside the cell does not exist in the notebook — return plain data") \
                from None
    return values


def _atomic_write(path: Path, data: bytes) -> None:
    # Write then rename: a reader (the notebook polling for pulls) never sees half a pickle.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
