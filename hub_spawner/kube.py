"""The spawner's Kubernetes side: the server's private environment as a Secret, and where the server listens.

On Kubernetes the notebook job's pod is made by the scheduler's executor from the same builders as every job pod
(``scheduler_core.kube.manifests``): bound to the granted node, asking the device plugin for one unit of the granted
MIG profile (``nvidia.com/mig-1g.10gb``), ``CUDA_VISIBLE_DEVICES`` naming that slice inside the pod. One set of pod
builders, so a notebook can never land anywhere but on its grant. The spawner adds only what the job's spec must not
carry — the hub's token and the rest of the hub's environment, in the Secret ``<gang>-env`` that the pod's ``envFrom``
names (a notebook's pod waits for it) — and it knows the server's address before the pod exists: rank 0's DNS name
through the gang's headless Service.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from scheduler_core.kube.manifests import gpu_resource, make_secret
from scheduler_core.kube.names import env_secret_name, pod_address

__all__ = ["NotebookSecrets", "gpu_resource", "notebook_address"]


def notebook_address(job_id: str, namespace: str, cluster_domain: str = "cluster.local") -> str:
    """The single-user server's host: the notebook pod's DNS name (resolvable as soon as the pod has an IP)."""
    return pod_address(job_id, 0, namespace, cluster_domain)


class NotebookSecrets:
    """Creates and deletes a notebook job's environment Secret through the official client (in a worker thread:
    the hub's event loop must not block on the API server)."""

    def __init__(self, api_client: Any, namespace: str) -> None:
        from kubernetes import client
        self.core = client.CoreV1Api(api_client)
        self.namespace = namespace

    async def put(self, job_id: str, env: Mapping[str, str], labels: Mapping[str, str] | None = None) -> str:
        """The Secret for ``job_id`` holding ``env`` (replaced if one is there already). Returns its name."""
        name = env_secret_name(job_id)
        body = make_secret(name, self.namespace, env, labels)

        def create() -> None:
            from kubernetes.client.exceptions import ApiException
            try:
                self.core.create_namespaced_secret(self.namespace, body, _preload_content=False)
            except ApiException as exc:
                if exc.status != 409:
                    raise
                self.core.delete_namespaced_secret(name, self.namespace, _preload_content=False)
                self.core.create_namespaced_secret(self.namespace, body, _preload_content=False)
        await asyncio.to_thread(create)
        return name

    async def delete(self, job_id: str) -> None:
        """Remove the job's Secret; one already gone is fine."""
        name = env_secret_name(job_id)

        def delete() -> None:
            from kubernetes.client.exceptions import ApiException
            try:
                self.core.delete_namespaced_secret(name, self.namespace, _preload_content=False)
            except ApiException as exc:
                if exc.status != 404:
                    raise
        await asyncio.to_thread(delete)


def in_cluster_client() -> Any:
    """The hub pod's own service account (Zero to JupyterHub's hub has one)."""
    from kubernetes import client, config
    config.load_incluster_config()
    return client.ApiClient()

