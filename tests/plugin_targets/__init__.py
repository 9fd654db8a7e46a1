"""Targets for the plugin's pytester tests, and the helpers those tests share.

The ``sct_*`` modules are imported by the inner pytest runs as top-level modules
(this directory is put on their path); ``_pytester`` is used by the outer tests.
"""
