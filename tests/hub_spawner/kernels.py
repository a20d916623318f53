"""Run code in a notebook server's kernel over its REST and websocket APIs, through the hub's proxy.

Only what the hub tests need: start a kernel, execute code and read its output, or leave it executing (busy).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import datetime, timezone
from typing import Any

import httpx
from tornado.httpclient import HTTPRequest
from tornado.websocket import websocket_connect


class KernelClient:
    def __init__(self, hub_url: str, user: str, token: str) -> None:
        self.base = f"{hub_url}/user/{user}"
        self.headers = {"Authorization": f"token {token}"}

    def start(self) -> str:
        reply = httpx.post(f"{self.base}/api/kernels", headers=self.headers, json={"name": "python3"}, timeout=60)
        reply.raise_for_status()
        return str(reply.json()["id"])

    def kernels(self) -> list[dict[str, Any]]:
        reply = httpx.get(f"{self.base}/api/kernels", headers=self.headers, timeout=30)
        reply.raise_for_status()
        return list(reply.json())

    def run(self, kernel_id: str, code: str, timeout: float = 60) -> str:
        """Execute ``code``; return what it printed."""
        return asyncio.run(self._execute(kernel_id, code, wait=True, timeout=timeout))

    def start_running(self, kernel_id: str, code: str) -> None:
        """Send ``code`` and return at once: the kernel stays busy while it runs."""
        asyncio.run(self._execute(kernel_id, code, wait=False, timeout=30))

    async def _execute(self, kernel_id: str, code: str, *, wait: bool, timeout: float) -> str:
        url = self.base.replace("http", "ws", 1) + f"/api/kernels/{kernel_id}/channels"
        conn = await websocket_connect(HTTPRequest(url, headers=self.headers, connect_timeout=30))
        msg_id = uuid.uuid4().hex
        conn.write_message(json.dumps({
            "header": {"msg_id": msg_id, "username": "test", "session": uuid.uuid4().hex,
                       "msg_type": "execute_request", "version": "5.3",
                       "date": datetime.now(timezone.utc).isoformat()},
            "parent_header": {}, "metadata": {}, "channel": "shell", "buffers": [],
            "content": {"code": code, "silent": False, "store_history": False, "user_expressions": {},
                        "allow_stdin": False, "stop_on_error": True},
        }))
        output: list[str] = []
        try:
            while True:
                raw = await asyncio.wait_for(conn.read_message(), timeout=timeout)
                if raw is None:
                    raise ConnectionError("the kernel's websocket closed")
                msg = json.loads(raw)
                if msg.get("parent_header", {}).get("msg_id") != msg_id:
                    continue
                kind = msg["header"]["msg_type"]
                if kind == "status" and msg["content"]["execution_state"] == "busy" and not wait:
                    return ""
                if kind == "stream":
                    output.append(msg["content"]["text"])
                elif kind == "error":
                    raise RuntimeError("\n".join(msg["content"]["traceback"]))
                elif kind == "status" and msg["content"]["execution_state"] == "idle":
                    return "".join(output)
        finally:
            conn.close()
