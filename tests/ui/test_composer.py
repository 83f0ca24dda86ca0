"""The composer: as tall as its text, or its placeholder when empty."""

from __future__ import annotations

from pytestqt.qtbot import QtBot

from app.ui.composer.composer import Composer


def test_an_empty_composer_is_as_tall_as_its_placeholder_wraps(qtbot: QtBot) -> None:
    composer = Composer()
    qtbot.addWidget(composer)
    composer.resize(900, composer.height())
    composer.show()
    qtbot.waitExposed(composer)
    line = composer.fontMetrics().lineSpacing()
    qtbot.waitUntil(lambda: composer.height() < 2 * line + 12)
    one_line = composer.height()
    # Narrow (the window beside the diagnostics panel): the hint wraps, and is shown whole.
    composer.resize(composer.fontMetrics().horizontalAdvance("Message the model…") * 2, 0)
    qtbot.waitUntil(lambda: composer.height() >= one_line + line)
    assert composer.height() - one_line == (composer._placeholder_lines() - 1) * line
    # Text takes the placeholder's place: one line of it is one line high.
    composer.setPlainText("Hi")
    qtbot.waitUntil(lambda: composer.height() == one_line)
    composer.clear()
    qtbot.waitUntil(lambda: composer.height() > one_line)
    composer.resize(900, composer.height())
    qtbot.waitUntil(lambda: composer.height() == one_line)
