"""The shipped adapters: real client libraries driven through their public APIs.

``pytest --streamcheck=openai`` (and the other names in docs/clients.md) loads one of
these through the ``streamcheck.clients`` entry points; each library is an optional
extra (Python) or comes from this package's ``node/package-lock.json`` (Node).
"""
