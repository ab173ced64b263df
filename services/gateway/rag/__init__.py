"""The chat pipeline: input rails, retrieval, retrieval rails, prompt assembly, generation and
output rails, composed from the ragrail services."""
