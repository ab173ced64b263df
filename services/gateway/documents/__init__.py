"""/v1/documents and /v1/ingest/jobs: router and jobs_router (the routes), protocol (their
bodies), serving (who may write or see which document); parsing and chunking are ingest/."""
