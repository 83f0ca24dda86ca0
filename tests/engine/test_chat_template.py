"""Hostile chat templates: Stop and the budgets always end them, and none of them runs code."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest

from app.engine.backend import ChatMessage
from app.engine.chat_template import ChatTemplate, RenderedPrompt, TemplateError
from app.engine.model_card import read_chat_template
from app.engine.stop import StopSignal

MESSAGES = [
    ChatMessage(role="system", content="Be brief."),
    ChatMessage(role="user", content="Hello"),
    ChatMessage(role="assistant", content="Hi."),
    ChatMessage(role="user", content="How are you?"),
]

RUNAWAY = "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
"""Ten billion iterations that output nothing (issue 16's wedging template)."""

GENEROUS_S = 1.0
"""A behaviour check, not a speed test: the requirement is 100 ms; a loaded CI machine may
take longer, a template that ignores Stop takes for ever."""


def template(source: str, **budgets: float) -> ChatTemplate:
    return ChatTemplate(source, bos_token="<s>", eos_token="</s>", **budgets)  # type: ignore[arg-type]


def render(source: str, **budgets: float) -> RenderedPrompt:
    return template(source, **budgets).render(MESSAGES, StopSignal())


def failure(source: str, **budgets: float) -> TemplateError:
    with pytest.raises(TemplateError) as caught:
        render(source, **budgets)
    return caught.value


@pytest.mark.model
def test_the_bundled_template_renders_as_llama_cpp_python_renders_it(model_path: Path) -> None:
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    source = read_chat_template(model_path)
    assert source is not None
    assert "<|im_start|>" in source
    ours = ChatTemplate(source, bos_token="<|im_start|>", eos_token="<|im_end|>")
    theirs = Jinja2ChatFormatter(source, eos_token="<|im_end|>", bos_token="<|im_start|>")
    expected = theirs(messages=list(MESSAGES))  # type: ignore[arg-type]
    prompt = ours.render(MESSAGES, StopSignal())
    assert prompt.text == expected.prompt
    assert prompt.text.endswith("<|im_start|>assistant\n")  # add_generation_prompt
    assert list(prompt.stop_strings) == expected.stop


def test_the_context_is_the_one_llama_cpp_python_gives() -> None:
    prompt = render(
        "{{ bos_token }}{% for m in messages %}{{ m.role }}:{{ m['content'] }}|{% endfor %}"
        "{% if add_generation_prompt %}assistant:{% endif %}{{ eos_token }}"
        "{{ strftime_now('%Y')|length }}{{ tools is none }}{{ messages|tojson|length > 0 }}"
    )
    assert prompt.text == (
        "<s>system:Be brief.|user:Hello|assistant:Hi.|user:How are you?|assistant:</s>4TrueTrue"
    )
    assert prompt.stop_strings == ("</s>",)
    no_eos = ChatTemplate("x", bos_token="", eos_token="").render(MESSAGES, StopSignal())
    assert no_eos.stop_strings == ()


def stop_while_rendering(chat_template: ChatTemplate, after: float = 0.2) -> tuple[float, bool]:
    """Press Stop ``after`` seconds into rendering; returns (seconds to end, stopped)."""
    stop = StopSignal()
    timer = threading.Timer(after, stop.set)
    timer.start()
    try:
        with pytest.raises(TemplateError) as caught:
            chat_template.render(MESSAGES, stop)
        ended = time.perf_counter()
    finally:
        timer.cancel()
    assert stop.set_at is not None, "the template ended before Stop was pressed"
    assert "chat template" in str(caught.value)
    return ended - stop.set_at, caught.value.stopped


@pytest.mark.parametrize(
    "source",
    [
        RUNAWAY,
        # Loops inside filters and macros rather than in the template's own lines.
        "{% for i in range(100000) %}{{ range(100000)|map('string')|join|length }}{% endfor %}",
        "{% macro m(n) %}{% for i in range(100000) %}{% endfor %}{% endmacro %}"
        "{% for i in range(100000) %}{{ m(i) }}{% endfor %}",
        "{% for i in range(100000) %}{{ range(100000)|sort|first }}{% endfor %}",
        "{% for i in range(100000) %}{{ lipsum(5) }}{% endfor %}",
    ],
)
def test_stop_ends_a_runaway_template(source: str) -> None:
    seconds, stopped = stop_while_rendering(template(source))
    assert stopped
    assert seconds < GENEROUS_S


def test_a_stop_pressed_before_rendering_is_not_lost() -> None:
    stop = StopSignal()
    stop.set()
    with pytest.raises(TemplateError) as caught:
        template("hello").render(MESSAGES, stop)
    assert caught.value.stopped


def test_a_runaway_template_stops_by_itself_past_its_time_budget() -> None:
    started = time.perf_counter()
    error = failure(RUNAWAY, time_budget=0.3)
    assert time.perf_counter() - started < 0.3 + GENEROUS_S
    assert not error.stopped
    assert str(error).startswith("The model's chat template did not finish within 0.3 seconds")
    assert str(error) == str(error.sentence)


def test_twenty_megabytes_of_output_stop_at_the_output_budget() -> None:
    error = failure("{% for i in range(100000) %}{{ 'x' * 200 }}{% endfor %}")
    assert "did not finish" in str(error)
    assert "4,000,000 characters" in str(error)
    assert not error.stopped
    small = failure("{% for i in range(100) %}{{ 'x' * 20 }}{% endfor %}", output_budget=1000)
    assert "1,000 characters" in str(small)


def test_stop_ends_twenty_megabytes_of_output_at_once() -> None:
    source = "{% for i in range(100000) %}{{ 'x' * 200 }}{% endfor %}"
    seconds, stopped = stop_while_rendering(template(source, output_budget=10**9), after=0.05)
    assert stopped
    assert seconds < GENEROUS_S


@pytest.mark.parametrize(
    "source",
    [
        "{{ 'x' * 1000000000 }}",
        "{{ [1, 2] * 1000000000 }}",
        "{{ 10 ** (10 ** 8) }}",
        "{{ (10 ** 300000) * (10 ** 300000) }}",
        "{{ 'x'|center(1000000000) }}",
        "{{ 'x'|indent(1000000000, true) }}",
        "{{ 'x'.ljust(1000000000) }}",
        "{{ 'x'.zfill(1000000000) }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ '{0:>999999999}'.format_map({}) }}",
        "{{ '%0999999999d' % 1 }}",
        "{{ '%*d' % (999999999, 1) }}",
        "{{ '%0999999999d'|format(1) }}",
        "{{ lipsum(1000000000) }}",
        # Small in memory, gigabytes as text: a list of references to one big string.
        "{{ ['x' * 4000000] * 1000 }}",
        "{{ (['x' * 4000000] * 1000)|join }}",
        "{{ ''.join(['x' * 4000000] * 1000) }}",
        "{{ 'a' ~ (['x' * 4000000] * 1000) }}",
        "{{ (['x' * 4000000] * 1000)|tojson }}",
        "{{ (['x' * 4000000] * 1000)|string }}",
        "{{ '%s' % ((['x' * 4000000] * 1000),) }}",
        "{{ '{}'.format(['x' * 4000000] * 1000) }}",
        "{% set ns = namespace(a=['x' * 4000000] * 1000) %}{{ ns }}",
        "{{ ('x' * 4000)|replace('x', 'y' * 4000) }}",
        "{{ ('x' * 4000).replace('x', 'y' * 4000) }}",
        "{{ ('\t' * 100000).expandtabs(1000) }}",
        # Millions of items for one sort in C.
        "{{ ((range(100000)|list) * 40)|sort|first }}",
        "{{ ('xy' * 2000000)|list|sort|first }}",
        "{{ ('x ' * 2000000).split()|length }}",
        "{{ (2 ** 14000) * (2 ** 14000) }}",
    ],
)
def test_one_operation_cannot_build_a_huge_value(source: str) -> None:
    started = time.perf_counter()
    error = failure(source)
    assert time.perf_counter() - started < GENEROUS_S
    assert "tried to build a value larger than 4,000,000 characters" in str(error)


@pytest.mark.skipif(not Path("/proc/self/statm").exists(), reason="memory is read from /proc")
def test_a_value_doubled_in_a_loop_stops_at_the_memory_budget() -> None:
    # "+" is not checked operation by operation (real templates use it everywhere): what
    # doubling builds is caught between two operations by the memory budget.
    source = (
        "{% set ns = namespace(x='abcd') %}{% for i in range(40) %}"
        "{% set ns.x = ns.x + ns.x %}{% endfor %}{{ ns.x|length }}"
    )
    error = failure(source, memory_budget=64 * 2**20)
    assert "used more than 64 MB of memory" in str(error)


def test_a_value_doubled_with_tilde_stops_at_the_size_budget() -> None:
    source = (
        "{% set ns = namespace(x='abcd') %}{% for i in range(40) %}"
        "{% set ns.x = ns.x ~ ns.x %}{% endfor %}{{ ns.x|length }}"
    )
    assert "tried to build a value larger than 4,000,000" in str(failure(source))


def test_raise_exception_is_the_templates_own_sentence() -> None:
    error = failure("{{ raise_exception('boom') }}")
    assert str(error) == "The model's chat template refused this conversation: boom"
    assert "too long" not in str(error)
    assert not error.stopped


def test_an_empty_prompt_is_said_to_be_the_templates() -> None:
    for source in ("", "   \n", "{% if false %}x{% endif %}"):
        error = failure(source)
        assert "chat template rendered an empty prompt" in str(error)


def test_a_template_that_does_not_compile_says_so() -> None:
    with pytest.raises(TemplateError, match=r"chat template cannot be used: .*"):
        template("{% if %}")
    with pytest.raises(TemplateError, match="chat template cannot be used"):
        template("{% for x in y %}")


def test_other_failures_name_the_template_and_the_reason() -> None:
    error = failure("{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}")
    assert str(error).startswith("The model's chat template failed: RecursionError")
    error = failure("{{ messages[0].content.nope() }}")
    assert str(error).startswith("The model's chat template failed: UndefinedError")


INJECTIONS = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ ''|attr('__class__')|attr('__mro__') }}",
    "{{ self.__init__.__globals__.__builtins__.__import__('os').popen('{cmd}').read() }}",
    "{{ cycler.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ joiner.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ namespace.__init__.__globals__.os.popen('{cmd}').read() }}",
    "{{ lipsum.__globals__['os'].popen('{cmd}').read() }}",
    "{{ request.application.__globals__.__builtins__.__import__('os').popen('{cmd}') }}",
    "{% for c in [].__class__.__base__.__subclasses__() %}{% if c.__name__ == 'catch_warnings' %}"
    "{{ c()._module.__builtins__['__import__']('os').popen('{cmd}').read() }}{% endif %}"
    "{% endfor %}",
    "{{ raise_exception.__globals__['sys'].modules['os'].popen('{cmd}') }}",
    "{{ strftime_now.__globals__['os'].popen('{cmd}') }}",
    "{{ '{0.__class__.__init__.__globals__}'.format('') }}",
    "{{ cycler('a', 'b').__init__.__globals__.os.popen('{cmd}') }}",
    "{% set j = joiner() %}{{ j.__call__.__globals__ }}",
    "{% set ns = namespace() %}{% set ns.__class__ = 1 %}{{ ns.__class__ }}",
    "{{ messages.append({'role': 'user', 'content': 'x'}) }}{{ messages|length }}",
    "{{ messages[0].update({'content': 'x'}) }}",
    "{{ messages.__class__.__subclasses__() }}",
]


