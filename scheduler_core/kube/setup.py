"""Connecting to a cluster for ``shoal up --executor kubernetes``: the client, the nodes, the executor.

Kept apart from ``cli/up.py`` so the composition root stays one screen: these are the command's Kubernetes options
(``kube_options``) and the one function that turns them into an executor and the cluster's node list (``connect``).
In a pod the client uses the pod's service account; elsewhere ``--kube-config`` names a kubeconfig file.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import click

from ..errors import ConfigError
from ..model.cluster import Node
from .executor import KubeExecutorConfig, KubernetesExecutor
from .inventory import DEFAULT_BLOCK_LABEL, DEFAULT_LEAF_LABEL, Inventory, NodeLabels, inventory
from .manifests import PodSettings, SharedVolume

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class KubeOptions:
    namespace: str = "shoal-jobs"
    image: str = ""
    kubeconfig: str | None = None
    shared_claim: str | None = None
    shared_path: str = "/shoal"
    node_selector: str | None = None
    block_label: str = DEFAULT_BLOCK_LABEL
    leaf_label: str = DEFAULT_LEAF_LABEL
    node_lost_after_s: float = 60.0
    service_account: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def checkpoint_root(self) -> str | None:
        """Checkpoints go on the shared volume when there is one (any node can resume from them)."""
        return f"{self.shared_path.rstrip('/')}/checkpoints" if self.shared_claim else None


@dataclass(frozen=True)
class KubeSetup:
    executor: KubernetesExecutor
    inventory: Inventory

    @property
    def nodes(self) -> list[Node]:
        return list(self.inventory.nodes)


def kube_options(fn: F) -> F:
    """The ``--kube-*`` options of ``shoal up`` (used with ``--executor kubernetes``)."""
    options = [
        click.option("--kube-namespace", default="shoal-jobs", show_default=True,
                     help="Namespace of the job pods."),
        click.option("--kube-image", default="", help="Image of a job whose spec names none."),
        click.option("--kube-config", "kube_config", default=None, metavar="FILE",
                     help="A kubeconfig file (default: the pod's service account)."),
        click.option("--kube-shared-claim", default=None, metavar="PVC",
                     help="A ReadWriteMany claim mounted in every job pod and in the scheduler: checkpoints, "
                          "the jobs' reports, checkpoint requests."),
        click.option("--kube-shared-path", default="/shoal", show_default=True,
                     help="Where the shared claim is mounted, in the pods and in this process."),
        click.option("--kube-node-selector", default=None, metavar="SELECTOR",
                     help="Label selector of the nodes Shoal schedules (default: every NVIDIA GPU node)."),
        click.option("--kube-block-label", default=DEFAULT_BLOCK_LABEL, show_default=True,
                     help="Node label naming a node's network block."),
        click.option("--kube-leaf-label", default=DEFAULT_LEAF_LABEL, show_default=True,
                     help="Node label naming a node's leaf switch."),
        click.option("--kube-node-lost-after", "kube_node_lost_after", type=click.FloatRange(0), default=60.0,
                     show_default=True, help="Seconds a node may be NotReady before its pods count as lost."),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def options_from(kube_namespace: str, kube_image: str, kube_config: str | None, kube_shared_claim: str | None,
                 kube_shared_path: str, kube_node_selector: str | None, kube_block_label: str,
                 kube_leaf_label: str, kube_node_lost_after: float) -> KubeOptions:
    return KubeOptions(namespace=kube_namespace, image=kube_image, kubeconfig=kube_config,
                       shared_claim=kube_shared_claim, shared_path=kube_shared_path,
                       node_selector=kube_node_selector, block_label=kube_block_label, leaf_label=kube_leaf_label,
                       node_lost_after_s=kube_node_lost_after)


def api_client(kubeconfig: str | None) -> Any:
    from kubernetes import client, config
    if kubeconfig:
        return config.new_client_from_config(config_file=kubeconfig)
    try:
        config.load_incluster_config()
    except config.ConfigException as exc:
        raise ConfigError(f"not running in a Kubernetes pod and no --kube-config given ({exc})") from None
    return client.ApiClient()


def connect(options: KubeOptions) -> KubeSetup:
    """Read the cluster's GPU nodes and start the executor on them. Fails with a ``ConfigError`` naming the
    problem when the API server cannot be reached or has no node Shoal can use."""
    from kubernetes import client

    labels = NodeLabels(block=options.block_label, leaf=options.leaf_label, selector=options.node_selector)
    api = api_client(options.kubeconfig)
    try:
        response = client.CoreV1Api(api).list_node(label_selector=options.node_selector, _preload_content=False,
                                                    _request_timeout=15)
        objects = json.loads(response.data).get("items") or []
    except Exception as exc:  # noqa: BLE001 - any failure here means: cannot start on this cluster
        raise ConfigError(f"cannot list the cluster's nodes: {type(exc).__name__}: {exc}") from None
    found = inventory(objects, labels)
    for skipped in found.skipped:
        log.info("node %s is not one of Shoal's: %s", skipped.name, skipped.reason)
    if not found.nodes:
        raise ConfigError(f"no node of the cluster has NVIDIA GPUs Shoal can schedule ({len(objects)} nodes listed"
                          f"{', selector ' + options.node_selector if options.node_selector else ''})")
    shared = SharedVolume(options.shared_claim, options.shared_path) if options.shared_claim else None
    settings = PodSettings(namespace=options.namespace, image=options.image, shared=shared,
                           service_account=options.service_account)
    config = KubeExecutorConfig(pods=settings, labels=labels, node_lost_after_s=options.node_lost_after_s,
                                **options.extra)
    return KubeSetup(KubernetesExecutor(api, config, found.nodes), found)
