"""Runtime every ragrail service shares: contract stubs, settings, server bootstrap, clients."""
