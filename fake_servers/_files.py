"""A user's files and paths: read within a limit, and shown without hiding anything.

Every loader of a file a user names (a scenario, a profile, a known-failures list)
reads it with ``read_text_limited``. A stat's size proves nothing: it is 0 for a
device (``/dev/zero`` never ends) and for many files of ``/proc``, and opening a FIFO
with no writer blocks. So the file is opened without blocking, refused unless it is
a regular file, and read up to its limit and no further.

Every message that echoes a user's path or text shows it through ``printable``: a
NUL, a terminal escape or a right-to-left override (U+202E) in a path would
otherwise be written raw to the terminal, hiding or reordering what it says.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "FileRefused",
    "check_output_path",
    "check_regular_file",
    "printable",
    "read_bytes_limited",
    "read_text_limited",
    "shown_path",
]

_CHUNK = 64 * 1024  # a read past the limit costs one chunk more at most
_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC  # a FIFO must not block
_KINDS: tuple[tuple[Callable[[int], bool], str], ...] = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class FileRefused(ValueError):
    """A user's file or path the kit will not use. The message says why without the
    path: each caller places it in an error of its own (a ScenarioError's ``file``)."""


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped as ``repr`` does
    (``\\x00``, ``\\x1b``, ``\\u202e``, ``\\udcff`` for an undecodable byte)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def shown_path(path: str | os.PathLike[str]) -> str:
    """A user's path as a message shows it (``printable``)."""
    return printable(os.fspath(path))


def _kind(mode: int) -> str | None:
    """What a file that is not a regular one is, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _not_regular(mode: int) -> FileRefused | None:
    kind = _kind(mode)
    return None if kind is None else FileRefused(f"is {kind}, not a regular file")


def _os_problem(error: OSError) -> FileRefused:
    return FileRefused(f"cannot read the file: {error.strerror or error}")


_NUL = FileRefused("cannot read the file: its path holds a NUL character")


def check_regular_file(path: str | os.PathLike[str]) -> None:
    """Refuse a path that is missing or not a regular file, without opening it.

    Raises:
        FileRefused: the path cannot be read, or names a device, FIFO or directory.
    """
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise _os_problem(error) from None
    except ValueError:  # an embedded NUL
        raise _NUL from None
    refused = _not_regular(mode)
    if refused is not None:
        raise refused


def read_text_limited(path: str | os.PathLike[str], limit: int, unit: str) -> str:
    """The UTF-8 text of the regular file ``path``, at most ``limit`` bytes.

    Args:
        unit: what the limit counts, as its message says it: ``bytes per profile file``.

    Raises:
        FileRefused: the file cannot be opened, is not a regular file, holds more
            than ``limit`` bytes, or is not UTF-8.
    """
    data = read_bytes_limited(path, limit, unit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileRefused(f"not UTF-8 text (an invalid byte at offset {error.start})") from None


def read_bytes_limited(path: str | os.PathLike[str], limit: int, unit: str) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them (as
    ``read_text_limited``, without decoding).

    Raises:
        FileRefused: the file cannot be opened, is not a regular file, or holds more
            than ``limit`` bytes.
    """
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as error:
        raise _os_problem(error) from None
    except ValueError:
        raise _NUL from None
    try:
        return _read_fd(fd, limit, unit)
    except OSError as error:
        raise _os_problem(error) from None
    finally:
        os.close(fd)


def _read_fd(fd: int, limit: int, unit: str) -> bytes:
    status = os.fstat(fd)  # the file opened, not whatever the path names by now
    refused = _not_regular(status.st_mode)
    if refused is not None:
        raise refused
    if status.st_size > limit:  # refused unread
        raise FileRefused(f"{status.st_size} is over the limit of {limit} {unit}")
    chunks: list[bytes] = []
    total = 0
    while total <= limit:  # the size said nothing of /proc's files: the read is the bound
        chunk = os.read(fd, _CHUNK)  # whole chunks: some /proc files refuse odd reads
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
    raise FileRefused(f"holds more than the limit of {limit} {unit}")


def check_output_path(path: Path, *, directory: bool = False) -> None:
    """Refuse, before a run, a path its output could not be written to at its end.

    The path must not exist as the wrong kind: a directory, FIFO or socket for a
    file's output (a character device such as /dev/null is fine), anything but a
    directory for a directory's. Its closest existing parent must be a writable
    directory: the writers create the missing folders between.

    Raises:
        FileRefused: why the output could not be written there.
    """
    if "\0" in str(path):
        raise FileRefused("its path holds a NUL character")
    _check_target(path, directory)
    _check_parent(path)


def _check_target(path: Path, directory: bool) -> None:
    try:
        mode = path.stat().st_mode
    except (FileNotFoundError, NotADirectoryError):
        return  # not there yet (a file in its way is the parent's check)
    except OSError as error:
        raise FileRefused(f"cannot use the path: {error.strerror or error}") from None
    if directory and not stat.S_ISDIR(mode):
        raise FileRefused(f"already exists and is {_kind(mode) or 'a file'}, not a directory")
    if not directory and not (stat.S_ISREG(mode) or stat.S_ISCHR(mode)):
        # a directory cannot be replaced; a FIFO with no reader would block the run's end
        raise FileRefused(f"already exists and is {_kind(mode)}, not a file it can write")
    if not os.access(path, os.W_OK):
        raise FileRefused("already exists and is not writable")


def _check_parent(path: Path) -> None:
    for parent in path.parents:
        try:
            mode = parent.stat().st_mode
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing: made when the output is written; a file above is found next
        except OSError as error:
            problem = error.strerror or error
            raise FileRefused(f"cannot use the folder {shown_path(parent)}: {problem}") from None
        if not stat.S_ISDIR(mode):
            kind = _kind(mode) or "a file"
            raise FileRefused(f"{shown_path(parent)} is {kind}, not a folder to write in")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise FileRefused(f"the folder {shown_path(parent)} is not writable")
        return
