"""``KubernetesExecutor`` passes the Executor contract suite against the fake API server, with real processes."""

from __future__ import annotations

from pathlib import Path

from ..executor_contract import ExecutorContract, ExecutorHarness
from .harness import KubeHarness


class TestKubernetesExecutor(ExecutorContract):
    def make_harness(self, tmp_path: Path) -> ExecutorHarness:
        return KubeHarness(tmp_path)
