"""The ragrail command line: bring the suite up, ingest, search."""
