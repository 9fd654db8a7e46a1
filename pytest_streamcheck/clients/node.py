"""Shipped adapters for real Node client libraries (docs/clients-node.md).

``pytest --streamcheck=node-openai`` (``node-anthropic``, ``fetch-event-source``,
``eventsource``) runs one of the ``.mjs`` adapters of ``clients/node/`` under Node
through the kit's exec protocol: each drives the real library through its public API.

The libraries come from the shipped ``package-lock.json``. ``node_modules`` cannot live
in site-packages reliably (read-only installs, wheels rebuilt without it), so an install
step copies the package files into a cache directory and runs ``npm ci`` there::

    python -m pytest_streamcheck.clients.node install

The directory is ``$STREAMCHECK_NODE_DIR`` if set, else
``~/.cache/pytest-streamcheck/node-<hash of the lockfile>``; the factories run the
adapters from it, and raise ``TargetError`` saying what to run when Node or the install
is missing.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from conformance._adapter import ADAPTER_API, AdapterInfo
from conformance._case import CAPABILITIES, Capability
from pytest_streamcheck.targets import TargetError, with_preflight
from pytest_streamcheck.targets._exec import ExecAdapter

__all__ = [
    "ADAPTERS",
    "INSTALL_COMMAND",
    "MIN_NODE",
    "NodeAdapter",
    "anthropic_adapter",
    "eventsource_adapter",
    "fetch_event_source_adapter",
    "install",
    "install_dir",
    "known_capabilities",
    "main",
    "openai_adapter",
    "ready_dir",
]

SOURCE = Path(__file__).with_name("node")  # the shipped package files
INSTALL_COMMAND = "python -m pytest_streamcheck.clients.node install"
ENV_DIR = "STREAMCHECK_NODE_DIR"
STAMP = ".streamcheck-install"  # written once npm ci succeeded: the lockfile's hash
MIN_NODE = 20  # eventsource 4 and the adapters need Node 20 (fetch, ReadableStream)
PACKAGE_FILES = ("package.json", "package-lock.json")


@dataclass(frozen=True)
class NodeAdapter:
    """One shipped adapter: its file, the npm package it drives, and what its hello says."""

    script: str
    package: str
    name: str
    profile: str
    capabilities: frozenset[str]  # as its hello names them (the kit keeps those it knows)
    wire_format: str | None = None  # the hello's "format": what the plain endpoints speak


ADAPTERS: dict[str, NodeAdapter] = {
    "node-openai": NodeAdapter(
        "openai.mjs", "openai", "openai-node", "openai-node", frozenset({"post"}), "openai"
    ),
    "node-anthropic": NodeAdapter(
        "anthropic.mjs",
        "@anthropic-ai/sdk",
        "anthropic-node",
        "anthropic-node",
        frozenset({"post"}),
        "anthropic",
    ),
    "fetch-event-source": NodeAdapter(
        "fetch_event_source.mjs",
        "@microsoft/fetch-event-source",
        "fetch-event-source",
        "fetch-event-source",
        frozenset({"get", "post", "multipart", "resume", "raw_data", "event_fields"}),
    ),
    "eventsource": NodeAdapter(
        "eventsource.mjs",
        "eventsource",
        "eventsource",
        "eventsource-npm",
        frozenset({"get", "resume", "raw_data", "event_fields"}),
    ),
}


def _lock_hash() -> str:
    return hashlib.sha256((SOURCE / "package-lock.json").read_bytes()).hexdigest()


def install_dir() -> Path:
    """Where the install puts the adapters and their ``node_modules``."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured).expanduser()
    return Path.home() / ".cache" / "pytest-streamcheck" / f"node-{_lock_hash()[:12]}"


def _shipped_files() -> list[Path]:
    return [SOURCE / name for name in PACKAGE_FILES] + sorted(SOURCE.glob("*.mjs"))


def _copy_if_changed(src: Path, dest_dir: Path) -> None:
    """Copy ``src`` into ``dest_dir`` unless an identical copy is there (atomically, so
    processes loading a target at once never see half a file)."""
    dest = dest_dir / src.name
    data = src.read_bytes()
    if dest.is_file() and dest.read_bytes() == data:
        return
    fd, tmp = tempfile.mkstemp(prefix=f".{src.name}.", dir=dest_dir)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@functools.cache
def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=10, check=True
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.match(r"v(\d+)\.", out.strip())
    return int(match.group(1)) if match else None


def _node() -> str:
    """The ``node`` executable on PATH, at least Node MIN_NODE.

    Raises:
        TargetError: no node, or one too old.
    """
    node = shutil.which("node")
    if node is None:
        raise TargetError(
            f"the Node adapters need Node.js {MIN_NODE} or later on PATH (no `node` found); "
            f"install it (e.g. apt-get install nodejs npm), then run: {INSTALL_COMMAND}"
        )
    major = _node_major(node)
    if major is None or major < MIN_NODE:
        found = "an unknown version" if major is None else f"Node {major}"
        raise TargetError(f"the Node adapters need Node.js {MIN_NODE} or later; {node} is {found}")
    return node


