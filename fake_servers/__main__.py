"""``python -m fake_servers``: the command line (see ``fake_servers._cli``)."""

from __future__ import annotations

from fake_servers._cli import main

if __name__ == "__main__":
    raise SystemExit(main())
