"""Stage 4, the OpenAI-compatible gateway (``tritonft gateway``) in front of every model of the stack.

May import :mod:`components.common`, :mod:`components.settings` and :mod:`tritonft`; never another stage (what it
needs of a served model is the :class:`components.common.backend.ServedModel` protocol).
"""

from components.gateway.component import Gateway, GatewayArgs, GatewayBackend

__all__ = ["Gateway", "GatewayArgs", "GatewayBackend"]
