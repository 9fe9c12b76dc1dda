"""The SDK's tests against a running stack use the gateway tests' stack (tests/gateway)."""

from tests.gateway.conftest import gateways

__all__ = ["gateways"]
