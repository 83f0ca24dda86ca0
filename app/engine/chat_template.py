"""A model's chat template, rendered in Jinja's sandbox with Stop and budgets that always win.

A GGUF file carries its chat template as Jinja source; the prompt is whatever that template
renders. The template is the model author's code running on the worker thread, before
llama.cpp is called, so llama.cpp's native abort never sees it: a template that loops for
hours, or outputs gigabytes, would hold the worker (and Stop, and closing) for as long.

Rendering here is llama-cpp-python's (``Jinja2ChatFormatter``: an
``ImmutableSandboxedEnvironment``, ``raise_exception``, ``strftime_now``,
``add_generation_prompt=True``, the end-of-sequence token as the stop string), with three
fences around it:

- A trace function, installed on the rendering thread only while it renders. Jinja compiles
  templates to Python, so every loop iteration of a template is a line event and every filter
  or method it calls is a call event; the trace function checks the stop signal, the time
  budget and (every few milliseconds) the memory budget there, and raises an exception that
  Jinja cannot catch. Python threads cannot be killed; they can be made to raise.
- Budgets: output size (counted chunk by chunk as the template yields), and the operations
  that make a huge value in one C call, where no trace event comes until it is done: they
  are refused before they run. ``'x' * 10**9``, ``10 ** (10 ** 8)``, ``'x'|center(10**9)``,
  ``'{:>999999999}'.format(1)``, printing or joining a list of a thousand references to one
  4 MB string (gigabytes of text), sorting millions of items. What remains uninterruptible
  is one C operation on values within the budgets: milliseconds, tens of them at worst.
- The sandbox itself: no attribute starting with ``_``, no mutation of lists and dicts,
  ``range`` limited to 100,000 items, so no template can reach Python's internals.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import FrameType
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.parser
from jinja2 import nodes, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame, optimizeconst
from jinja2.nodes import EvalContext
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment

from app.engine.backend import ChatMessage
from app.engine.stop import StopSignal
from app.sentence import QT_TRANSLATE_NOOP, Sentence

TIME_BUDGET_S = 10.0
"""Seconds a template may take to render a prompt (real ones take a few milliseconds)."""

OUTPUT_BUDGET_CHARS = 4_000_000
"""Characters a rendered prompt may have: far beyond any context window (about a million
tokens), far below what would strain memory."""

MEMORY_BUDGET_BYTES = 512 * 2**20
"""How much the process may grow while a template renders."""

INTEGER_BUDGET_BITS = 2**14
"""The largest integer a template may compute (about 4,900 digits, beyond what Python prints):
arithmetic on far larger ones is one C call the trace cannot enter, and it can take seconds."""

_TIME_CHECK_EVERY = 64
"""Trace events between two looks at the clock (the stop flag is read at every event)."""

_MEMORY_CHECK_INTERVAL_S = 0.01
"""Seconds between two looks at the process's memory while a template renders."""

_TEMPLATE_FILENAME = "<template>"
"""The file name Jinja gives code compiled from a template string."""


class TemplateError(Exception):
    """The chat template could not render a prompt. ``str(error)`` is a sentence for the user.

    Attributes:
        sentence: what happened, naming the template as the cause.
        stopped: True when rendering ended because Stop was pressed (not the template's fault).
    """

    def __init__(self, sentence: Sentence, *, stopped: bool = False) -> None:
        self.sentence = sentence
        self.stopped = stopped
        super().__init__(str(sentence))


@dataclass(frozen=True)
class RenderedPrompt:
    """A prompt in the model's own format, and the strings that end its reply."""

    text: str
    stop_strings: tuple[str, ...]


class _Halt(BaseException):
    """Raised inside the template's frames to end rendering.

    A ``BaseException``: Jinja's runtime and filters catch ``Exception`` here and there
    (undefined attributes, the sandbox's lookups); none of them may swallow this.
    """

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class _TemplateRaisedError(Exception):
    """What the template's ``raise_exception(message)`` raises."""


