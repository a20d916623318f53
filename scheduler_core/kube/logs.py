"""Pod output on Kubernetes for ``GET /v1/jobs/{id}/logs`` (``%%gpujob`` follows rank 0 with it).

The kubelet keeps each container's output; the API server serves it (``pods/log``). Offsets are bytes of that
output, as for the local executor's files: a read asks for the first ``offset + limit`` bytes (``limitBytes``) and
keeps what lies past ``offset``, so any number of followers read statelessly. That re-reads what came before the
offset — fine for following a job's output, not for paging through gigabytes. A pod that is gone (its gang deleted)
has no output left to read.
"""

from __future__ import annotations

import json
from typing import Any

from ..api.logs import MAX_CHUNK, LogRead, whole_characters
from . import manifests, names


class KubePodLogReader:
    """Reads a job's pods' output through the official client (``api_client``), in ``namespace``."""

    def __init__(self, api_client: Any, namespace: str, *, request_timeout_s: float = 10.0) -> None:
        from kubernetes import client
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace
        self.request_timeout_s = request_timeout_s

    def read(self, job_id: str, rank: int, offset: int, *, limit: int = MAX_CHUNK,
             attempt: int | None = None) -> LogRead:
        """As ``PodLogReader.read``; only the current attempt's pod exists, so an older attempt reads as empty."""
        from kubernetes.client.exceptions import ApiException
        name = names.pod_name(job_id, rank)
        try:
            # Listed, not read by name: the scheduler's role lists pods and never needs to get one.
            response = self.core.list_namespaced_pod(
                self.namespace, label_selector=f"{names.gang_selector(job_id)},{names.LABEL_RANK}={rank}",
                _preload_content=False, _request_timeout=self.request_timeout_s)
            pods = [pod for pod in json.loads(response.data).get("items") or () if manifests.pod_job(pod) == job_id]
            if not pods:
                return LogRead(attempt=None, text="", next_offset=offset, at_end=True)
            latest = manifests.pod_attempt(pods[0])
            if attempt is not None and attempt != latest:
                return LogRead(attempt=None, text="", next_offset=offset, at_end=True, latest=latest)
            response = self.core.read_namespaced_pod_log(
                name, self.namespace, container=names.CONTAINER, limit_bytes=offset + limit,
                _preload_content=False, _request_timeout=self.request_timeout_s)
            data: bytes = response.data
        except ApiException as exc:
            if exc.status in (400, 404):   # no such pod, or its container has not started: nothing to read yet
                return LogRead(attempt=None, text="", next_offset=offset, at_end=True)
            raise
        start = min(offset, len(data))
        chunk = whole_characters(data[start:start + limit])
        end = start + len(chunk)
        return LogRead(attempt=latest, text=chunk.decode("utf-8", errors="replace"), next_offset=end,
                       at_end=len(data) < offset + limit and end >= len(data), latest=latest)
