"""A small Hugging Face Hub on 127.0.0.1, for the tests and the bench (the real one is never asked).

It answers what ``huggingface_hub`` and Floodgate's downloader ask, the way the Hub does:
``/api/models`` (search, sort, pages linked by a ``Link`` header), a repository's info and its
file tree (sizes, LFS sha256, paged the same way), and ``HEAD``/``GET`` on
``/{repo}/resolve/{revision}/{file}`` with ``ETag``, ``X-Repo-Commit``, ``Content-Length``
and ranges (206). Gated repositories refuse requests without their token (401, with the
Hub's ``X-Error-Code``). :class:`Faults` makes it misbehave on purpose: ignore ranges, drop
the connection or stall mid-file, send wrong bytes, or send slowly. It also answers as an
HTTP proxy would (an absolute address in the request line), so a test can name it in
``HTTP_PROXY`` with an endpoint that resolves nowhere.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

_CHUNK = 64 * 1024


def gguf_bytes(metadata: dict[str, int | str | list[int]], size: int = 0) -> bytes:
    """A GGUF file (version 3, no tensors) holding ``metadata``, padded to ``size`` bytes."""

    def text(s: str) -> bytes:
        raw = s.encode()
        return struct.pack("<Q", len(raw)) + raw

    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(metadata)))
    for key, value in metadata.items():
        out += text(key)
        if isinstance(value, str):
            out += struct.pack("<I", 8) + text(value)
        elif isinstance(value, list):
            out += struct.pack("<IIQ", 9, 4, len(value))
            out += b"".join(struct.pack("<I", v) for v in value)
        else:
            out += struct.pack("<II", 4, value)
    if len(out) < size:
        # Not zeros: a wrong offset on resume must change the sha256.
        pattern = bytes(range(251))
        filler = pattern * ((size - len(out)) // len(pattern) + 1)
        out += filler[: size - len(out)]
    return bytes(out)


@dataclass
class FakeFile:
    """A file in a fake repository: bytes in memory, or a file on disk (served with sendfile)."""

    data: bytes | None = None
    source: Path | None = None
    size: int = 0
    sha256: str = ""

    def __post_init__(self) -> None:
        if self.data is not None:
            self.size = len(self.data)
            self.sha256 = hashlib.sha256(self.data).hexdigest()
        elif self.source is not None:
            self.size = self.source.stat().st_size
            hasher = hashlib.sha256()
            with self.source.open("rb") as f:
                while block := f.read(1 << 20):
                    hasher.update(block)
            self.sha256 = hasher.hexdigest()

    def read(self, start: int, end: int) -> bytes:
        """Bytes ``start`` to ``end`` (exclusive)."""
        if self.data is not None:
            return self.data[start:end]
        assert self.source is not None
        with self.source.open("rb") as f:
            f.seek(start)
            return f.read(end - start)


@dataclass
class FakeRepo:
    """A repository of the fake Hub."""

    repo_id: str
    files: dict[str, FakeFile]
    sha: str = ""
    gated: bool = False
    token: str = ""
    license: str = "apache-2.0"
    downloads: int = 0
    likes: int = 0
    last_modified: str = "2025-01-01T00:00:00.000Z"
    listed_sizes: dict[str, int] = field(default_factory=dict)
    """Sizes the tree lists instead of the real ones (a Hub that lies)."""
    pipeline_tag: str = "text-generation"
    """The model's task, as the Hub tags it (``image-text-to-text``: it sees)."""

    def __post_init__(self) -> None:
        if not self.sha:
            self.sha = hashlib.sha1(self.repo_id.encode()).hexdigest()


@dataclass
class Faults:
    """Ways the fake Hub misbehaves on ``resolve`` requests (each counted down as used).

    Attributes:
        ignore_ranges: answer every range request with the whole file (200).
        drop_after: close the connection on reaching this byte of a file, ``drops`` times.
        stall_after: stop sending for ``stall_seconds`` on reaching this byte of a file,
            ``stalls`` times.
        wrong_bytes: paths served with one byte changed.
        rate: bytes a second at most (None: as fast as it goes).
    """

    ignore_ranges: bool = False
    drop_after: int | None = None
    drops: int = 1
    stall_after: int | None = None
    stall_seconds: float = 0.0
    stalls: int = 1
    wrong_bytes: set[str] = field(default_factory=set)
    rate: float | None = None


@dataclass(frozen=True)
class Request:
    """One request the fake Hub received."""

    method: str
    path: str
    range: str | None
    authorized: bool
    proxied: bool = False
    """Asked as a proxy is asked (an absolute address in the request line)."""


