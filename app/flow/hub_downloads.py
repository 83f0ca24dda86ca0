"""The window's side of the Hub: searches, a repository's models and the downloads, off its thread.

Every network and disk step runs on a thread (``asyncio.to_thread`` for searches and
listings, the download queue's own thread for transfers); the window gets ready-to-show
rows: sizes, speeds and sentences already in words, in its language. The queue reports on
its thread; the report crosses to the UI thread through a queued signal to a slot here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import httpx
from PySide6.QtCore import QObject, Signal, Slot

from app.downloads.download_queue import DownloadQueue, DownloadStatus, State
from app.downloads.download_record import waiting_downloads
from app.downloads.errors import DownloadError
from app.downloads.estimate import Assessment, Fit, assess, machine_memory
from app.downloads.files import ModelChoice, size_text
from app.downloads.hub import Hub, ModelSearch, RepoListing, RepoSummary, save_token
from app.downloads.hub import Sort as Sort  # the window names the orders by it
from app.downloads.transfer import RemoteFile, remote_files
from app.flow.words import say, say_sentence
from app.sentence import QT_TRANSLATE_NOOP


class HubError(Exception):
    """A search, listing or download could not start; ``str(error)`` is translated."""


@dataclass(frozen=True)
class RepoRow:
    """One search result, in words."""

    repo_id: str
    downloads: int
    likes: int
    updated: str
    gated: bool


@dataclass(frozen=True)
class ChoiceRow:
    """One model of a repository, in words.

    Attributes:
        label: its file name (the first part's, for a split model).
        quantization: Q4_K_M, …
        size: its size in words.
        need: the memory it needs at the chosen context, in words.
        fit: "fits", "tight" or "too large" (translated).
        fit_key: the same as a :class:`Fit` value (for colours and tests).
        recommended: the one recommended for this machine.
        parts: how many files it comes in.
        projector: the projector that comes with it, its name and size in words ("": none).
    """

    label: str
    quantization: str
    size: str
    need: str
    fit: str
    fit_key: str
    recommended: bool
    parts: int
    projector: str = ""


@dataclass(frozen=True)
class RepoView:
    """A repository as the library shows it."""

    repo_id: str
    license: str
    gated: bool
    choices: list[ChoiceRow]
    note: str
    """Why the memory counts weights only (the header could not be read), or ""."""


@dataclass(frozen=True)
class DownloadRow:
    """A download as the library and the status line show it.

    Attributes:
        id: the queue's number for it.
        label: the model's file name.
        state: a :class:`State` value.
        fraction: done over total, 0 to 1.
        progress: bytes, speed and time left in words.
        sentence: why it failed or stopped ("" otherwise).
        path: the model to open, once done.
    """

    id: int
    label: str
    state: str
    fraction: float
    progress: str
    sentence: str
    path: Path | None

    @property
    def can_pause(self) -> bool:
        """Whether Pause applies."""
        return self.state in (State.QUEUED.value, State.DOWNLOADING.value)

    @property
    def can_resume(self) -> bool:
        """Whether Resume applies."""
        return self.state in (State.PAUSED.value, State.FAILED.value)

    @property
    def can_cancel(self) -> bool:
        """Whether Cancel applies."""
        return self.state not in (State.DONE.value, State.CANCELLED.value)


_FIT_WORDS = {
    Fit.GPU: QT_TRANSLATE_NOOP("Floodgate", "fits the GPU"),
    Fit.FITS: QT_TRANSLATE_NOOP("Floodgate", "fits"),
    Fit.TIGHT: QT_TRANSLATE_NOOP("Floodgate", "tight"),
    Fit.TOO_LARGE: QT_TRANSLATE_NOOP("Floodgate", "too large"),
}

_STATE_WORDS = {
    State.QUEUED: QT_TRANSLATE_NOOP("Floodgate", "Waiting"),
    State.DOWNLOADING: QT_TRANSLATE_NOOP("Floodgate", "Downloading"),
    State.PAUSED: QT_TRANSLATE_NOOP("Floodgate", "Paused"),
    State.DONE: QT_TRANSLATE_NOOP("Floodgate", "Downloaded"),
    State.FAILED: QT_TRANSLATE_NOOP("Floodgate", "Stopped"),
    State.CANCELLED: QT_TRANSLATE_NOOP("Floodgate", "Cancelled"),
}


def _duration(seconds: float) -> str:
    if seconds < 90:
        return say(QT_TRANSLATE_NOOP("Floodgate", "{n} s left"), n=max(1, round(seconds)))
    if seconds < 90 * 60:
        return say(QT_TRANSLATE_NOOP("Floodgate", "{n} min left"), n=round(seconds / 60))
    return say(QT_TRANSLATE_NOOP("Floodgate", "{n} h left"), n=f"{seconds / 3600:.1f}")


def download_row(status: DownloadStatus) -> DownloadRow:
    """A download's status in words."""
    parts = [
        say(_STATE_WORDS[status.state]),
        say(
            QT_TRANSLATE_NOOP("Floodgate", "{done} of {total}"),
            done=size_text(status.done),
            total=size_text(status.total),
        ),
    ]
    if status.state is State.DOWNLOADING and status.speed > 0:
        parts.append(
            say(QT_TRANSLATE_NOOP("Floodgate", "{speed}/s"), speed=size_text(status.speed))
        )
        if status.seconds_left is not None:
            parts.append(_duration(status.seconds_left))
    return DownloadRow(
        id=status.id,
        label=status.label,
        state=status.state.value,
        fraction=status.done / status.total if status.total else 0.0,
        progress=" · ".join(parts),
        sentence=say_sentence(status.sentence) if status.sentence else "",
        path=status.path,
    )


def _repo_row(summary: RepoSummary) -> RepoRow:
    updated = summary.last_modified.date().isoformat() if summary.last_modified else ""
    return RepoRow(summary.repo_id, summary.downloads, summary.likes, updated, summary.gated)


def _choice_rows(listing: RepoListing, assessment: Assessment) -> list[ChoiceRow]:
    return [
        ChoiceRow(
            label=choice.label,
            projector=_projector_words(choice),
            quantization=choice.quantization,
            size=size_text(choice.size),
            need=size_text(estimate.total),
            fit=say(_FIT_WORDS[estimate.fit]),
            fit_key=estimate.fit.value,
            recommended=index == assessment.recommended,
            parts=len(choice.files),
        )
        for index, (choice, estimate) in enumerate(
            zip(listing.choices, assessment.estimates, strict=True)
        )
    ]


def _projector_words(choice: ModelChoice) -> str:
    """The projector that comes with a choice, named with its size ("": none)."""
    projector = choice.projector
    if projector is None:
        return ""
    return say(
        QT_TRANSLATE_NOOP("Floodgate", "+ its projector {projector} ({size}): it sees"),
        projector=projector.name,
        size=size_text(projector.size),
    )


class HubDownloads(QObject):
    """Searches the Hub and downloads models into ``folder``, never on the UI thread.

    Lives on the UI thread. Searches and listings are coroutines (awaited on the UI loop while
    a thread waits on the network); downloads run on the queue's thread.

    Signals:
        changed(DownloadRow): a download moved on (at most every 0.1 s each) or changed state.
        finished(Path): a model finished downloading and was verified: ready to open.
    """

    changed = Signal(DownloadRow)
    finished = Signal(Path)
    _reported = Signal(DownloadStatus)

    def __init__(self, folder: Path, n_ctx: int, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.folder = folder
        self.n_ctx = n_ctx
        self.gpu_budget = 0
        """Bytes the GPU in use could give a model (0: none); set as models load."""
        self.rows: dict[int, DownloadRow] = {}
        self._hub: Hub | None = None
        self._search: ModelSearch | None = None
        self._listing: RepoListing | None = None
        self._reported.connect(self._on_reported)
        # Called on the queue's thread: the signal queues the status to the UI thread.
        self.queue = DownloadQueue(folder, self._reported.emit)

    async def _the_hub(self) -> Hub:
        """The Hub at ``$HF_ENDPOINT`` now, with the kept token (read off the UI thread)."""
        if self._hub is None:
            self._hub = await asyncio.to_thread(Hub)
        return self._hub

    async def search(
        self, text: str, sort: Sort, *, sees: bool = False
    ) -> tuple[list[RepoRow], bool]:
        """The first page of repositories matching ``text``; and whether there are more.

        ``sees``: only models that read pictures.

        Raises:
            HubError: the Hub cannot be reached or refused (the sentence says which).
        """
        self._hub = None  # HF_ENDPOINT or the token may have changed since the last one
        hub = await self._the_hub()
        try:
            self._search = await asyncio.to_thread(partial(hub.search, text, sort, sees=sees))
        except DownloadError as exc:
            raise HubError(say_sentence(exc.sentence)) from exc
        return await self.more()

    async def more(self) -> tuple[list[RepoRow], bool]:
        """The next page of the last search; and whether there are more after it."""
        search = self._search
        if search is None:
            return [], False
        try:
            page = await asyncio.to_thread(search.next_page)
        except DownloadError as exc:
            raise HubError(say_sentence(exc.sentence)) from exc
        return [_repo_row(s) for s in page], not search.exhausted

    async def repository(self, repo_id: str) -> RepoView:
        """A repository's models with their memory estimate for this machine.

        Raises:
            HubError: the Hub cannot be reached, has no such repository, or refused access.
        """
        hub = await self._the_hub()
        try:
            listing = await asyncio.to_thread(hub.repository, repo_id)
        except DownloadError as exc:
            raise HubError(say_sentence(exc.sentence)) from exc
        assessment = await asyncio.to_thread(self._assess, hub, listing)
        self._listing = listing
        note = say_sentence(assessment.problem.sentence) if assessment.problem else ""
        return RepoView(
            listing.repo_id, listing.license, listing.gated, _choice_rows(listing, assessment), note
        )

    def _assess(self, hub: Hub, listing: RepoListing) -> Assessment:
        with httpx.Client(trust_env=True, follow_redirects=True) as client:
            return assess(
                client,
                listing.choices,
                partial(hub.file_url, listing.repo_id, listing.revision),
                hub.headers(),
                self.n_ctx,
                machine_memory(),
                self.gpu_budget,
            )

    def download(self, label: str) -> DownloadRow | None:
        """Queue the model ``label`` of the repository shown last; its first row."""
        listing, hub = self._listing, self._hub
        if listing is None or hub is None:
            return None
        choice = next((c for c in listing.choices if c.label == label), None)
        if choice is None:
            return None
        return self.add(remote_files(hub.endpoint, listing, choice), hub.headers())

    def add(self, files: list[RemoteFile], headers: dict[str, str] | None = None) -> DownloadRow:
        """Queue ``files`` (one model's) for download."""
        row = download_row(self.queue.add(files, headers))
        self.rows[row.id] = row
        return row

    async def restore(self) -> None:
        """Bring back the downloads a previous run left unfinished (see DownloadQueue.restore).

        Called when the app starts: those that were running go on, those the user paused wait.
        The folder is read, and the Hub's token looked up, off the UI thread; the token only
        when something waits.
        """
        if not await asyncio.to_thread(waiting_downloads, self.folder):
            return
        hub = await self._the_hub()
        await asyncio.to_thread(self.queue.restore, hub.headers())

    async def keep_token(self, token: str) -> bool:
        """Keep ``token`` for the Hub in the keyring; whether a keyring took it."""
        hub = await self._the_hub()
        kept = await asyncio.to_thread(save_token, hub.endpoint, token)
        self._hub = None  # the next request asks with it
        return kept

    def pause(self, download_id: int) -> None:
        """Pause a download (what arrived is kept)."""
        self.queue.pause(download_id)

    def resume(self, download_id: int) -> None:
        """Resume a paused or stopped download where it was."""
        self.queue.resume(download_id)

    def cancel(self, download_id: int) -> None:
        """Cancel a download and delete what arrived."""
        self.queue.cancel(download_id)

    def status_text(self) -> str:
        """What the status line says of the downloads ("" when none is unfinished).

        The one downloading (or else the first waiting for the user: paused or stopped), and
        how many others wait.
        """
        rows = list(self.rows.values())
        active = [r for r in rows if r.state == State.DOWNLOADING.value]
        held = [r for r in rows if r.state in (State.PAUSED.value, State.FAILED.value)]
        queued = [r for r in rows if r.state == State.QUEUED.value]
        first = active or held or queued
        if not first:
            return ""
        shown = first[0]
        text = f"{shown.label}: {shown.progress}"
        waiting = sum(1 for r in queued if r is not shown)
        if waiting:
            text += " · " + say(QT_TRANSLATE_NOOP("Floodgate", "{n} waiting"), n=waiting)
        paused = sum(1 for r in held if r is not shown)
        if paused:
            text += " · " + say(QT_TRANSLATE_NOOP("Floodgate", "{n} paused"), n=paused)
        return text

    @Slot()
    def close(self) -> None:
        """Stop the running download (kept for a resume) and let its thread end."""
        self.queue.close(timeout=1.0)

    @Slot(DownloadStatus)
    def _on_reported(self, status: DownloadStatus) -> None:
        row = download_row(status)
        self.rows[row.id] = row
        self.changed.emit(row)
        if status.state is State.DONE and status.path is not None:
            self.finished.emit(status.path)
