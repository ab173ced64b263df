"""The HTTP plumbing every endpoint shares: keys and principals (auth, principals, access,
audit), limits, errors and failure accounting, request metrics, browser safety, disconnects,
validation, the OpenAPI document, the peers' clients and the objects routes depend on."""
