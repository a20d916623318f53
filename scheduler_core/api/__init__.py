"""The REST API on tornado (DESIGN §3.4): jobs, queues, quotas, nodes, events, usage and ``/metrics``.

Server side only: clients use ``scheduler_core.client``, which imports none of this.
"""

from .app import make_app
from .auth import Authenticator, ChainAuthenticator, TokenAuthenticator
from .service import ApiService

__all__ = ["ApiService", "Authenticator", "ChainAuthenticator", "TokenAuthenticator", "make_app"]
