"""The chat session: the thin front the window talks to.

It ties three parts with one job each: the :class:`~app.flow.model_host.ModelHost` (which
model answers), the :class:`~app.flow.reply.ReplyRunner` (one reply from producer to screen)
and the :class:`~app.flow.library.ConversationLibrary` (the conversations); the
:class:`~app.flow.turns.Turns` put the user's turns in the conversation tree, and the
:class:`~app.flow.model_figures.ModelFigures` keep the model's figures for the diagnostics.
Widgets call its methods and render what its signals say; they never touch the worker or the
queue.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from app import defaults
from app.engine import BackendOpener, EngineOptions, GenerationSettings, ModelInfo
from app.engine.remote import RemoteEndpoint
from app.flow.archive import Archive
from app.flow.decode_threads import BELOW_WINDOW
from app.flow.library import ConversationLibrary
from app.flow.metrics import FlowMetrics
from app.flow.model_figures import ModelFigures
from app.flow.model_host import ModelHost, ModelState
from app.flow.options import as_settings, engine_options, generation_settings, with_conversation
from app.flow.reply import ReplyRunner
from app.flow.room import MIN_RATE_TOKENS, PromptRoom
from app.flow.turns import Turns
from app.store.conversation import Conversation, Message
from app.store.database import ConversationSummary
from app.store.settings import Settings, with_overrides
from app.store.thread_choices import ThreadChoices

__all__ = ["DEFAULT_QUEUE_BOUND", "MIN_RATE_TOKENS", "ChatSession", "ModelState"]

DEFAULT_QUEUE_BOUND = defaults.QUEUE_BOUND


class ChatSession(QObject):
    """Sends prompts to the model and streams its replies into the conversation.

    Lives on the UI thread. Its signals are those of its parts, re-exposed so a widget
    connects to one object:

    Signals:
        state_changed(ModelState, str), model_changed(ModelInfo): from the model host.
        notice(str): something the user should know that is not an error (any part).
        reply_started(), prompt_progress(str), reply_ended(ReplyEnd), figures_changed(): from
            the reply runner; and its ``reply_text``, connected to like a signal
            (:class:`~app.flow.reply.TextReaders`).
        conversation_loaded(), conversations_changed(): from the conversation library.
        saving_failed(str), saving_recovered(str): the history could not be written (what is
            on screen is only in memory until it can), and can be again.
    """

    def __init__(
        self,
        opener: BackendOpener,
        *,
        options: EngineOptions | None = None,
        settings: GenerationSettings | None = None,
        frame_interval: float = 1 / 60,
        queue_bound: int = DEFAULT_QUEUE_BOUND,
        archive: Archive | None = None,
        thread_choices: ThreadChoices | None = None,
        parent: QObject | None = None,
    ) -> None:
        super().__init__(parent)
        options = options or EngineOptions()
        self.cache_dir = options.cache_dir
        """Where the engine keeps processed prompts on disk (None: RAM only)."""
        self.settings = settings or GenerationSettings()
        self.queue_bound = queue_bound
        self.metrics = FlowMetrics(queue_bound=queue_bound)
        # The window's pieces wake its UI thread without waiting for a decode thread's core.
        self.host = ModelHost(opener, options, self, thread_choices, below_window=BELOW_WINDOW)
        self._model_figures = ModelFigures(self.host, self.metrics, self)
        self.library = ConversationLibrary(archive, self)
        self.runner = ReplyRunner(
            self.library, self.metrics, frame_interval, self.host.cache_stats, self
        )
        host, library, runner = self.host, self.library, self.runner
        self.state_changed = host.state_changed
        self.model_changed = host.model_changed
        self.reply_started = runner.reply_started
        self.reply_text = runner.reply_text
        self.prompt_progress = runner.prompt_progress
        self.reply_ended = runner.reply_ended
        self.figures_changed = runner.figures_changed
        self.conversation_loaded = library.conversation_loaded
        self.conversations_changed = library.conversations_changed
        self.saving_failed = library.saving_failed
        self.saving_recovered = library.saving_recovered
        self.notice = host.notice
        library.notice.connect(host.notice)
        runner.notice.connect(host.notice)
        runner.reply_ended.connect(lambda _end: host.reply_ended())
        self.room = PromptRoom(host, self.metrics, self.reply_settings, lambda: self.conversation)
        """The room in the context for attachments, and this machine's reading rate."""
        runner.reply_ended.connect(self.room.keep_prefill_rate)
        self.count_tokens = self.room.count_tokens
        self.room_budget = self.room.budget
        self.room_for_attachments = self.room.for_attachments
        self.turns = Turns(library, lambda: self.generating, self._answer, self.notice.emit)
        """The user's turns: a new prompt, an edited one, the last asked again, a variant."""
        self.send = self.turns.send
        self.regenerate = self.turns.regenerate
        self.edit_and_resend = self.turns.edit_and_resend
        self.show_variant = self.turns.show_variant

    # -- what the parts hold --------------------------------------------------------------------

    @property
    def conversation(self) -> Conversation:
        """The conversation on screen."""
        return self.library.conversation

    @conversation.setter
    def conversation(self, conversation: Conversation) -> None:
        # Without a redraw: for tests and the bench, which set up a conversation before use.
        self.library.conversation = conversation

    @property
    def archive(self) -> Archive | None:
        """Where conversations are saved; None keeps them in memory only."""
        return self.library.archive

    @property
    def prefill_rate(self) -> float | None:
        """The last prompt-processing rate measured on this machine, tokens/s (None: none yet)."""
        return self.room.prefill_rate

    @prefill_rate.setter
    def prefill_rate(self, rate: float | None) -> None:
        self.room.prefill_rate = rate

    @property
    def model(self) -> ModelInfo | None:
        """The model that answers (None before one is loaded)."""
        return self.host.model

    @property
    def state(self) -> ModelState:
        """What the status line says about the model."""
        return self.host.state

    @property
    def options(self) -> EngineOptions:
        """How models are opened."""
        return self.host.options

    @property
    def frame_interval(self) -> float:
        """Seconds per frame of the frame pump."""
        return self.runner.frame_interval

    @property
    def generating(self) -> bool:
        """A reply is on its way (or waiting for the model)."""
        return self.runner.generating

    @property
    def default_system_prompt(self) -> str:
        """The system prompt new conversations start with."""
        return self.library.default_system_prompt

    def describe_state(self) -> str:
        """The model's state as a sentence, in the current language."""
        return self.host.describe_state()

    # -- settings -------------------------------------------------------------------------------

    def use_settings(self, settings: Settings) -> bool:
        """Use ``settings`` from the next reply on.

        Returns:
            Whether the engine options changed (they apply when the model is opened again).
        """
        self.settings = generation_settings(settings)
        self.queue_bound = settings.queue_bound
        self.library.default_system_prompt = settings.system_prompt
        options = engine_options(settings, self.cache_dir)
        changed = options != self.host.options
        self.host.options = options
        return changed

    def sampling(self) -> tuple[Settings, Settings]:
        """The app's sampling settings, and this conversation's (its own values over them)."""
        base = as_settings(self.settings)
        return base, with_overrides(base, self.conversation.settings)

    def reply_settings(self) -> GenerationSettings:
        """What the next reply is sampled with."""
        return with_conversation(self.settings, self.conversation.settings)

    def set_conversation_settings(self, own: dict[str, object]) -> None:
        """Give this conversation its own sampling settings (empty: the app's)."""
        self.library.set_settings(own)

    def set_system_prompt(self, text: str) -> None:
        """The system prompt of this conversation (and of new ones, as their default)."""
        self.library.set_system_prompt(text)

    # -- models ---------------------------------------------------------------------------------

    def open_model(self, path: Path) -> None:
        """Load ``path``; a reply in progress is stopped first."""
        self.runner.stop()
        self.host.open_model(path)

    async def connect_remote(self, endpoint: RemoteEndpoint) -> bool:
        """Use a model on a server from the next reply on (a reply in progress is stopped)."""
        await self.runner.stop_and_wait()
        return await self.host.connect_remote(endpoint)

    # -- replies --------------------------------------------------------------------------------

    def _answer(self, prompt: Message) -> None:
        """Start the reply to ``prompt``, the conversation's newest turn."""
        self.host.reply_began()
        self.runner.start(
            self.host.producer, prompt, self.reply_settings(), self.queue_bound, self.model
        )

    def measure_threads(self) -> None:
        """Measure the local model's decode threads again (Settings > Measure again)."""
        self.host.measure_threads()

    def stop(self) -> bool:
        """Stop the reply in progress. False if there is none or Stop was already pressed.

        Stop also ends a measurement of the decode threads (after a model opens) at once.
        """
        self.host.stop_measuring()
        return self.runner.stop()

    async def stop_and_wait(self) -> None:
        """Stop the reply in progress, if any, and wait until it is shown and saved."""
        await self.runner.stop_and_wait()

    async def close(self) -> None:
        """Stop any reply, let the worker free the model, and wait for its thread to end."""
        await self.runner.stop_and_wait()
        await self.host.close()

    # -- conversations --------------------------------------------------------------------------

    async def new_conversation(self) -> None:
        """Start a new, empty chat (the reply in progress is stopped and saved first)."""
        await self.runner.stop_and_wait()
        self.library.start_new()

    async def open_conversation(self, conversation_id: str) -> bool:
        """Show a saved conversation; its model is opened if it is another one."""
        if self.archive is None:
            return False
        await self.runner.stop_and_wait()
        if conversation_id == self.conversation.id:
            return True
        conversation = await self.library.load(conversation_id)
        if conversation is None:
            return False
        self.library.show(conversation)
        wanted = Path(conversation.model) if conversation.model else None
        current = self.model.path if self.model is not None else None
        if wanted is not None and wanted != current and await self.archive.call(wanted.is_file):
            self.open_model(wanted)
        return True

    async def list_conversations(self, query: str = "") -> list[ConversationSummary]:
        """Saved conversations, newest first, or those matching ``query``."""
        return await self.library.list(query)

    def rename(self, conversation_id: str, title: str) -> None:
        """Give a conversation a new title."""
        self.library.rename(conversation_id, title)

    async def delete(self, conversation_id: str) -> None:
        """Delete a conversation; :meth:`undelete` brings it back for a while."""
        if conversation_id == self.conversation.id:
            await self.new_conversation()
        self.library.delete(conversation_id)
        self.host.with_backend(lambda backend: backend.forget(conversation_id))

    def clear_prompt_cache(self) -> None:
        """Drop every processed prompt the engine keeps, in RAM and on disk."""
        self.host.with_backend(lambda backend: backend.clear_cache())

    def undelete(self, conversation_id: str) -> None:
        """Bring back a deleted conversation."""
        self.library.undelete(conversation_id)

    async def export_conversation(self, path: Path, kind: str) -> None:
        """Write the conversation to ``path`` as ``"markdown"`` or ``"json"``."""
        await self.library.export(path, kind)

    async def import_conversation(self, path: Path) -> bool:
        """Read a conversation exported as JSON, save it, and show it."""
        conversation = await self.library.read_import(path)
        if conversation is None:
            return False
        await self.runner.stop_and_wait()
        await self.library.keep_imported(conversation)
        return True
