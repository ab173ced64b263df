"""Helpers every service's backend registry uses: lazy import by name, and device choice."""

from __future__ import annotations

import importlib

from shared.errors import FailedPrecondition, InvalidArgument


def backend_class(service: str, name: str, registry: dict[str, str]) -> type:
    """The class `registry[name]` ("module:Class") names, imported only now, so a service
    loads the heavy packages of the backend it runs and no other."""
    if name not in registry:
        raise InvalidArgument(
            f"unknown {service} backend '{name}'; choose one of {sorted(registry)}"
        )
    module_name, class_name = registry[name].split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith(("services.", "shared.")):
            raise FailedPrecondition(
                f"{service} backend '{name}' needs the Python package '{exc.name}', which is "
                "not installed; install it (constraints.txt pins the version), or choose "
                f"another RAGRAIL_{service.upper()}_BACKEND"
            ) from exc
        raise
    return getattr(module, class_name)  # type: ignore[no-any-return]


def resolve_torch_device(device: str, setting: str) -> str:
    """cpu, cuda[:N], or auto (cuda when visible); `setting` names the variable in errors."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise FailedPrecondition(
            f"{setting}={device} but no CUDA device is visible; use cpu or auto"
        )
    return device
