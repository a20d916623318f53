"""Job specs users write: the reference example is accepted; each bad field gets a message that names it."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from scheduler_core.model import JobSpec, TopologyLevel
from scheduler_core.model.job import STORED
from scheduler_core.store.sql.codec import spec_to_json

EXAMPLE: dict[str, Any] = {
    "name": "risk-7b-ft-festive", "team": "fraud-ml", "priority_class": "standard", "flavour": "h100",
    "pods": 4, "gpus_per_pod": 8, "topology": {"required": "block"},
    "image": "registry.internal/fraud/ft:2026.10.2", "command": ["torchrun", "train.py", "--config", "ft.yaml"],
    "time_limit": "12h", "preemptible": True,
    "checkpoint": {"uri": "s3://ckpt/fraud-ml/risk-7b-ft-festive/", "interval": "auto", "grace_period": "300s"},
    "max_restarts": 20,
}


def test_reference_example_is_accepted() -> None:
    spec = JobSpec.model_validate(EXAMPLE)
    assert spec.flavour == ("h100",)
    assert spec.total_units == 32
    assert spec.time_limit == 12 * 3600
    assert spec.topology is not None and spec.topology.level is TopologyLevel.BLOCK and spec.topology.is_required
    assert spec.checkpoint.grace_period == 300
    dumped = spec.model_dump(mode="json")
    assert dumped["time_limit"] == "12h"
    assert JobSpec.model_validate(dumped) == spec


@pytest.mark.parametrize(("change", "field", "words"), [
    ({"pods": 0}, "pods", "greater than or equal to 1"),
    ({"pods": 1250}, "pods", "less than or equal to 1024"),
    ({"gpus_per_pod": 10000}, "gpus_per_pod", "less than or equal"),
    ({"gpus_per_pod": 16}, "", "at most 8 GPUs"),
    ({"flavour": "h200"}, "flavour", "unknown flavour 'h200'"),
    ({"flavour": []}, "flavour", "at least one flavour"),
    ({"time_limit": "soon"}, "time_limit", "expected a duration"),
    ({"time_limit": "90d"}, "time_limit", "between 1m and 60d"),
    ({"topology": {"required": "block", "preferred": "leaf"}}, "topology", "exactly one"),
    ({"topology": {"required": "rack"}}, "topology.required", "'node', 'leaf' or 'block'"),
    ({"command": []}, "command", "at least 1"),
    ({"team": "Fraud ML"}, "team", "pattern"),
    ({"env": {"1BAD": "x"}}, "env", "invalid environment variable name"),
    ({"checkpoint": {"grace_period": "2h"}}, "checkpoint.grace_period", "between 0s and 1h"),
    ({"surprise": 1}, "surprise", "Extra inputs are not permitted"),
])
def test_bad_fields_are_named(change: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate({**EXAMPLE, **change})
    error = info.value.errors()[0]
    assert ".".join(str(p) for p in error["loc"]).startswith(field)
    assert words in error["msg"]


def test_missing_required_fields() -> None:
    with pytest.raises(ValidationError) as info:
        JobSpec.model_validate({"name": "x"})
    missing = {e["loc"][0] for e in info.value.errors() if e["type"] == "missing"}
    assert missing == {"team", "flavour", "command"}


def test_mig_gang_is_refused() -> None:
    with pytest.raises(ValidationError, match="single-pod"):
        JobSpec.model_validate({**EXAMPLE, "flavour": "h100-mig-1g", "pods": 2, "gpus_per_pod": 1})


@pytest.mark.parametrize("change", [
    {}, {"flavour": ["h100-mig-1g"], "pods": 1, "gpus_per_pod": 1, "kind": "notebook", "topology": None},
    {"flavour": ["a100", "h100"], "topology": {"preferred": "leaf"}, "priority_class": "scavenger"},
    {"env": {"A": "1", "B_2": "x y"}, "labels": {"sweep": "s1"}, "cpus_per_pod": 12, "memory_gb_per_pod": 64},
    {"preemptible": False, "checkpoint": {"interval": 33.3, "grace_period": 12.5, "cost": 0.75}},
])
def test_a_stored_spec_reads_back_equal_to_the_submitted_one(change: dict[str, Any]) -> None:
    """``STORED``: what a store reads back (the rules already passed at submission) equals a full validation."""
    spec = JobSpec.model_validate({**EXAMPLE, **change})
    text = spec_to_json(spec)
    assert JobSpec.model_validate_json(text, context=STORED) == JobSpec.model_validate_json(text) == spec


@pytest.mark.parametrize(("change", "words"), [
    ({"pods": "4"}, "valid integer"),
    ({"flavour": 7}, "valid array"),
    ({"checkpoint": {"grace_period": -1}}, "must not be negative"),
    ({"surprise": 1}, "Extra inputs are not permitted"),
])
def test_stored_still_checks_every_field_type(change: dict[str, Any], words: str) -> None:
    """Only the submission rules are skipped for a stored spec: a row that is not a spec at all is still refused."""
    text = json.dumps({**EXAMPLE, **change})
    with pytest.raises(ValidationError, match=words):
        JobSpec.model_validate_json(text, context=STORED)


def test_stored_skips_the_submission_rules_only_when_asked() -> None:
    text = json.dumps({**EXAMPLE, "gpus_per_pod": 16})
    with pytest.raises(ValidationError, match="at most 8 GPUs"):
        JobSpec.model_validate_json(text)
    assert JobSpec.model_validate_json(text, context=STORED).gpus_per_pod == 16
