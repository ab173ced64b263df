"""Runtime every ragrail service shares: the contract's stubs, settings, server bootstrap, clients."""
