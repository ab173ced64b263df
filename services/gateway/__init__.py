"""The gateway: the HTTP entry point of ragrail, and its document ingest library."""