def _resident_bytes() -> int | None:
    """The process's resident memory, where the platform tells it cheaply (Linux)."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


class _Guard:
    """The trace function's state for one rendering: stop flag, deadline, memory ceiling."""

    def __init__(self, time_budget: float, memory_budget: int) -> None:
        self.halted = False
        self.reason = ""
        self.deadline = time.monotonic() + time_budget
        self.countdown = _TIME_CHECK_EVERY
        resident = _resident_bytes()
        self.memory_ceiling = None if resident is None else resident + memory_budget
        self.memory_check_at = 0.0

    def stop(self) -> None:
        """Stop was pressed: the next trace event ends rendering (called from any thread)."""
        if not self.halted:
            self.reason = "stop"
            self.halted = True

    def check(self) -> None:
        """Raise :class:`_Halt` if rendering must end (the clock is read every few calls)."""
        if self.halted:
            raise _Halt(self.reason or "stop")
        self.countdown = _TIME_CHECK_EVERY
        now = time.monotonic()
        if now > self.deadline:
            self.reason, self.halted = "time", True
            raise _Halt("time")
        if self.memory_ceiling is not None and now >= self.memory_check_at:
            self.memory_check_at = now + _MEMORY_CHECK_INTERVAL_S
            resident = _resident_bytes()
            if resident is not None and resident > self.memory_ceiling:
                self.reason, self.halted = "memory", True
                raise _Halt("memory")

    # The two trace functions run for every call and every template line while a template
    # renders, so they do the least they can: read a flag, count down; the full check (the
    # clock, the memory) runs once in _TIME_CHECK_EVERY events.

    def trace(self, frame: FrameType, event: str, arg: object) -> Any:
        """The global trace function: every Python call on this thread comes through here."""
        self.countdown -= 1
        if self.halted or self.countdown <= 0:
            self.check()
        # Line events only in the template's own code: that is where its loops are. Library
        # frames are checked on each call they make, which keeps the cost low.
        if frame.f_code.co_filename == _TEMPLATE_FILENAME:
            return self.trace_lines
        return None

    def trace_lines(self, frame: FrameType, event: str, arg: object) -> Any:
        """The local trace function of template frames: a check per line."""
        self.countdown -= 1
        if self.halted or self.countdown <= 0:
            self.check()
        return self.trace_lines


class _IgnoreGenerationTags(jinja2.ext.Extension):
    """Pass-through for Hugging Face's ``{% generation %}`` tag (as llama-cpp-python does)."""

    tags = {"generation"}  # noqa: RUF012 - Jinja's Extension API declares it this way

    def parse(self, parser: jinja2.parser.Parser) -> list[jinja2.nodes.Node]:
        parser.stream.skip(1)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: int | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """Transformers' ``tojson`` (llama-cpp-python matches it)."""
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _strftime_now(fmt: str) -> str:
    return datetime.now().strftime(fmt)


def _raise_exception(message: object) -> None:
    raise _TemplateRaisedError(str(message))


_WIDE_FORMAT = re.compile(r"\d{7,}")
"""A width or precision of a million or more in a format string: one C call, unbounded output."""

ITEMS_BUDGET = 100_000
"""The most items one operation may put in a list (Jinja's own limit for ``range``): sorting
or joining more is one C call long enough to be felt."""

_WALK_LIMIT = 200_000
"""Parts of a value counted at most when estimating its text; more is too big to print."""


