"""Settings: ranges checked as typed, saved with the preferences, applied to the session."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialogButtonBox,
    QLabel,
    QLineEdit,
    QMenu,
    QSpinBox,
)
from pytestqt.qtbot import QtBot

from app import defaults, serve
from app.engine import EngineOptions, GenerationSettings
from app.flow.options import engine_options, generation_settings
from app.flow.session import DEFAULT_QUEUE_BOUND, ChatSession
from app.main import build_parser, with_command_line
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.preferences import Preferences, load_preferences, save_preferences
from app.store.settings import (
    FIELDS,
    SAMPLING,
    Settings,
    from_mapping,
    overrides,
    parse,
    with_overrides,
)
from app.ui.dialogs.settings_dialog import SettingsDialog
from tests.support.loop import Loop

FIELD = {f.name: f for f in FIELDS}


def test_the_defaults_are_the_engines_and_the_flows() -> None:
    assert generation_settings(Settings()) == GenerationSettings()
    # One difference, on purpose: the app chooses its parallel replies (Auto), while the
    # engine alone decodes one at a time unless told (its tests and the bench compare those).
    assert Settings().parallel == defaults.PARALLEL == 0
    assert EngineOptions().parallel == 1
    assert engine_options(Settings()) == replace(EngineOptions(), parallel=0)
    assert Settings().queue_bound == DEFAULT_QUEUE_BOUND


@pytest.mark.parametrize(
    ("name", "text", "value"),
    [
        ("temperature", "0", 0.0),
        ("temperature", " 1.5 ", 1.5),
        ("top_k", "0", 0),
        ("seed", "", None),
        ("seed", "42", 42),
        ("n_ctx", "8192", 8192),
        ("parallel", "0", 0),
        ("parallel", "8", 8),
        ("system_prompt", "  Be brief.  ", "  Be brief.  "),
    ],
)
def test_values_in_range_are_taken(name: str, text: str, value: object) -> None:
    assert parse(FIELD[name], text) == (value, None)


@pytest.mark.parametrize(
    ("name", "text", "says"),
    [
        ("temperature", "2.5", "from 0 to 2"),
        ("temperature", "warm", "from 0 to 2"),
        ("temperature", "nan", "from 0 to 2"),
        ("top_k", "1.5", "whole number"),
        ("max_tokens", "0", "whole number from 1"),
        ("n_ctx", "100", "from 256"),
        ("seed", "-1", "random seed"),
        ("queue_bound", "", "whole number"),
        ("parallel", "9", "from 0 to 8"),
        ("parallel", "-1", "from 0 to 8"),
    ],
)
def test_values_out_of_range_get_a_sentence(name: str, text: str, says: str) -> None:
    value, problem = parse(FIELD[name], text)
    assert value is None
    assert problem is not None
    assert says in str(problem)


def test_settings_are_saved_with_the_preferences(floodgate_home: Path) -> None:
    chosen = Settings(temperature=0.2, seed=7, n_ctx=2048, system_prompt="Answer in French.")
    save_preferences(Preferences(theme="dark", settings=chosen))
    assert load_preferences() == Preferences(theme="dark", settings=chosen)


def test_saved_settings_that_are_out_of_range_keep_their_defaults() -> None:
    settings = from_mapping({"temperature": 9, "top_k": "lots", "n_ctx": 1024, "unknown": 1})
    assert settings == Settings(n_ctx=1024)
    assert from_mapping("not a mapping") == Settings()


def test_the_dialog_says_what_is_wrong_and_only_accepts_valid_values(qtbot: QtBot) -> None:
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    dialog.show()
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    temperature = dialog.editors["temperature"]
    assert isinstance(temperature, QLineEdit)
    assert ok.isEnabled()
    temperature.setText("5")
    assert not ok.isEnabled()
    assert dialog.problems["temperature"].isVisible()
    assert "from 0 to 2" in dialog.problems["temperature"].text()
    temperature.setText("0.3")
    assert ok.isEnabled()
    assert not dialog.problems["temperature"].isVisible()
    seed = dialog.editors["seed"]
    assert isinstance(seed, QLineEdit)
    seed.setText("123")
    with qtbot.waitSignal(dialog.settings_chosen) as chosen:
        ok.click()
    assert chosen.args == [Settings(temperature=0.3, seed=123)]


def test_applying_settings_to_the_session(loop: Loop) -> None:
    # Opened with the settings' engine options, as the app is.
    session = ChatSession(scripted_opener(ScriptedBackend()), options=engine_options(Settings()))
    assert not session.use_settings(Settings(temperature=0.1, queue_bound=8))
    assert session.settings.temperature == 0.1
    assert session.queue_bound == 8
    assert session.use_settings(Settings(n_ctx=1024))  # the model must be opened again
    assert session.options.n_ctx == 1024
    loop.run_until_complete(session.close())


def test_the_command_line_wins_over_saved_settings() -> None:
    args = argparse.Namespace(
        threads=3,
        ctx=None,
        queue_bound=None,
        compute="cpu",
        gpu_layers=None,
        parallel=None,
        prompt_lookup=None,
        draft_model=None,
    )
    assert with_command_line(
        Settings(decode_threads=1, n_ctx=2048, gpu_layers=9, parallel=2), args
    ) == Settings(decode_threads=3, n_ctx=2048, compute="cpu", gpu_layers=9, parallel=2)


# -- parallel replies ----------------------------------------------------------------------------


def test_parallel_replies_are_saved_and_reach_the_engine(floodgate_home: Path) -> None:
    save_preferences(Preferences(settings=Settings(parallel=3)))
    kept = load_preferences().settings
    assert kept.parallel == 3
    assert engine_options(kept).parallel == 3
    assert engine_options(Settings()).parallel == 0  # Auto: the engine chooses at load
    assert from_mapping({"parallel": 12}).parallel == defaults.PARALLEL  # out of range
    assert from_mapping({"parallel": "2"}).parallel == 2


def test_changing_parallel_replies_opens_the_model_again(loop: Loop) -> None:
    session = ChatSession(scripted_opener(ScriptedBackend()))
    session.use_settings(Settings())
    assert session.use_settings(Settings(parallel=4))
    assert session.options.parallel == 4
    assert not session.use_settings(Settings(parallel=4))  # the same again: nothing to reload
    loop.run_until_complete(session.close())


def test_the_windows_command_line_sets_parallel_replies() -> None:
    saved = Settings(parallel=5)
    assert with_command_line(saved, build_parser().parse_args([])).parallel == 5
    assert with_command_line(saved, build_parser().parse_args(["--parallel", "0"])).parallel == 0
    assert with_command_line(saved, build_parser().parse_args(["--parallel", "2"])).parallel == 2


def test_serve_parallel_reaches_the_engine_options() -> None:
    options = engine_options(Settings(parallel=0))
    args = serve.build_parser().parse_args(["--parallel", "3"])
    assert serve.with_command_line(options, args).parallel == 3
    unsaid = serve.build_parser().parse_args([])
    assert serve.with_command_line(options, unsaid).parallel == 0  # the settings' (Auto)
    assert "--parallel" in serve.build_parser().format_help()


@pytest.mark.parametrize("value", ["-1", "two"])
def test_a_parallel_that_is_not_a_count_is_refused(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for parser in (build_parser(), serve.build_parser()):
        with pytest.raises(SystemExit):
            parser.parse_args(["--parallel", value])
        assert "--parallel" in capsys.readouterr().err


def test_the_dialog_offers_parallel_replies_with_auto(qtbot: QtBot) -> None:
    dialog = SettingsDialog(Settings(), parallel=3)
    qtbot.addWidget(dialog)
    dialog.show()
    parallel = dialog.editors["parallel"]
    assert isinstance(parallel, QSpinBox)
    assert (parallel.minimum(), parallel.maximum()) == (0, defaults.PARALLEL_MAX)
    assert parallel.value() == 0
    assert parallel.text() == "Auto (3 now)"  # 0 is Auto, with what the open model chose
    assert "memory" in parallel.toolTip()
    compute = dialog.sections.widget(1)
    assert dialog.sections.tabText(1) == "Compute"
    assert compute.isAncestorOf(parallel)
    assert dialog.note.isVisible()  # applies when the model is opened again
    parallel.setValue(2)
    assert parallel.text() == "2"
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(dialog.settings_chosen) as chosen:
        ok.click()
    assert chosen.args == [Settings(parallel=2)]
    unknown = SettingsDialog(Settings(parallel=0))  # no local model: Auto alone
    qtbot.addWidget(unknown)
    spin = unknown.editors["parallel"]
    assert isinstance(spin, QSpinBox)
    assert spin.text() == "Auto"


def test_a_conversation_keeps_only_what_differs_from_the_apps_settings(qtbot: QtBot) -> None:
    base = Settings(temperature=0.7)
    dialog = SettingsDialog(base, only=SAMPLING)
    qtbot.addWidget(dialog)
    assert set(dialog.editors) == set(SAMPLING)
    assert not dialog.note.isVisibleTo(dialog)  # nothing here needs the model reopened
    temperature = dialog.editors["temperature"]
    assert isinstance(temperature, QLineEdit)
    temperature.setText("0.2")
    values, valid = dialog.values()
    assert valid
    assert overrides(replace(base, **values), base) == {"temperature": 0.2}
    assert with_overrides(base, {"temperature": 0.2, "n_ctx": 99}) == replace(base, temperature=0.2)


# -- guessing ahead (speculative decoding) ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"), [("on", True), ("True", True), ("off", False), ("0", False)]
)
def test_guessing_ahead_is_on_or_off(text: str, value: bool) -> None:
    assert parse(FIELD["prompt_lookup"], text) == (value, None)
    wrong, problem = parse(FIELD["prompt_lookup"], "sometimes")
    assert wrong is None
    assert "on or off" in str(problem)


def test_guessing_ahead_is_off_unless_chosen_and_reaches_the_engine(floodgate_home: Path) -> None:
    assert Settings().prompt_lookup is False
    assert engine_options(Settings()).prompt_lookup is False
    save_preferences(Preferences(settings=Settings(prompt_lookup=True)))
    kept = load_preferences().settings
    assert kept.prompt_lookup is True
    assert engine_options(kept).prompt_lookup is True
    saved = Settings(prompt_lookup=True)
    args = build_parser().parse_args(["--no-prompt-lookup"])
    assert with_command_line(saved, args).prompt_lookup is False
    assert with_command_line(saved, build_parser().parse_args([])).prompt_lookup is True
    on = serve.build_parser().parse_args(["--prompt-lookup"])
    assert serve.with_command_line(engine_options(Settings()), on).prompt_lookup is True


def test_the_dialog_offers_guessing_ahead_as_a_box_to_tick(qtbot: QtBot) -> None:
    dialog = SettingsDialog(Settings())
    qtbot.addWidget(dialog)
    dialog.show()
    box = dialog.editors["prompt_lookup"]
    assert isinstance(box, QCheckBox)
    assert not box.isChecked()
    assert dialog.sections.widget(1).isAncestorOf(box)  # Compute
    assert "differ" in box.toolTip()  # says what it may cost
    box.setChecked(True)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(dialog.settings_chosen) as chosen:
        ok.click()
    assert chosen.args == [Settings(prompt_lookup=True)]


# -- a draft model --------------------------------------------------------------------------------


def test_a_draft_model_is_chosen_from_those_offered_and_reaches_the_engine(qtbot: QtBot) -> None:
    offered = [("/models/Small.gguf", "Small (94 MB)"), ("/models/Mid.gguf", "Mid (300 MB)")]
    dialog = SettingsDialog(Settings(), drafts=offered)
    qtbot.addWidget(dialog)
    dialog.show()
    box = dialog.editors["draft_model"]
    assert isinstance(box, QComboBox)
    assert [box.itemText(i) for i in range(box.count())] == [
        "None",
        "Small (94 MB)",
        "Mid (300 MB)",
    ]
    assert box.currentText() == "None"
    assert "vocabulary" in box.toolTip()
    box.setCurrentIndex(1)
    ok = dialog.buttons.button(QDialogButtonBox.StandardButton.Ok)
    with qtbot.waitSignal(dialog.settings_chosen) as chosen:
        ok.click()
    assert chosen.args == [Settings(draft_model="/models/Small.gguf")]
    assert engine_options(chosen.args[0]).draft_model == Path("/models/Small.gguf")
    assert engine_options(Settings()).draft_model is None


def test_a_saved_draft_model_not_offered_now_is_shown_as_such(qtbot: QtBot) -> None:
    dialog = SettingsDialog(Settings(draft_model="/models/Gone.gguf"), drafts=[])
    qtbot.addWidget(dialog)
    box = dialog.editors["draft_model"]
    assert isinstance(box, QComboBox)
    assert box.currentText() == "Gone.gguf (not of the open model's vocabulary, or not found)"
    box.setCurrentIndex(0)  # None
    assert dialog.values()[0]["draft_model"] == ""


def test_the_command_line_names_a_draft_model(tmp_path: Path) -> None:
    draft = tmp_path / "Small.gguf"
    window = with_command_line(Settings(), build_parser().parse_args(["--draft-model", str(draft)]))
    assert window.draft_model == str(draft)
    assert with_command_line(window, build_parser().parse_args([])).draft_model == str(draft)
    args = serve.build_parser().parse_args(["--draft-model", str(draft)])
    assert serve.with_command_line(engine_options(Settings()), args).draft_model == draft


def test_the_window_offers_as_draft_models_those_of_the_open_models_vocabulary(
    qtbot: QtBot, loop: Loop, tmp_path: Path
) -> None:
    from app.engine.model_card import ModelCard
    from app.engine.model_file import readable_name
    from app.ui.window.app_dialogs import AppDialogs
    from app.ui.window.main_window import MainWindow
    from tests.support.loop import run_until
    from tests.support.preferences import Saved

    session = ChatSession(scripted_opener(ScriptedBackend(["Hi"])))
    window = MainWindow(session)
    qtbot.addWidget(window)
    keeper = Saved()
    dialogs = AppDialogs(window, keeper)
    run_until(loop, lambda: not dialogs._scanning)
    big = tmp_path / "Family-7B.gguf"
    session.open_model(big)
    run_until(loop, lambda: session.model is not None and session.model.path == big)

    def card(name: str, vocabulary: str, size: int) -> ModelCard:
        return ModelCard(
            tmp_path / name,
            readable_name(tmp_path / name),  # as the library names it
            "llama",
            None,
            "Q4_0",
            None,
            size,
            True,
            vocabulary=vocabulary,
        )

    for each in (
        card("Family-7B.gguf", "one", 4_000_000_000),
        card("Family-0.5B.gguf", "one", 400 * 2**20),
        card("Family-1B.gguf", "one", 900 * 2**20),
        card("Stranger-1B.gguf", "two", 900_000_000),
        card("Unread.gguf", "", 10),
    ):
        window.header.add_card(each)
    dialogs.open_settings()
    dialog = window.findChild(SettingsDialog)
    assert dialog is not None
    box = dialog.editors["draft_model"]
    assert isinstance(box, QComboBox)
    offered = [box.itemText(i) for i in range(box.count())]
    assert offered == [  # smallest first; the quantization tells apart two files of one model
        "None",
        "Family-0.5B  ·  Q4_0  ·  400 MB",
        "Family-1B  ·  Q4_0  ·  900 MB",
    ]
    dialog.reject()

    # The header's picker offers the same, under Draft model, with the one in force ticked;
    # choosing one applies and saves the setting, and the model opens again with it.
    def draft_menu() -> list[QAction]:
        window.header.menu.aboutToShow.emit()  # as the picker opens
        submenu = window.header.menu.findChild(QMenu, "draftMenu")
        assert submenu is not None
        return submenu.actions()

    actions = draft_menu()
    assert [a.text() for a in actions] == offered
    assert [a.isChecked() for a in actions] == [True, False, False]
    actions[1].trigger()
    small = str(tmp_path / "Family-0.5B.gguf")
    assert keeper.preferences.settings.draft_model == small
    run_until(loop, lambda: session.model is not None and session.model.draft_model is not None)
    assert [a.isChecked() for a in draft_menu()] == [False, True, False]
    draft_menu()[0].trigger()  # None
    run_until(loop, lambda: session.model is not None and session.model.draft_model is None)
    assert keeper.preferences.settings.draft_model == ""
    loop.run_until_complete(session.close())


def test_settings_from_the_command_line_show_in_force_and_are_saved_only_when_changed(
    qtbot: QtBot, loop: Loop
) -> None:
    from app.main import settings_from_command_line
    from app.ui.window.app_dialogs import AppDialogs
    from app.ui.window.main_window import MainWindow
    from tests.support.loop import run_until
    from tests.support.preferences import Saved

    session = ChatSession(scripted_opener(ScriptedBackend(["Hi"])))
    window = MainWindow(session)
    qtbot.addWidget(window)
    keeper = Saved()
    command_line = settings_from_command_line(
        build_parser().parse_args(["--prompt-lookup", "--threads", "1"])
    )
    session.use_settings(command_line.apply(keeper.preferences.settings))
    dialogs = AppDialogs(window, keeper, command_line)
    run_until(loop, lambda: not dialogs._scanning)  # the picker's first scan, on its thread

    def settings_dialog() -> SettingsDialog:
        dialogs.open_settings()
        dialog = window.findChildren(SettingsDialog)[-1]
        qtbot.addWidget(dialog)
        return dialog

    # Shown as in force, and marked as the command line's.
    dialog = settings_dialog()
    lookup = dialog.editors["prompt_lookup"]
    assert isinstance(lookup, QCheckBox)
    assert lookup.isChecked()
    marked = [label for label in dialog.findChildren(QLabel) if "(command line)" in label.text()]
    assert len(marked) == 2  # the guessing ahead and the decode threads
    # OK with them as shown: in force still, and the saved settings are not the flags'.
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert keeper.preferences.settings.prompt_lookup is False
    assert keeper.preferences.settings.decode_threads == 0
    assert session.host.options.prompt_lookup is True
    assert session.host.options.n_threads == 1
    # Unticked in the window: the user's choice from now on, in force and saved.
    dialog = settings_dialog()
    lookup = dialog.editors["prompt_lookup"]
    assert isinstance(lookup, QCheckBox)
    lookup.setChecked(False)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert session.host.options.prompt_lookup is False
    assert session.host.options.n_threads == 1  # still the command line's
    assert set(command_line.given) == {"decode_threads"}
    dialog = settings_dialog()
    lookup = dialog.editors["prompt_lookup"]
    assert isinstance(lookup, QCheckBox)
    lookup.setChecked(True)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert keeper.preferences.settings.prompt_lookup is True  # chosen here: saved
    assert session.host.options.prompt_lookup is True
    loop.run_until_complete(session.close())
