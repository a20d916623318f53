"""``python -m hub_spawner.reaper``: run the reaper as a JupyterHub managed service.

The hub gives a managed service ``JUPYTERHUB_API_TOKEN`` and ``JUPYTERHUB_API_URL``; the same token is a hub token
the Shoal API accepts (as the service's identity, an admin there if the API is told so), so no other secret is set.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal

from scheduler_core.model import parse_duration

from .culler import Reaper
from .gpu import NvmlUtilisation


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m hub_spawner.reaper", description=__doc__)
    parser.add_argument("--timeout", default="1h", help="idle limit (default 1h)")
    parser.add_argument("--borrowed-timeout", default="10m",
                        help="idle limit of a notebook on slices its team borrowed (default 10m)")
    parser.add_argument("--cull-every", default="5m", help="time between sweeps (default 5m)")
    parser.add_argument("--proxy-url", default=os.environ.get("JUPYTERHUB_PUBLIC_URL", "http://127.0.0.1:8000"),
                        help="where the notebook servers are reached (the hub's public URL)")
    parser.add_argument("--shoal-url", default=os.environ.get("SHOAL_URL", ""),
                        help="Shoal API; without it the reaper cannot record reasons or read GPU figures")
    parser.add_argument("--gpu-busy-percent", type=float, default=5.0)
    return parser


async def _run(args: argparse.Namespace) -> None:
    token = os.environ["JUPYTERHUB_API_TOKEN"]
    scheduler = None
    if args.shoal_url:
        from ..shoal_client import ShoalClientScheduler
        scheduler = ShoalClientScheduler(args.shoal_url, token)
    reaper = Reaper(hub_api_url=os.environ.get("JUPYTERHUB_API_URL", "http://127.0.0.1:8081/hub/api").rstrip("/"),
                    proxy_url=args.proxy_url, token=token, scheduler=scheduler, gpu=NvmlUtilisation.try_open(),
                    limit=parse_duration(args.timeout), borrowed_limit=parse_duration(args.borrowed_timeout),
                    gpu_busy_percent=args.gpu_busy_percent)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    every = parse_duration(args.cull_every)
    try:
        while not stop.is_set():
            try:
                decisions = await reaper.cull_idle()
                stopped = [f"{d.user}/{d.server_name}" for d in decisions if d.stopped]
                logging.info("reaper: %d servers judged, stopped: %s", len(decisions), stopped or "none")
            except Exception:
                logging.exception("reaper: sweep failed; trying again in %s", args.cull_every)
            try:
                await asyncio.wait_for(stop.wait(), timeout=every)
            except asyncio.TimeoutError:
                pass
    finally:
        await reaper.close()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    asyncio.run(_run(_parser().parse_args()))


if __name__ == "__main__":
    main()
