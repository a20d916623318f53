"""Schemathesis against a running API (SQLite store, a valid token): no 5xx, and every answer as the document says.

Seeded and bounded (examples per operation, a wall-clock limit), so a failure reproduces with the same command:
the test prints it. Checks: all of Schemathesis's but ``positive_data_acceptance``, which expects every
schema-valid body to be accepted; a spec can be well formed and still impossible here (an unknown team, a flavour
this cluster lacks, more GPUs than it has), and those are 422 by design (``api.limits``), documented as such.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .harness import Harness

pytestmark = pytest.mark.slow

SEED = 18
EXAMPLES = 10
CHECKS_EXCLUDED = "positive_data_acceptance"


#: Schemathesis's CLI, with a deeper recursion limit: Hypothesis describes filter lambdas by parsing their source,
#: and on CPython 3.11 a RecursionError inside that parse surfaces as "SystemError: AST constructor recursion depth
#: mismatch" (a crash of the generator, not an answer of the API) on our deeper schemas.
_RUN_ST = "import sys; sys.setrecursionlimit(20000); from schemathesis.cli import schemathesis; " \
          "sys.argv[0] = 'st'; sys.exit(schemathesis())"


def _st() -> list[str]:
    try:
        import schemathesis  # noqa: F401
    except ImportError:
        pytest.skip("schemathesis is not installed (pip install -e '.[test]')")
    return [sys.executable, "-c", _RUN_ST]


@pytest.mark.parametrize("api", ["sqlite"], indirect=True)
@pytest.mark.timeout(900)
def test_schemathesis_finds_no_server_error_and_no_nonconformance(api: Harness, tmp_path: Path) -> None:
    command = [
        *_st(), "run", f"{api.url}/v1/openapi.json", "--url", api.url,
        "--header", f"Authorization: Bearer {api.users['alice']}",
        "--checks", "all", "--exclude-checks", CHECKS_EXCLUDED,
        # One worker: Hypothesis is not thread-safe where it describes a strategy's lambdas (it rebuilds each one in
        # its module's globals, shared between threads), and two workers crashed the generator once in CI (a
        # "Runtime Error" in the coverage phase, not an answer of the API). One thread also makes the seed reproduce.
        "--max-examples", str(EXAMPLES), "--seed", str(SEED), "--workers", "1",
        # No "examples" phase: the document has few, and drawing them tripped a CPython 3.11 AST recursion bug
        # inside Hypothesis (a SystemError in the generator, not an answer of the API).
        "--phases", "coverage,fuzzing", "--max-response-time", "60", "--request-timeout", "30", "--no-shrink",
        # Hypothesis's own health checks are about the generator (the specs' 128 KiB strings are large and slow to
        # draw), not the API; they would end the fuzzing phase before it asks anything.
        "--suppress-health-check", "all",
        "--report", "junit", "--report-dir", str(tmp_path / "report"),
    ]
    env = {**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"}
    done = subprocess.run(command, capture_output=True, text=True, timeout=840, env=env, cwd=tmp_path)
    shown = " ".join(command).replace(api.users["alice"], "$TOKEN")
    assert done.returncode == 0, f"{shown}\n{done.stdout[-12000:]}\n{done.stderr[-2000:]}"
    assert "No issues found" in done.stdout or " passed" in done.stdout, done.stdout[-3000:]
