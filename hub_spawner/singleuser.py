"""The single-user notebook server as the local launcher starts it: ``jupyterhub-singleuser`` without the one import
that was most of its start-up.

Profiled with ``python -X importtime -c "import jupyterhub.singleuser"``: of 15.7 s on this loaded machine, 9.0 s
were ``rfc3987_syntax``, which ``jsonschema``'s format checker imports if it is installed (``jupyter_events`` pulls
it in) and which builds a Lark grammar at import time, only to check "iri" formats that no schema the server
validates uses. Marking it absent before anything imports ``jsonschema`` halves the server's start; nothing else
changes (``jsonschema`` treats it as not installed). Kubernetes pods run the image's own ``jupyterhub-singleuser``.

Shoal's defaults for these servers (``hub_spawner.server_defaults``) leave out start-up work they never need. The rest
of the import is paid ahead of time by the warm process (``hub_spawner.zygote``), which forks this ``main``.
"""

from __future__ import annotations

import os
import sys


def prepare() -> None:
    """Mark ``rfc3987_syntax`` absent; before anything imports ``jsonschema`` (the warm process calls it too)."""
    sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]  # "not installed", for jsonschema


def main() -> int | None:
    prepare()
    from .server_defaults import apply

    apply(os.environ)   # Shoal's defaults for local servers (no PyPI manager, news, build check, LSP scan)
    from jupyterhub.singleuser import main as singleuser
    result: int | None = singleuser()
    return result


if __name__ == "__main__":
    sys.exit(main())