class _HubServer(ThreadingHTTPServer):
    """The server, quiet about clients that leave mid-request.

    Downloads are dropped, paused and cancelled on purpose in the tests and the bench; the
    standard server prints each such reset to stderr as if it were a fault of its own.
    """

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class FakeHub:
    """The fake Hub; ``with FakeHub() as hub:`` serves it at ``hub.url`` on a thread.

    Args:
        page_size: the most results per page of a listing (the Hub's is 1000).
    """

    def __init__(self, page_size: int = 1000) -> None:
        self.page_size = page_size
        self.repos: dict[str, FakeRepo] = {}
        self.faults = Faults()
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        self._server = _HubServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._server.hub = self  # type: ignore[attr-defined]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The Hub's address (``HF_ENDPOINT``)."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, repo: FakeRepo) -> FakeRepo:
        """Serve ``repo``."""
        self.repos[repo.repo_id] = repo
        return repo

    def start(self) -> FakeHub:
        """Serve on a daemon thread."""
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="fake hub", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def log(self, request: Request) -> None:
        """Keep ``request`` in :attr:`requests`."""
        with self._lock:
            self.requests.append(request)

    def take_fault(self, name: str) -> bool:
        """Use one of a counted fault (``drops``, ``stalls``); whether one was left."""
        with self._lock:
            left = getattr(self.faults, name)
            if left <= 0:
                return False
            setattr(self.faults, name, left - 1)
            return True


