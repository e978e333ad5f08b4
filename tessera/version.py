"""The package's version: one place, read by `tessera.__version__`, the driver (an image's `compiler`
property) and the build (pyproject.toml takes it by regex, so this file must keep the plain assignment)."""

__version__ = "0.1.0"
