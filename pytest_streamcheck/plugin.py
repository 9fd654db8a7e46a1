"""The pytest11 entry point: options, hooks and fixtures only; heavy work lives elsewhere."""
