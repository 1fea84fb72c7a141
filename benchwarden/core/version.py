"""The installed version of benchwarden, read once from the package metadata.

It lives in core so core modules (provenance stamps) and suites can name the version
without importing the top-level package, which imports core for its public API.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchwarden")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
