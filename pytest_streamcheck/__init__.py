"""pytest-streamcheck: the conformance kit for resilient LLM streaming clients."""

__version__ = "0.1.0"
__all__ = ["__version__"]
