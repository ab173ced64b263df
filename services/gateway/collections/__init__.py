"""/v1/collections: router (the routes), protocol (their bodies), serving (to and from the
retriever's collections)."""
