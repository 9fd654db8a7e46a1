"""The catalog: importing this package registers every case, area by area."""

from conformance.cases import commit, retry

__all__ = ["commit", "retry"]
