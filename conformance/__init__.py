"""The conformance cases (the spec, as code) and the reference client."""
