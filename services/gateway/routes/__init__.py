"""REST routes of the gateway, one module per resource."""
