"""Routers: which replica serves each arriving request (registered plug-ins)."""

from prefixsim.router import least_loaded as _least_loaded  # noqa: F401
from prefixsim.router import prefix_aware as _prefix_aware  # noqa: F401
from prefixsim.router import round_robin as _round_robin  # noqa: F401
from prefixsim.router import session_affinity as _session_affinity  # noqa: F401
from prefixsim.router.protocol import ROUTERS, ReplicaView, Router, least_loaded_index

__all__ = ["ROUTERS", "ReplicaView", "Router", "least_loaded_index"]
