"""``POST /v1/nodes/{node}:fail|drain|repair``: operators' actions on a node, for admins only.

Why through the API and not on the store: the API knows who is asking. A non-admin token gets 403 and nothing
changes; an admin's action is an event that names them. ``shoal nodes fail|drain|repair`` calls these from any
directory with ``SHOAL_URL`` and ``SHOAL_TOKEN``.

Failing a node on the local executor kills its pods as lost hardware would; that goes through an executor
instance of the API's own over the same state directory (``LocalExecutor`` keeps everything in files, so any
instance can), never the one the controller steps, which is used by one thread at a time.
"""

from __future__ import annotations

from pydantic import ValidationError

from ..auth.tokens import Identity
from ..errors import Forbidden
from ..schemas import NodeActionRequest, NodeView
from ..service.nodes import NodeAction, NodeFaults, act_on_node
from .errors import BadRequest
from .handlers import ApiContext, BaseHandler
from .service import ApiService


class NodeOps:
    """The node actions over an ``ApiService``'s store. ``faults``: the executor that kills a failed node's pods
    (``None`` where the backend's own nodes do that, as on Kubernetes)."""

    def __init__(self, service: ApiService, faults: NodeFaults | None = None) -> None:
        self.service = service
        self.faults = faults

    def act(self, identity: Identity, name: str, action: NodeAction, reason: str = "") -> NodeView:
        if not identity.admin:
            raise Forbidden(f"user {identity.user!r} may not {action} nodes: node operations need an admin token "
                            f"(shoal token create --admin)")
        act_on_node(self.service.store, self.faults, name, action, now=self.service.clock(), by=identity.user,
                    reason=reason)
        self.service.wake()
        return next(view for view in self.service.nodes(identity).nodes if view.name == name)


class NodeActionHandler(BaseHandler):
    """An optional body ``{"reason": "..."}`` (at most 500 characters) is kept as the node's reason."""

    ops: NodeOps
    action: NodeAction

    def initialize(self, ctx: ApiContext, ops: NodeOps | None = None,
                   action: NodeAction = NodeAction.DRAIN) -> None:
        super().initialize(ctx)
        assert ops is not None
        self.ops = ops
        self.action = action

    async def post(self, node: str) -> None:
        reason = ""
        if self.request.body.strip():
            try:
                reason = NodeActionRequest.model_validate(self.json_body()).reason.strip()
            except ValidationError:
                raise BadRequest("the body is {\"reason\": \"...\"} with at most 500 characters",
                                 fields={"reason": "a string of at most 500 characters"}) from None
        self.send(await self.call_write(self.ops.act, self.identity, node, self.action, reason))
