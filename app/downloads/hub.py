"""The Hugging Face Hub through ``huggingface_hub``'s ``HfApi``: search and a repository's models.

Every call here waits on the network, so none may run on the UI thread. Every failure becomes
a :class:`DownloadError` with a sentence; an unreachable Hub says so and nothing else breaks.

``HF_ENDPOINT`` (a mirror) is read when a :class:`Hub` is made, not when ``huggingface_hub``
is imported (it reads it once, then), so a changed variable counts from the next search.
Proxies come from ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY``: ``huggingface_hub``'s client and
the downloader's both trust the environment.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, TypeVar
from urllib.parse import quote

import httpx
import httpx2
from huggingface_hub import HfApi
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    OfflineModeIsEnabled,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.hf_api import ModelInfo, RepoFile

from app.downloads.errors import DownloadError
from app.downloads.files import HubFile, ModelChoice, model_choices, safe_repo_id
from app.sentence import QT_TRANSLATE_NOOP
from app.store.secrets import load_api_key, save_api_key

DEFAULT_ENDPOINT = "https://huggingface.co"
ENDPOINT_VARIABLE = "HF_ENDPOINT"
TOKEN_VARIABLE = "HF_TOKEN"

PAGE_SIZE = 20
"""Repositories shown per page of search results."""

SEARCH_LIMIT = 200
"""Results asked of one search (the Hub sends them in pages, fetched as they are shown)."""

PROBE_TIMEOUT_S = 8.0
"""Seconds to wait for the Hub to answer at all, before saying it cannot be reached."""

Sort = Literal["downloads", "likes", "last_modified"]

USER_AGENT = "floodgate/0.1"

T = TypeVar("T")


def hub_endpoint() -> str:
    """The Hub's address: ``$HF_ENDPOINT`` (a mirror) or huggingface.co, read now."""
    return (os.environ.get(ENDPOINT_VARIABLE) or DEFAULT_ENDPOINT).rstrip("/")


def resolve_url(endpoint: str, repo_id: str, revision: str, path: str) -> str:
    """The address of a file of a repository at one revision (what the Hub serves it at)."""
    return f"{endpoint}/{repo_id}/resolve/{quote(revision, safe='')}/{quote(path)}"


def _token_key(endpoint: str) -> str:
    return f"hub token {endpoint}"


def load_token(endpoint: str) -> str | None:
    """The access token kept in the keyring for ``endpoint``, if any (may wait on the keyring)."""
    return load_api_key(_token_key(endpoint))


def save_token(endpoint: str, token: str) -> bool:
    """Keep ``token`` for ``endpoint`` in the keyring ("" forgets it); whether a keyring took it."""
    return save_api_key(_token_key(endpoint), token)


@dataclass(frozen=True)
class RepoSummary:
    """One search result: a repository and what the Hub says of it."""

    repo_id: str
    downloads: int
    likes: int
    last_modified: datetime | None
    gated: bool


@dataclass(frozen=True)
class RepoListing:
    """A repository's models and the facts shown beside them.

    Attributes:
        repo_id: owner/name.
        revision: the commit the files were listed at (downloads ask for exactly it).
        license: the model card's licence ("" when it names none).
        gated: whether the Hub asks people to accept terms before downloading.
        choices: its GGUF models, smallest first.
    """

    repo_id: str
    revision: str
    license: str
    gated: bool
    choices: list[ModelChoice]


def unreachable(endpoint: str, reason: object) -> DownloadError:
    """The sentence for a Hub that does not answer."""
    return DownloadError(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "The Hugging Face Hub at {endpoint} cannot be reached ({reason}). Models already "
            "on this computer keep working.",
        ),
        endpoint=endpoint,
        reason=reason,
    )


def refused(endpoint: str, repo_id: str, status: int) -> DownloadError:
    """The sentence for a gated or private repository that refused this account (401/403)."""
    return DownloadError(
        QT_TRANSLATE_NOOP(
            "Floodgate",
            "The Hub refused access to {repo} (HTTP {status}): it is gated or private. Open "
            "{endpoint}/{repo} in a browser, sign in and accept its terms, then create an "
            "access token at {endpoint}/settings/tokens and give it to Floodgate.",
        ),
        repo=repo_id,
        status=status,
        endpoint=endpoint,
    )


def _is_gated(value: object) -> bool:
    # The Hub says False, "auto" or "manual".
    return bool(value) and value != "False"


def _summary(info: ModelInfo) -> RepoSummary:
    return RepoSummary(
        repo_id=info.id,
        downloads=int(info.downloads or 0),
        likes=int(info.likes or 0),
        last_modified=info.last_modified,
        gated=_is_gated(info.gated),
    )


def _license(info: ModelInfo) -> str:
    card = info.card_data
    value = card.get("license") if card is not None else None
    if isinstance(value, str) and value:
        return value
    for tag in info.tags or []:
        if tag.startswith("license:"):
            return tag.removeprefix("license:")
    return ""


