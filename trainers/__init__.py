"""Training recipes that produce the models the services load: `python -m trainers.<name>`.

Each recipe starts from weights that ship in a pip package (nothing is downloaded), writes
`models/<service>/<name>/<version>/` with a manifest.json (base, method, data hash, metrics,
format), metrics.json and a README.md model card, and is deterministic given its seed.
"""
