"""Themes, the interface language, and the preferences file that remembers them."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest
from PySide6.QtGui import QColor, QPalette
from PySide6.QtWidgets import QApplication
from pytestqt.qtbot import QtBot

from app.engine.llama import open_llama
from app.flow.session import ChatSession, ModelState
from app.standins.scripted import ScriptedBackend, scripted_opener
from app.store.preferences import Preferences, load_preferences, save_preferences
from app.ui.chat.rows.text import theme_for
from app.ui.look.appearance import Appearance
from app.ui.look.language import I18N_DIR
from app.ui.look.theme import contrast, palette
from app.ui.window.main_window import MainWindow
from tests.support.loop import Loop, run_until
from tests.support.preferences import Saved

TS_FILE = I18N_DIR / "floodgate_zh_CN.ts"
APP_DIR = Path(__file__).resolve().parents[2] / "app"


@pytest.fixture
def restore_app(qapp: QApplication) -> Iterator[QApplication]:
    """Put the application's palette, font and style back: other tests share it."""
    saved_palette, saved_font = QPalette(qapp.palette()), qapp.font()
    saved_style = qapp.style().name()
    yield qapp
    appearance = qapp.findChild(Appearance)
    if appearance is not None:
        appearance.languages.apply("en")
        appearance.deleteLater()
    qapp.setStyle(saved_style)
    qapp.setPalette(saved_palette)
    qapp.setFont(saved_font)


@pytest.fixture
def window(qtbot: QtBot, loop: Loop) -> Iterator[MainWindow]:
    session = ChatSession(scripted_opener(ScriptedBackend(["Hi"])))
    window = MainWindow(session)
    qtbot.addWidget(window)
    window.show()
    session.open_model(Path("scripted.gguf"))
    run_until(loop, lambda: session.state is ModelState.READY)
    yield window
    loop.run_until_complete(session.close())


# -- language -----------------------------------------------------------------------------------


def test_every_string_in_the_code_is_in_the_translation_source(tmp_path: Path) -> None:
    # lupdate over the code, into a copy of the committed .ts: anything new or unfinished
    # is a string someone added without running `make translations` and translating it.
    copy = tmp_path / TS_FILE.name
    shutil.copy(TS_FILE, copy)
    lupdate = Path(sys.executable).parent / "pyside6-lupdate"
    sources = sorted(str(p) for p in APP_DIR.rglob("*.py"))
    subprocess.run(
        [str(lupdate), *sources, "-no-obsolete", "-locations", "none", "-ts", str(copy)],
        check=True,
        capture_output=True,
    )
    root = ET.parse(copy).getroot()
    untranslated = [
        m.findtext("source")
        for m in root.iter("message")
        if m.find("translation") is None
        or m.find("translation").get("type") == "unfinished"  # type: ignore[union-attr]
        or not m.findtext("translation")
    ]
    assert untranslated == []
    assert len(list(root.iter("message"))) > 40


def test_translations_keep_every_field_of_their_source() -> None:
    root = ET.parse(TS_FILE).getroot()
    for message in root.iter("message"):
        source, translation = message.findtext("source") or "", message.findtext("translation")
        assert translation, source
        assert sorted(re.findall(r"\{\w+\}", source)) == sorted(
            re.findall(r"\{\w+\}", translation)
        ), source


def test_the_window_switches_to_chinese_and_back(
    window: MainWindow, restore_app: QApplication, qtbot: QtBot
) -> None:
    appearance = Appearance(restore_app, saved := Saved(Preferences(language="en")))
    window.menus.language_chosen.connect(appearance.choose_language)
    assert window.send_button.text() == "Send"

    window.menus.language_actions["zh_CN"].trigger()
    assert appearance.languages.current == "zh_CN", "run `make test`: it builds the .qm files"
    # Qt posts the LanguageChange events; the window retranslates when they are delivered.
    qtbot.waitUntil(lambda: window.send_button.text() == "发送")
    assert window.menus.file_menu.title() == "文件(&F)"
    assert window.session.model is not None
    assert window.state_label.text() == f"{window.session.model.name} 已就绪。"
    assert "给模型发消息" in window.composer.placeholderText()
    assert window.diagnostics.titles["tokens"].text() == "词元/秒"
    assert saved.calls[-1] == Preferences(theme="system", language="zh_CN")

    window.menus.language_actions["en"].trigger()
    qtbot.waitUntil(lambda: window.send_button.text() == "Send")
    assert window.menus.file_menu.title() == "&File"