def _text_size(value: object, budget: int) -> int | None:
    """About how many characters ``str(value)`` has; None if beyond ``budget`` (or uncountable).

    A list of a thousand references to one 4 MB string is small in memory and 4 GB as text:
    Jinja turns values into text in one C call, so the text's size is estimated first.
    """
    if type(value) is str:
        return len(value) if len(value) <= budget else None
    total = 0
    seen = 0
    stack = [value]
    while stack:
        item = stack.pop()
        seen += 1
        if seen > _WALK_LIMIT:
            return None
        if isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, (list, tuple, set, frozenset)):
            if len(item) > _WALK_LIMIT:
                return None
            stack.extend(item)
            total += 2 * len(item) + 2
        elif isinstance(item, dict):
            if len(item) > _WALK_LIMIT:
                return None
            stack.extend(item.keys())
            stack.extend(item.values())
            total += 4 * len(item) + 2
        elif isinstance(item, (bool, int, float)) or item is None:
            total += 24  # integers are capped far below Python's 4,300 printable digits
        else:
            # Jinja's namespace prints its attributes; other objects print a short repr.
            attributes = getattr(item, "_Namespace__attrs", None)
            if isinstance(attributes, dict):
                stack.append(attributes)
            total += 64
        if total > budget:
            return None
    return total


def _sized(value: object) -> int:
    """How many items (or characters) ``value`` has; 0 for what has no length."""
    try:
        return len(value)  # type: ignore[arg-type]
    except TypeError:
        return 0


class _CheckedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with ``~`` checking the size of its parts before joining."""

    @optimizeconst
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        """As Jinja's, with the parts passed through ``environment.checked_parts``."""
        if frame.eval_ctx.volatile:
            func_name = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            func_name = "markup_join"
        else:
            func_name = "str_join"
        self.write(f"{func_name}(environment.checked_parts((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write(")))")


class _BudgetedSandbox(ImmutableSandboxedEnvironment):
    """Jinja's immutable sandbox, refusing single operations that would build a huge value.

    The trace function cannot interrupt one C call, so the operations whose result size the
    template controls are checked before they run: ``*``, ``**``, ``%``, ``~``, printing a
    value, ``join``, ``replace``, ``format``, widths and counts passed to methods and filters.
    """

    code_generator_class = _CheckedCodeGenerator
    # Not "+": it at most doubles a value, and repeated doubling is caught by the memory
    # budget between two operations; intercepting it would slow every real template.
    intercepted_binops = frozenset({"*", "**", "%"})

    def __init__(self, size_budget: int, **options: Any) -> None:
        super().__init__(finalize=self.checked_output, **options)
        self.size_budget = size_budget

    def refuse(self) -> None:
        """Refuse an operation whose result would exceed the budget."""
        raise _Halt("size")

    def check_text(self, *values: object) -> None:
        """Refuse unless the text of ``values`` together fits the budget."""
        total = 0
        for value in values:
            size = _text_size(value, self.size_budget - total)
            if size is None:
                self.refuse()
            else:
                total += size

    def checked_output(self, value: Any) -> Any:
        """Jinja's ``finalize``: every ``{{ value }}`` passes here before it becomes text."""
        if type(value) is not str:
            self.check_text(value)
        return value

    def checked_parts(self, parts: tuple[Any, ...]) -> tuple[Any, ...]:
        """The parts of a ``~`` concatenation, once their text is known to fit."""
        self.check_text(*parts)
        return parts

    def call_binop(self, context: Context, operator_name: str, left: Any, right: Any) -> Any:
        """``*``, ``**`` and ``%``, refused when their result would be too big."""
        budget = self.size_budget
        if operator_name == "*":
            if isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > INTEGER_BUDGET_BITS:
                    self.refuse()
            elif isinstance(left, int) or isinstance(right, int):
                count, other = (left, right) if isinstance(left, int) else (right, left)
                limit = budget if isinstance(other, str) else ITEMS_BUDGET
                if count > 0 and _sized(other) * count > limit:
                    self.refuse()
        elif operator_name == "**":
            if (
                isinstance(left, int)
                and isinstance(right, int)
                and abs(left) > 1
                and right * left.bit_length() > INTEGER_BUDGET_BITS
            ):
                self.refuse()
        elif operator_name == "%" and isinstance(left, str):
            self.check_format(left, right)
            self.check_text(left, right)
        return self.binop_table[operator_name](left, right)

    def check_format(self, text: str, *arguments: object) -> None:
        """Refuse a format string asking for a huge width, or with a ``*`` width that is."""
        if _WIDE_FORMAT.search(text):
            self.refuse()
        if "*" in text:
            for argument in arguments:
                values = argument if isinstance(argument, tuple) else (argument,)
                if any(isinstance(v, int) and abs(v) > self.size_budget for v in values):
                    self.refuse()

    def check_replace(self, text: object, old: object, new: object) -> None:
        """Refuse a ``replace`` whose result could exceed the budget."""
        if isinstance(text, str) and isinstance(old, str) and isinstance(new, str):
            growth = len(new) - len(old)
            if growth > 0 and len(text) + (len(text) // max(len(old), 1) + 1) * growth > (
                self.size_budget
            ):
                self.refuse()

    def check_items(self, items: object) -> None:
        """Refuse a list of more than :data:`ITEMS_BUDGET` items to sort, join or copy."""
        if _sized(items) > ITEMS_BUDGET:
            self.refuse()

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        """Calls from the template: widths and counts within the budget, text that fits."""
        for value in (*args, *kwargs.values()):
            if isinstance(value, int) and abs(value) > __self.size_budget:
                __self.refuse()
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, str):
            name = getattr(__obj, "__name__", "")
            if name == "join" and args:
                items = list(args[0]) if not isinstance(args[0], (list, tuple)) else args[0]
                __self.check_items(items)
                __self.check_text(*items)
                args = (items, *args[1:])
            elif name == "replace" and len(args) >= 2:
                __self.check_replace(owner, args[0], args[1])
            elif name == "expandtabs":
                size = args[0] if args else kwargs.get("tabsize", 8)
                if isinstance(size, int) and size * owner.count("\t") > __self.size_budget:
                    __self.refuse()
            elif name in ("split", "rsplit", "splitlines") and len(owner) > ITEMS_BUDGET * 10:
                # Up to one item per character: a few million strings in one C call.
                __self.refuse()
        return super().call(__context, __obj, *args, **kwargs)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """``str.format`` as the sandbox wraps it, with its format string checked first."""
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text = value.__self__

        def checked(*args: Any, **kwargs: Any) -> str:
            self.check_format(text)
            self.check_text(text, *args, *kwargs.values())
            return wrapped(*args, **kwargs)

        return checked


