"""Shoal on Kubernetes: pure manifest builders, node inventory from the cluster, and the Kubernetes executor.

``manifests`` and ``inventory`` are pure functions of plain dicts (what the API serves), tested without a cluster;
``reflector`` and ``executor`` talk to the API server through the official ``kubernetes`` client. Only the latter
two need the ``kubernetes`` extra installed.
"""