def test_sentences_from_the_engine_and_flow_are_translated(
    qtbot: QtBot, loop: Loop, restore_app: QApplication
) -> None:
    appearance = Appearance(restore_app, Saved(Preferences(language="zh_CN")))
    assert appearance.languages.current == "zh_CN"
    session = ChatSession(open_llama)
    window = MainWindow(session)
    qtbot.addWidget(window)
    session.open_model(Path("/nonexistent/model.gguf"))
    run_until(loop, lambda: session.state is ModelState.ERROR)
    expected = "模型文件 /nonexistent/model.gguf 不存在。"
    assert window.state_label.text() == expected
    assert expected in window.view.toPlainText()
    loop.run_until_complete(session.close())


def test_chinese_text_gets_a_cjk_font(restore_app: QApplication) -> None:
    appearance = Appearance(restore_app, Saved(Preferences(language="zh_CN")))
    families = restore_app.font().families()
    assert appearance.languages.current == "zh_CN"
    assert any("CJK" in f or "Hei" in f or "Han" in f for f in families), families


# -- theme --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dark", [False, True])
def test_both_themes_have_readable_contrast(dark: bool) -> None:
    p = palette(dark)
    role = QPalette.ColorRole
    for fg, bg in [
        (role.Text, role.Base),
        (role.WindowText, role.Window),
        (role.ButtonText, role.Button),
        (role.Text, role.AlternateBase),  # the user's own messages
        (role.PlaceholderText, role.Base),
        (role.Link, role.Base),
        (role.HighlightedText, role.Highlight),
    ]:
        assert contrast(p.color(fg), p.color(bg)) >= 4.5, (fg, bg)
    theme = theme_for(p)
    assert theme.dark is dark
    base = p.color(role.Base)
    assert contrast(QColor(theme.muted), base) >= 4.5
    assert contrast(QColor(theme.error), base) >= 4.5


def test_choosing_a_theme_recolours_the_open_conversation(
    window: MainWindow, restore_app: QApplication, qtbot: QtBot
) -> None:
    appearance = Appearance(restore_app, saved := Saved(Preferences(theme="light")))
    window.menus.theme_chosen.connect(appearance.choose_theme)
    window.view.begin_reply()
    window.view.append_to_reply("Some text\n\n```python\nx = 1\n```\n")
    window.view.end_reply()
    assert not window.view.theme.dark
    window.menus.theme_actions["dark"].trigger()
    qtbot.waitUntil(lambda: window.view.theme.dark)  # palette changes arrive as events
    assert restore_app.palette().color(QPalette.ColorRole.Base).lightness() < 60
    assert saved.calls[-1].theme == "dark"
    window.menus.theme_actions["light"].trigger()
    qtbot.waitUntil(lambda: not window.view.theme.dark)


# -- preferences file -----------------------------------------------------------------------------


def test_preferences_are_saved_in_the_data_directory(floodgate_home: Path) -> None:
    assert load_preferences() == Preferences()
    save_preferences(Preferences(theme="dark", language="zh_CN"))
    assert (floodgate_home / "preferences.json").is_file()
    assert load_preferences() == Preferences(theme="dark", language="zh_CN")


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", ""])
def test_a_broken_preferences_file_gives_the_defaults(
    floodgate_home: Path, content: str, caplog: pytest.LogCaptureFixture
) -> None:
    floodgate_home.mkdir(parents=True)
    (floodgate_home / "preferences.json").write_text(content)
    assert load_preferences() == Preferences()


def test_unknown_choices_in_preferences_fall_back_to_the_system(
    restore_app: QApplication,
) -> None:
    appearance = Appearance(restore_app, Saved(Preferences(theme="purple", language="xx")))
    assert appearance.theme == "system"
    assert appearance.language == "system"
