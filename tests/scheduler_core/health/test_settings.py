"""The lifecycle's settings as ``shoal up`` takes them: durations, a shell-style command, and one readable error."""

from __future__ import annotations

import click
import pytest

from scheduler_core.cli.up import _health_config
from scheduler_core.controller import ControllerConfig
from scheduler_core.executor.sim import SimExecutor
from scheduler_core.runtime.node_lifecycle import HealthConfig
from scheduler_core.service.live import LiveConfig, LiveController
from scheduler_core.store.memory import MemoryStore

from ..greedy_policy import GreedyPolicy
from ..runtime_builders import cluster_nodes


def test_good_settings() -> None:
    config = _health_config("90s", "python3 /opt/check.py --quick 'a b'", "2m")
    assert config == HealthConfig(heartbeat_limit_s=90.0, burnin_command=("python3", "/opt/check.py", "--quick", "a b"),
                                  burnin_time_limit_s=120.0)
    assert _health_config("1m", None, "5m").burnin_command is None


@pytest.mark.parametrize(("limit", "command", "burnin_limit", "hint"), [
    ("soon", None, "5m", "--heartbeat-limit"),
    ("0s", None, "5m", "--heartbeat-limit"),
    ("60s", "  ", "5m", "--burnin-command"),
    ("60s", None, "-1m", "--burnin-time-limit"),
])
def test_bad_settings_name_the_option(limit: str, command: str | None, burnin_limit: str, hint: str) -> None:
    with pytest.raises(click.BadParameter) as caught:
        _health_config(limit, command, burnin_limit)
    assert caught.value.param_hint == hint


def test_a_heartbeat_limit_under_the_heartbeat_period_is_refused() -> None:
    with pytest.raises(ValueError, match="heartbeat limit"):
        LiveController(MemoryStore(), SimExecutor(), GreedyPolicy(), nodes=cluster_nodes(),
                       config=LiveConfig(heartbeat_every_s=5.0),
                       controller_config=ControllerConfig(health=HealthConfig(heartbeat_limit_s=5.0)))
