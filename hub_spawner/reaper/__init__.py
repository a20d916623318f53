"""The idle reaper: a hub service that stops notebook servers idle by every measure, and never a busy kernel."""

from .arbiter import KernelActivity, ServerActivity, Verdict, is_idle
from .culler import REAPER_SCOPES, Decision, Reaper

__all__ = ["Decision", "KernelActivity", "REAPER_SCOPES", "Reaper", "ServerActivity", "Verdict", "is_idle"]
