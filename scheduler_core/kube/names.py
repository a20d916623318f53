"""Kubernetes names and labels for a job's gang, as pure functions shared by the executor and the spawner.

Why stable names: the gang of a job keeps one name across restarts (``job_8c41a2`` → ``job-8c41a2``), so rank 0's
DNS name — ``MASTER_ADDR`` for the ranks, the server's address for the hub — is known before any pod exists and
never changes with the attempt. Which attempt a pod belongs to is in its annotations.
"""

from __future__ import annotations

import re
import zlib

#: Every object Shoal creates carries this, so the executor's watches see exactly its own objects.
MANAGED_BY = ("app.kubernetes.io/managed-by", "shoal")
LABEL_GANG = "shoal.io/gang"
LABEL_RANK = "shoal.io/rank"
ANNOTATION_JOB = "shoal.io/job-id"
ANNOTATION_ATTEMPT = "shoal.io/attempt"
ANNOTATION_REPORTED = "shoal.io/reported"
ANNOTATION_ENDED_AT = "shoal.io/ended-at"
#: The pod's one container: the job's command.
CONTAINER = "main"

_SAFE = re.compile(r"^[a-z0-9_]+$")
_UNSAFE = re.compile(r"[^a-z0-9-]+")
#: ``<gang>-<rank>`` must stay a DNS label (63): 5 characters are kept for "-1023".
MAX_GANG = 57


def gang_name(job_id: str) -> str:
    """A DNS-1035 label for a job's gang, distinct for distinct job ids.

    Store ids (``job_`` and hex) map one to one by ``_`` → ``-``; any other id gets a short hash of itself, so two
    ids that differ only in what had to be replaced never share a name.
    """
    lowered = job_id.lower()
    base = _UNSAFE.sub("-", lowered.replace("_", "-")).strip("-") or "job"
    if not base[0].isalpha():
        base = f"j-{base}"
    exact = bool(_SAFE.match(job_id)) and base == job_id.replace("_", "-") and len(base) <= MAX_GANG
    if exact:
        return base
    digest = f"{zlib.crc32(job_id.encode()):08x}"
    return f"{base[:MAX_GANG - 9].rstrip('-')}-{digest}"


def pod_name(job_id: str, rank: int) -> str:
    """Pod ``rank`` of the job's gang; also its hostname under the gang's headless Service."""
    return f"{gang_name(job_id)}-{rank}"


def env_secret_name(job_id: str) -> str:
    """The Secret a job's pods take private environment variables from (the hub's token for a notebook)."""
    return f"{gang_name(job_id)}-env"


def pod_address(job_id: str, rank: int, namespace: str, cluster_domain: str = "cluster.local") -> str:
    """Pod ``rank``'s DNS name through the gang's headless Service (resolvable as soon as the pod has an IP)."""
    gang = gang_name(job_id)
    return f"{gang}-{rank}.{gang}.{namespace}.svc.{cluster_domain}"


def gang_selector(job_id: str) -> str:
    return f"{LABEL_GANG}={gang_name(job_id)}"


def managed_selector() -> str:
    return f"{MANAGED_BY[0]}={MANAGED_BY[1]}"