def ready_dir() -> Path:
    """The install directory, checked: Node present, ``npm ci`` done for the shipped
    lockfile. Adapter files edited since the install are refreshed (no network needed).

    Raises:
        TargetError: Node or the install is missing, saying the command to run.
    """
    _node()
    where = install_dir()
    stamp = where / STAMP
    hint = f"run: {INSTALL_COMMAND}"
    if os.environ.get(ENV_DIR):
        hint = f"run: {ENV_DIR}={where} {INSTALL_COMMAND}"
    if not stamp.is_file():
        raise TargetError(
            f"the Node client libraries are not installed in {where}; {hint} "
            "(copies the adapters there and runs npm ci from the shipped lockfile)"
        )
    if stamp.read_text().strip() != _lock_hash():
        raise TargetError(f"the Node install in {where} is from another package-lock.json; {hint}")
    for path in sorted(SOURCE.glob("*.mjs")):
        _copy_if_changed(path, where)
    return where


def install(target: Path | None = None, *, npm: str | None = None) -> Path:
    """Copy the package files to ``target`` (default ``install_dir()``) and run ``npm ci``.

    Raises:
        TargetError: Node or npm is missing.
        subprocess.CalledProcessError: npm ci failed (its output went to the terminal).
    """
    _node()
    npm = npm or shutil.which("npm")
    if npm is None:
        raise TargetError("npm is not on PATH; it comes with Node.js (apt-get install npm)")
    where = (target or install_dir()).expanduser()
    where.mkdir(parents=True, exist_ok=True)
    (where / STAMP).unlink(missing_ok=True)  # a failed npm ci leaves no stale stamp
    for path in _shipped_files():
        _copy_if_changed(path, where)
    subprocess.run(
        [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=where, check=True
    )
    (where / STAMP).write_text(_lock_hash() + "\n")
    return where


def _versions(where: Path) -> dict[str, str]:
    out = {}
    for spec in ADAPTERS.values():
        manifest = where / "node_modules" / spec.package / "package.json"
        try:
            out[spec.package] = str(json.loads(manifest.read_text())["version"])
        except (OSError, ValueError, KeyError):
            out[spec.package] = "missing"
    return out


def known_capabilities(spec: NodeAdapter) -> frozenset[Capability]:
    """The capabilities of ``spec``'s hello that this kit knows (it ignores the others)."""
    return frozenset(c for c in spec.capabilities if c in CAPABILITIES)


def _adapter(target: str) -> ExecAdapter:
    spec = ADAPTERS[target]
    where = ready_dir()
    adapter = ExecAdapter([_node(), str(where / spec.script)])
    # What its hello will say, until it says it (the handshake replaces it): the kit's
    # target loader checks the adapter's attributes, info included, before the start.
    versions = _versions(where)
    adapter.info = AdapterInfo(
        spec.name,
        versions[spec.package],
        known_capabilities(spec),
        spec.profile,
        spec.wire_format,
        api=ADAPTER_API,  # as the hello of protocol.mjs says
    )
    return adapter


def _preflight() -> None:
    ready_dir()


@with_preflight(_preflight)
def openai_adapter() -> ExecAdapter:
    """``node-openai``: openai-node's streaming chat completions (profile openai-node@1)."""
    return _adapter("node-openai")


@with_preflight(_preflight)
def anthropic_adapter() -> ExecAdapter:
    """``node-anthropic``: @anthropic-ai/sdk's streaming messages (anthropic-node@1)."""
    return _adapter("node-anthropic")


@with_preflight(_preflight)
def fetch_event_source_adapter() -> ExecAdapter:
    """``fetch-event-source``: @microsoft/fetch-event-source 2.0.1 (fetch-event-source@1)."""
    return _adapter("fetch-event-source")


@with_preflight(_preflight)
def eventsource_adapter() -> ExecAdapter:
    """``eventsource``: the eventsource npm package, GET only (eventsource-npm@1)."""
    return _adapter("eventsource")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m pytest_streamcheck.clients.node",
        description="Install the Node client libraries the shipped adapters drive.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("install", help="copy the adapters to the cache directory; npm ci")
    run.add_argument("--dir", type=Path, help=f"install here (default: ${ENV_DIR}, else the cache)")
    sub.add_parser("where", help="print the install directory and what is installed there")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            where = install(args.dir)
            print(f"installed in {where}")
            for package, version in _versions(where).items():
                print(f"  {package} {version}")
            if args.dir is not None and args.dir.expanduser() != install_dir():
                print(f"set {ENV_DIR}={where} for the targets to use it")
            return 0
        where = install_dir()
        print(where)
        for package, version in _versions(where).items():
            print(f"  {package} {version}")
        return 0
    except TargetError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except subprocess.CalledProcessError as exc:
        print(f"error: npm ci failed with code {exc.returncode}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