_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_API_REPO = re.compile(r"^/api/models/([^/]+/[^/]+?)(?:/revision/([^/]+))?$")
_API_TREE = re.compile(r"^/api/models/([^/]+/[^/]+)/tree/([^/]+)$")


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ThreadingHTTPServer

    @property
    def hub(self) -> FakeHub:
        hub: FakeHub = self.server.hub  # type: ignore[attr-defined]
        return hub

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: tests read :attr:`FakeHub.requests` instead."""

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    # Routing.

    def _answer(self, head: bool) -> None:
        split = urlsplit(self.path)
        path = unquote(split.path)
        query = parse_qs(split.query)
        authorization = self.headers.get("Authorization", "")
        proxied = bool(split.scheme)  # an absolute address: asked as a proxy
        self.hub.log(
            Request(self.command, path, self.headers.get("Range"), bool(authorization), proxied)
        )
        try:
            if path == "/" or path == "":
                self._json(200, {"hub": "fake"}, head=head)
            elif path == "/api/models":
                self._search(query, head)
            elif match := _API_TREE.match(path):
                self._tree(match[1], match[2], query, authorization, head)
            elif match := _API_REPO.match(path):
                self._info(match[1], authorization, head)
            elif match := _RESOLVE.match(path):
                self._resolve(match[1], match[2], match[3], authorization, head)
            else:
                self._json(404, {"error": "Not found"}, head=head)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _repo(self, repo_id: str, authorization: str, head: bool) -> FakeRepo | None:
        repo = self.hub.repos.get(repo_id)
        if repo is None:
            self._json(404, {"error": "Repository not found"}, head=head, code="RepoNotFound")
        return repo

    def _allowed(self, repo: FakeRepo, authorization: str) -> bool:
        return not repo.gated or authorization == f"Bearer {repo.token}"

    # The API.

    def _search(self, query: dict[str, list[str]], head: bool) -> None:
        text = (query.get("search") or [""])[0].lower()
        sort = (query.get("sort") or ["downloads"])[0]
        limit = int((query.get("limit") or [str(self.hub.page_size)])[0])
        cursor = int((query.get("cursor") or ["0"])[0])
        task = (query.get("pipeline_tag") or [""])[0]
        repos = [
            r
            for r in self.hub.repos.values()
            if text in r.repo_id.lower() and (not task or r.pipeline_tag == task)
        ]
        key = {"likes": "likes", "lastModified": "last_modified"}.get(sort, "downloads")
        repos.sort(key=lambda r: getattr(r, key), reverse=True)
        size = min(limit, self.hub.page_size)
        page = repos[cursor : cursor + size]
        items = [
            {
                "id": r.repo_id,
                "downloads": r.downloads,
                "likes": r.likes,
                "lastModified": r.last_modified,
                "gated": "manual" if r.gated else False,
                "tags": ["gguf", f"license:{r.license}"],
                "pipeline_tag": r.pipeline_tag,
            }
            for r in page
        ]
        link = None
        if cursor + size < len(repos):
            params = {k: v for k, v in query.items() if k != "cursor"}
            params["cursor"] = [str(cursor + size)]
            link = f'<{self.hub.url}/api/models?{urlencode(params, doseq=True)}>; rel="next"'
        self._json(200, items, head=head, link=link)

    def _info(self, repo_id: str, authorization: str, head: bool) -> None:
        repo = self._repo(repo_id, authorization, head)
        if repo is None:
            return
        self._json(
            200,
            {
                "id": repo.repo_id,
                "sha": repo.sha,
                "gated": "manual" if repo.gated else False,
                "private": False,
                "downloads": repo.downloads,
                "likes": repo.likes,
                "lastModified": repo.last_modified,
                "tags": ["gguf", f"license:{repo.license}"],
                "cardData": {"license": repo.license},
                "siblings": [{"rfilename": p} for p in repo.files],
            },
            head=head,
        )

    def _tree(
        self,
        repo_id: str,
        revision: str,
        query: dict[str, list[str]],
        authorization: str,
        head: bool,
    ) -> None:
        repo = self._repo(repo_id, authorization, head)
        if repo is None:
            return
        cursor = int((query.get("cursor") or ["0"])[0])
        entries = []
        for path, file in sorted(repo.files.items()):
            size = repo.listed_sizes.get(path, file.size)
            entries.append(
                {
                    "type": "file",
                    "oid": hashlib.sha1(file.sha256.encode()).hexdigest(),
                    "size": size,
                    "path": path,
                    "lfs": {"oid": file.sha256, "size": size, "pointerSize": 134},
                }
            )
        page = entries[cursor : cursor + self.hub.page_size]
        link = None
        if cursor + self.hub.page_size < len(entries):
            params = {k: v for k, v in query.items() if k != "cursor"}
            params["cursor"] = [str(cursor + self.hub.page_size)]
            url = f"{self.hub.url}/api/models/{repo_id}/tree/{quote(revision)}"
            link = f'<{url}?{urlencode(params, doseq=True)}>; rel="next"'
        self._json(200, page, head=head, link=link)

    # Files.

    def _resolve(
        self, repo_id: str, revision: str, path: str, authorization: str, head: bool
    ) -> None:
        repo = self._repo(repo_id, authorization, head)
        if repo is None:
            return
        if not self._allowed(repo, authorization):
            self._json(
                401,
                {"error": f"Access to model {repo_id} is restricted."},
                head=head,
                code="GatedRepo",
            )
            return
        file = repo.files.get(path)
        if file is None or revision not in (repo.sha, "main"):
            self._json(404, {"error": "Entry not found"}, head=head, code="EntryNotFound")
            return
        faults = self.hub.faults
        start, end, status = 0, file.size, 200
        wanted = self.headers.get("Range")
        if wanted and not faults.ignore_ranges:
            match = re.match(r"^bytes=(\d+)-(\d*)$", wanted)
            if match is None or int(match[1]) >= file.size:
                self._json(416, {"error": "Range Not Satisfiable"}, head=head)
                return
            start = int(match[1])
            end = min(file.size, int(match[2]) + 1) if match[2] else file.size
            status = 206
        self.send_response(status)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(end - start))
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("ETag", f'"{file.sha256}"')
        self.send_header("X-Repo-Commit", repo.sha)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{end - 1}/{file.size}")
        self.end_headers()
        if not head:
            self._body(file, path, start, end)

    def _body(self, file: FakeFile, path: str, start: int, end: int) -> None:
        faults = self.hub.faults
        plain = (
            file.source is not None
            and faults.drop_after is None
            and faults.stall_after is None
            and faults.rate is None
            and path not in faults.wrong_bytes
        )
        if plain:
            assert file.source is not None
            with file.source.open("rb") as f:
                self.wfile.flush()
                offset = start
                while offset < end:
                    sent = os.sendfile(self.connection.fileno(), f.fileno(), offset, end - offset)
                    if sent == 0:
                        break
                    offset += sent
            return
        sent = 0
        began = time.monotonic()
        for offset, chunk in self._chunks(file, start, end):
            if path in faults.wrong_bytes and offset <= file.size // 2 < offset + len(chunk):
                i = file.size // 2 - offset
                chunk = chunk[:i] + bytes([chunk[i] ^ 0xFF]) + chunk[i + 1 :]
            drop, stall = faults.drop_after, faults.stall_after
            end_of_chunk = offset + len(chunk)
            if drop is not None and end_of_chunk > drop and self.hub.take_fault("drops"):
                self.wfile.write(chunk[: max(0, drop - offset)])
                self.wfile.flush()
                self.close_connection = True
                return
            if stall is not None and end_of_chunk > stall and self.hub.take_fault("stalls"):
                self.wfile.write(chunk[: max(0, stall - offset)])
                self.wfile.flush()
                time.sleep(faults.stall_seconds)
                self.close_connection = True
                return
            self.wfile.write(chunk)
            sent += len(chunk)
            if faults.rate:
                ahead = sent / faults.rate - (time.monotonic() - began)
                if ahead > 0:
                    time.sleep(ahead)

    @staticmethod
    def _chunks(file: FakeFile, start: int, end: int) -> Iterator[tuple[int, bytes]]:
        for offset in range(start, end, _CHUNK):
            yield offset, file.read(offset, min(end, offset + _CHUNK))

    def _json(
        self,
        status: int,
        body: object,
        *,
        head: bool,
        link: str | None = None,
        code: str | None = None,
    ) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        if link:
            self.send_header("Link", link)
        if code:
            self.send_header("X-Error-Code", code)
        self.end_headers()
        if not head:
            self.wfile.write(data)