@pytest.mark.parametrize("payload", INJECTIONS)
def test_template_injection_runs_no_code(payload: str, tmp_path: Path) -> None:
    witness = tmp_path / "ran"
    source = payload.replace("{cmd}", f"touch {witness}")
    outcome: RenderedPrompt | TemplateError
    try:
        outcome = render(source)
    except TemplateError as error:
        outcome = error
    if isinstance(outcome, TemplateError):
        assert "chat template" in str(outcome)
    else:
        text = outcome.text
        assert "class" not in text
        assert "module" not in text
        assert "function" not in text
    assert not witness.exists()
    assert [m["content"] for m in MESSAGES] == ["Be brief.", "Hello", "Hi.", "How are you?"]


def test_the_trace_function_is_only_there_while_rendering() -> None:
    before = sys.gettrace()
    render("{% for i in range(10) %}{{ i }}{% endfor %}")
    assert sys.gettrace() is before
    failure(RUNAWAY, time_budget=0.05)
    assert sys.gettrace() is before
    failure("{{ raise_exception('boom') }}")
    assert sys.gettrace() is before


def test_rendering_again_after_a_stop_works() -> None:
    chat_template = template("{% for m in messages %}{{ m.content }}{% endfor %}")
    stop = StopSignal()
    stop.set()
    with pytest.raises(TemplateError):
        chat_template.render(MESSAGES, stop)
    assert chat_template.render(MESSAGES, StopSignal()).text == "Be brief.HelloHi.How are you?"
