"""The ragrail version every service reports in Info."""

from importlib.metadata import PackageNotFoundError, version

try:
    VERSION = version("ragrail")
except PackageNotFoundError:  # running from a checkout that was not pip-installed
    VERSION = "0.0.0+local"