def _budgeted_filter(
    environment: _BudgetedSandbox, name: str, check: Callable[[tuple[Any, ...]], None]
) -> None:
    """Replace filter ``name`` by one that checks its arguments first."""
    original = environment.filters[name]

    def filtered(*args: Any, **kwargs: Any) -> Any:
        check((*args, *kwargs.values()))
        return original(*args, **kwargs)

    # Jinja passes the environment or context first to filters marked for it.
    if hasattr(original, "jinja_pass_arg"):
        filtered.jinja_pass_arg = original.jinja_pass_arg  # type: ignore[attr-defined]
    environment.filters[name] = filtered


def _new_environment(size_budget: int) -> _BudgetedSandbox:
    environment = _BudgetedSandbox(
        size_budget,
        loader=jinja2.BaseLoader(),
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_IgnoreGenerationTags, jinja2.ext.loopcontrols],
    )
    environment.filters["tojson"] = _tojson

    def no_huge_numbers(values: tuple[Any, ...]) -> None:
        for value in values:
            if isinstance(value, int) and abs(value) > size_budget:
                environment.refuse()

    def no_wide_formats(values: tuple[Any, ...]) -> None:
        if values and isinstance(values[0], str):
            environment.check_format(values[0], *values[1:])
            environment.check_text(*values)

    def text_that_fits(values: tuple[Any, ...]) -> None:
        environment.check_text(*(v for v in values if not isinstance(v, EvalContext)))

    def few_items(values: tuple[Any, ...]) -> None:
        for value in values:
            if not isinstance(value, (str, EvalContext, jinja2.Environment)):
                environment.check_items(value)

    def small_replacement(values: tuple[Any, ...]) -> None:
        arguments = [v for v in values if not isinstance(v, EvalContext)]
        if len(arguments) >= 3:
            environment.check_replace(*arguments[:3])

    for name in ("center", "indent", "truncate", "wordwrap", "batch", "slice", "round"):
        _budgeted_filter(environment, name, no_huge_numbers)
    _budgeted_filter(environment, "format", no_wide_formats)
    for name in ("string", "tojson", "pprint", "e", "escape", "forceescape", "urlencode"):
        _budgeted_filter(environment, name, text_that_fits)
    for name in ("sort", "unique", "dictsort", "reverse", "list", "groupby"):
        _budgeted_filter(environment, name, few_items)
    _budgeted_filter(environment, "replace", small_replacement)
    original_join = environment.filters["join"]

    @pass_eval_context
    def join(eval_ctx: EvalContext, value: Any, d: str = "", attribute: Any = None) -> str:
        items = value if isinstance(value, (list, tuple)) else list(value)
        environment.check_items(items)
        if len(d) * len(items) > size_budget:
            environment.refuse()
        environment.check_text(*items)
        joined: str = original_join(eval_ctx, items, d, attribute)
        return joined

    environment.filters["join"] = join
    return environment


