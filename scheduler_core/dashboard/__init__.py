"""The dashboard at ``/services/shoal/``: my team's queue with reasons and estimates, a job's events and live logs,
the cluster's free GPUs beside its largest free shape, and sweeps (DESIGN §3.4).

Served by the API's own tornado process, from server-side templates (tornado's, autoescaped) with plots drawn as
SVG on the server: no CDN, no JavaScript build, a few lines of inline script for the live log. Every figure comes
from the ``ApiService`` the API answers with, as the same identity, so a page shows exactly what the API would
(another team's job is a 404 here as it is a 403 there). Logged in through the hub (``login``).
"""