class ModelSearch:
    """One search's results, a page at a time: the Hub is asked for more only when needed."""

    def __init__(self, results: Iterator[ModelInfo], hub: Hub) -> None:
        self._results = results
        self._hub = hub
        self.exhausted = False

    def next_page(self, size: int = PAGE_SIZE) -> list[RepoSummary]:
        """The next ``size`` results (fewer at the end); waits on the network.

        Raises:
            DownloadError: the Hub cannot be reached or refused the search.
        """
        page = self._hub.call(lambda: list(itertools.islice(self._results, size)), "")
        if len(page) < size:
            self.exhausted = True
        return [_summary(info) for info in page if safe_repo_id(info.id)]


SEES_TASK = "image-text-to-text"
"""The Hub's task (``pipeline_tag``) of models that read pictures and answer in text."""


class Hub:
    """The Hub (or a mirror), with the token kept for it if there is one.

    Args:
        endpoint: the Hub's address; ``$HF_ENDPOINT`` or huggingface.co when None.
        token: an access token; the keyring's for this endpoint when None.
    """

    def __init__(self, endpoint: str | None = None, token: str | None = None) -> None:
        self.endpoint = (endpoint or hub_endpoint()).rstrip("/")
        self.token = token if token is not None else load_token(self.endpoint)
        self.api = HfApi(endpoint=self.endpoint, token=self.token or None, library_name="floodgate")

    def headers(self) -> dict[str, str]:
        """What a download sends: the token when there is one."""
        headers = {"User-Agent": USER_AGENT}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        return headers

    def file_url(self, repo_id: str, revision: str, path: str) -> str:
        """Where a file of a repository is downloaded from, at one commit."""
        return resolve_url(self.endpoint, repo_id, revision, path)

    def probe(self) -> None:
        """Raise :class:`DownloadError` unless the Hub answers at all, within seconds.

        ``huggingface_hub`` retries a connection that fails five times with growing pauses
        (about 25 s) before giving up; a machine without network should hear it at once.
        """
        try:
            with httpx.Client(trust_env=True, timeout=PROBE_TIMEOUT_S) as client:
                client.head(self.endpoint, headers={"User-Agent": USER_AGENT})
        except httpx.HTTPError as exc:
            raise unreachable(self.endpoint, type(exc).__name__) from exc

    def call(self, work: Callable[[], T], repo_id: str) -> T:
        """Run ``work`` (an ``HfApi`` call about ``repo_id``), its failures as sentences."""
        try:
            return work()
        except GatedRepoError as exc:
            raise refused(self.endpoint, repo_id, _status(exc)) from exc
        except RepositoryNotFoundError as exc:
            status = _status(exc)
            if status in (401, 403):
                raise refused(self.endpoint, repo_id, status) from exc
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The Hub has no repository {repo}."),
                repo=repo_id,
            ) from exc
        except RevisionNotFoundError as exc:
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The Hub has no such version of {repo}."),
                repo=repo_id,
            ) from exc
        except HfHubHTTPError as exc:
            raise DownloadError(
                QT_TRANSLATE_NOOP("Floodgate", "The Hub answered with an error: HTTP {status}."),
                status=_status(exc),
            ) from exc
        except (httpx2.HTTPError, OfflineModeIsEnabled, OSError) as exc:
            raise unreachable(self.endpoint, type(exc).__name__) from exc
        except ValueError as exc:  # an answer that is not what the Hub sends
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "The Hub at {endpoint} sent an answer Floodgate cannot read."
                ),
                endpoint=self.endpoint,
            ) from exc

    def search(self, text: str, sort: Sort = "downloads", *, sees: bool = False) -> ModelSearch:
        """Repositories with GGUF files matching ``text``, sorted by ``sort`` (most first).

        The results come a page at a time from :meth:`ModelSearch.next_page`. ``sees``: only
        models that read pictures (the Hub's ``image-text-to-text`` task).

        Raises:
            DownloadError: the Hub cannot be reached.
        """
        self.probe()
        results = self.api.list_models(
            filter="gguf",
            search=text.strip() or None,
            pipeline_tag=SEES_TASK if sees else None,
            sort=sort,
            limit=SEARCH_LIMIT,
            expand=["downloads", "likes", "lastModified", "gated"],
        )
        return ModelSearch(iter(results), self)

    def repository(self, repo_id: str) -> RepoListing:
        """A repository's GGUF models, licence and gated state.

        Raises:
            DownloadError: the name is not a repository's, the Hub cannot be reached, has no
                such repository, or refuses access.
        """
        if not safe_repo_id(repo_id):
            raise DownloadError(
                QT_TRANSLATE_NOOP(
                    "Floodgate", "{repo} is not a repository name (owner/name) on the Hub."
                ),
                repo=repo_id,
            )
        self.probe()
        info = self.call(
            lambda: self.api.model_info(
                repo_id, expand=["sha", "gated", "cardData", "tags", "downloads", "likes"]
            ),
            repo_id,
        )
        revision = info.sha or "main"
        entries = self.call(
            lambda: list(self.api.list_repo_tree(repo_id, recursive=True, revision=revision)),
            repo_id,
        )
        files = [
            HubFile(e.path, int(e.size), e.lfs.sha256 if e.lfs is not None else None)
            for e in entries
            if isinstance(e, RepoFile)
        ]
        return RepoListing(
            repo_id=repo_id,
            revision=revision,
            license=_license(info),
            gated=_is_gated(info.gated),
            choices=model_choices(files),
        )


def _status(exc: HfHubHTTPError) -> int:
    response = exc.response
    return response.status_code if response is not None else 0
