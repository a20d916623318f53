"""``%load_ext magics``: ``%%gpujob`` sends a notebook cell to the cluster as a gang job; ``%gpujob`` looks after it.

Importing this package is cheap on purpose: ``python -m magics.runner`` runs in every pod and needs none of
IPython, so the magics themselves are imported only when the extension is loaded.
"""

from __future__ import annotations

from typing import Any

_loaded: Any = None


def load_ipython_extension(ip: Any) -> None:
    """Register ``%gpujob``/``%%gpujob`` with ``ip`` (IPython calls this for ``%load_ext magics``)."""
    global _loaded
    from .magic import GpuJobMagics

    _loaded = GpuJobMagics(ip)
    ip.register_magics(_loaded)


def unload_ipython_extension(ip: Any) -> None:
    """Stop following jobs (they keep running on the cluster)."""
    global _loaded
    if _loaded is not None:
        _loaded.close()
        _loaded = None
