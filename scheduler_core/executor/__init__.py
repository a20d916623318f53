"""Executors run gangs on exact nodes: ``local`` (real processes), ``kubernetes`` (pods), ``sim`` (virtual time)."""

from .base import Executor, LaunchRequest, PodEvent, PodEventKind

__all__ = ["Executor", "LaunchRequest", "PodEvent", "PodEventKind"]
