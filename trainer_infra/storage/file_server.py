"""The team's read-only file service: lists the directories of the team claim and serves its regular files.

It runs in the team namespace with the claim mounted read-only and is reached only through the API server's service
proxy, where RBAC decides who asks (a member's `get` on `services/proxy`). What a member can put on the volume is
hostile input: a symlink to `/proc/self/environ`, `/etc` or anywhere else, a FIFO, a device node. So the path is
walked from the root one component at a time without following any symlink (`O_PATH | O_NOFOLLOW` relative to the
directory above), and `..` is refused before that: nothing outside the claim is ever opened, whatever the volume
holds, and no component can be swapped for a symlink between a check and the open. Only directories are listed and
only regular files served; every other method than GET and HEAD is refused.

Standard library only: the platform mounts this file into the pod from a ConfigMap and runs it with `python3`.
"""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import urllib.parse
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CHUNK = 1 << 20


class RefusedError(Exception):
    """A request this service does not answer: an HTTP status and the reason, for the member."""

    def __init__(self, status: HTTPStatus, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


def components(raw_path: str) -> list[str]:
    """The path's components, percent-decoded; `.` and empty ones dropped; `..` (or a decoded `/` or NUL inside a
    component) refused."""
    path = urllib.parse.urlsplit(raw_path).path
    out = []
    for part in path.split("/"):
        try:
            name = urllib.parse.unquote(part, errors="strict")
        except UnicodeDecodeError:
            raise RefusedError(HTTPStatus.BAD_REQUEST, f"{raw_path!r}: not UTF-8 once decoded") from None
        if name in ("", "."):
            continue
        if name == ".." or "/" in name or "\x00" in name:
            raise RefusedError(HTTPStatus.FORBIDDEN, f"{raw_path!r}: '..' and encoded separators are refused")
        out.append(name)
    return out


def _open_path(root_fd: int, names: list[str]) -> int:
    """An `O_PATH` descriptor of `names` below `root_fd`, no symlink followed at any step (the caller closes it)."""
    fd = os.dup(root_fd)
    try:
        for i, name in enumerate(names):
            where = "/" + "/".join(names[: i + 1])
            try:
                child = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except FileNotFoundError:
                raise RefusedError(HTTPStatus.NOT_FOUND, f"{where}: no such file or directory") from None
            except NotADirectoryError:
                raise RefusedError(HTTPStatus.NOT_FOUND, f"/{'/'.join(names[:i])}: not a directory") from None
            os.close(fd)
            fd = child
            mode = os.fstat(fd).st_mode
            if stat.S_ISLNK(mode):
                raise RefusedError(HTTPStatus.FORBIDDEN, f"{where} is a symlink: symlinks are not followed")
            if i < len(names) - 1 and not stat.S_ISDIR(mode):
                raise RefusedError(HTTPStatus.NOT_FOUND, f"{where}: not a directory")
    except BaseException:
        os.close(fd)
        raise
    return fd


def _reopen(fd: int, flags: int) -> int:
    """A readable descriptor of the very file `fd` (an `O_PATH` one) names: through `/proc/self/fd`, which does not
    resolve the path again."""
    return os.open(f"/proc/self/fd/{fd}", flags | os.O_CLOEXEC)


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def listing(dir_fd: int, names: list[str]) -> dict[str, object]:
    """A directory as JSON: each entry's name, kind (a symlink is listed as one, never followed) and size."""
    readable = _reopen(dir_fd, os.O_RDONLY | os.O_DIRECTORY)
    try:
        entries = []
        for name in sorted(os.listdir(readable)):
            try:
                st = os.stat(name, dir_fd=readable, follow_symlinks=False)
            except FileNotFoundError:
                continue
            kind = _kind(st.st_mode)
            entry: dict[str, object] = {"name": name, "type": kind}
            if kind == "file":
                entry["size"] = st.st_size
            entries.append(entry)
    finally:
        os.close(readable)
    return {"path": "/" + "".join(f"{n}/" for n in names), "entries": entries}


class Handler(BaseHTTPRequestHandler):
    server_version = "trainer-platform-files"
    root_fd: int = -1

    def _send(self, status: HTTPStatus, body: bytes, content_type: str, head: bool) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def _answer(self, head: bool) -> None:
        try:
            names = components(self.path)
            fd = _open_path(self.root_fd, names)
        except RefusedError as refused:
            self._send(refused.status, (refused.reason + "\n").encode(), "text/plain; charset=utf-8", head)
            return
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                body = (json.dumps(listing(fd, names), indent=1) + "\n").encode()
                self._send(HTTPStatus.OK, body, "application/json", head)
            elif stat.S_ISREG(mode):
                self._file(fd, head)
            else:
                reason = f"/{'/'.join(names)} is not a regular file or a directory: refused\n"
                self._send(HTTPStatus.FORBIDDEN, reason.encode(), "text/plain; charset=utf-8", head)
        finally:
            os.close(fd)

    def _file(self, fd: int, head: bool) -> None:
        readable = _reopen(fd, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(readable, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):  # the descriptor names the same inode: never true, checked anyway
                self._send(HTTPStatus.FORBIDDEN, b"not a regular file\n", "text/plain; charset=utf-8", head)
                return
            self.send_response(HTTPStatus.OK)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(st.st_size))
            self.end_headers()
            if head:
                return
            left = st.st_size
            while left > 0:
                chunk = f.read(min(CHUNK, left))
                if not chunk:
                    break
                self.wfile.write(chunk)
                left -= len(chunk)

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _read_only(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        body = b"read-only: only GET and HEAD\n"
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_OPTIONS = _read_only  # noqa: N815


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", required=True, help="the claim's mount path (read-only)")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    Handler.root_fd = os.open(args.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    server = ThreadingHTTPServer(("", args.port), Handler)
    print(f"serving {args.root} read-only on port {args.port}", file=sys.stderr, flush=True)
    server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
