"""ragrail services: the gateway and the gRPC back-end services."""