@dataclass
class _Rendering:
    """What :func:`_guarded` hands back: the value, or the reason the guard ended it."""

    reason: str = ""


def _guarded(work: Callable[[], str], guard: _Guard, outcome: _Rendering) -> str | None:
    """Run ``work`` with ``guard``'s trace function on this thread; None if it was halted."""
    previous = sys.gettrace()
    sys.settrace(guard.trace)
    try:
        return work()
    except _Halt as halt:
        outcome.reason = halt.reason
        return None
    finally:
        sys.settrace(previous)


class ChatTemplate:
    """A GGUF chat template, ready to render prompts within Stop and the budgets.

    Args:
        source: the template's Jinja source (``tokenizer.chat_template``).
        bos_token: the model's beginning-of-sequence token text.
        eos_token: the model's end-of-sequence token text (the stop string of replies).
        time_budget: seconds one rendering may take.
        output_budget: characters a rendered prompt may have (also the largest value one
            operation in the template may build).
        memory_budget: bytes the process may grow by while rendering.

    Raises:
        TemplateError: the source is not a template Jinja can compile.
    """

    def __init__(
        self,
        source: str,
        *,
        bos_token: str,
        eos_token: str,
        time_budget: float = TIME_BUDGET_S,
        output_budget: int = OUTPUT_BUDGET_CHARS,
        memory_budget: int = MEMORY_BUDGET_BYTES,
    ) -> None:
        self.source = source
        self.bos_token = bos_token
        self.eos_token = eos_token
        self.time_budget = time_budget
        self.output_budget = output_budget
        self.memory_budget = memory_budget
        self._environment = _new_environment(output_budget)
        outcome = _Rendering()
        compiled: list[jinja2.Template] = []

        def compile_template() -> str:
            compiled.append(self._environment.from_string(source))
            return ""

        try:
            # Parsing is Python too: a pathological source gets the same time budget.
            _guarded(compile_template, _Guard(time_budget, memory_budget), outcome)
        except (jinja2.TemplateError, RecursionError, MemoryError, ValueError) as exc:
            raise TemplateError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate", "The model's chat template cannot be used: {reason}"
                    ),
                    {"reason": exc},
                )
            ) from exc
        if not compiled:
            raise TemplateError(self._halted_sentence(outcome.reason))
        self._template = compiled[0]

    @property
    def stop_strings(self) -> tuple[str, ...]:
        """The strings that end a reply in this format (as llama-cpp-python's formatter)."""
        return (self.eos_token,) if self.eos_token else ()

    def render(self, messages: Sequence[ChatMessage], stop: StopSignal) -> RenderedPrompt:
        """The prompt for ``messages``, ready for the model to answer.

        Ends within milliseconds of ``stop`` being set, whatever the template does.

        Raises:
            TemplateError: Stop was pressed (``stopped`` is True), or the template raised,
                rendered nothing, or went past a budget; the sentence says which.
        """
        if stop.is_set():
            raise TemplateError(self._halted_sentence("stop"), stopped=True)
        guard = _Guard(self.time_budget, self.memory_budget)
        remove_listener = stop.add_listener(guard.stop)
        outcome = _Rendering()
        context = self._context(messages)
        try:
            text = _guarded(lambda: self._collect(context), guard, outcome)
        except _TemplateRaisedError as exc:
            raise TemplateError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The model's chat template refused this conversation: {message}",
                    ),
                    {"message": exc},
                )
            ) from exc
        except Exception as exc:
            # Anything else a template can make Jinja or Python raise (undefined names,
            # the sandbox's refusals, recursion, type errors) is the template's failure.
            raise TemplateError(
                Sentence(
                    QT_TRANSLATE_NOOP("Floodgate", "The model's chat template failed: {reason}"),
                    {"reason": f"{type(exc).__name__}: {exc}"},
                )
            ) from exc
        finally:
            remove_listener()
        if text is None:
            raise TemplateError(
                self._halted_sentence(outcome.reason), stopped=outcome.reason == "stop"
            )
        if not text.strip():
            raise TemplateError(
                Sentence(
                    QT_TRANSLATE_NOOP(
                        "Floodgate",
                        "The model's chat template rendered an empty prompt, so there is "
                        "nothing for the model to answer.",
                    )
                )
            )
        return RenderedPrompt(text, self.stop_strings)

    def _context(self, messages: Sequence[ChatMessage]) -> Mapping[str, object]:
        """The names a template sees (those llama-cpp-python's formatter passes)."""
        return {
            "messages": [dict(m) for m in messages],
            "eos_token": self.eos_token,
            "bos_token": self.bos_token,
            "raise_exception": _raise_exception,
            "add_generation_prompt": True,
            "functions": None,
            "function_call": None,
            "tools": None,
            "tool_choice": None,
            "strftime_now": _strftime_now,
        }

    def _collect(self, context: Mapping[str, object]) -> str:
        """Render chunk by chunk, counting the output against its budget."""
        chunks: list[str] = []
        size = 0
        generated: Iterator[str] = self._template.generate(context)
        try:
            for chunk in generated:
                size += len(chunk)
                if size > self.output_budget:
                    raise _Halt("output")
                chunks.append(chunk)
        finally:
            close = getattr(generated, "close", None)
            if close is not None:
                close()
        return "".join(chunks)

    def _halted_sentence(self, reason: str) -> Sentence:
        if reason == "stop":
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The model's chat template did not finish before Stop; nothing was sent "
                    "to the model.",
                )
            )
        if reason == "time":
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The model's chat template did not finish within {seconds} seconds, so "
                    "nothing was sent to the model. The template in this model file is "
                    "broken or hostile.",
                ),
                {"seconds": f"{self.time_budget:g}"},
            )
        if reason == "memory":
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The model's chat template did not finish: it used more than {megabytes} "
                    "MB of memory, so nothing was sent to the model. The template in this "
                    "model file is broken or hostile.",
                ),
                {"megabytes": self.memory_budget // 2**20},
            )
        if reason == "output":
            return Sentence(
                QT_TRANSLATE_NOOP(
                    "Floodgate",
                    "The model's chat template did not finish: its prompt grew past {limit} "
                    "characters, so nothing was sent to the model. The template in this model "
                    "file is broken or hostile.",
                ),
                {"limit": f"{self.output_budget:,}"},
            )
        return Sentence(
            QT_TRANSLATE_NOOP(
                "Floodgate",
                "The model's chat template did not finish: it tried to build a value larger "
                "than {limit} characters, so nothing was sent to the model. The template in "
                "this model file is broken or hostile.",
            ),
            {"limit": f"{self.output_budget:,}"},
        )


__all__ = ["ChatTemplate", "RenderedPrompt", "TemplateError"]
