"""What an empty chat shows: the model's name, a few example prompts, where to find other models.

It lies over the conversation view while the view has no rows, and goes as soon as the first
row arrives (a prompt sent, a conversation opened, a note).
"""

from __future__ import annotations

from PySide6.QtCore import QCoreApplication, QEvent, QObject, Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QLabel, QPushButton, QVBoxLayout, QWidget
from typing_extensions import override


def example_prompts() -> list[str]:
    """A few prompts to start from, in the current language."""
    return [
        QCoreApplication.translate("EmptyChat", "Explain how a rainbow forms, in three sentences."),
        QCoreApplication.translate(
            "EmptyChat", "Write a Python function that tells whether a word is a palindrome."
        ),
        QCoreApplication.translate("EmptyChat", "Suggest five names for a small bakery."),
        QCoreApplication.translate("EmptyChat", "What should I pack for a weekend of hiking?"),
    ]


class EmptyChat(QWidget):
    """The model's name, example prompts that fill the composer, and a way to the Hub.

    Args:
        area: the widget it covers (the conversation view's viewport); it follows its size.

    Signals:
        prompt_chosen(str): an example was clicked (the composer takes its text).
        library_requested(): the way to other models was clicked (the library's Hub tab).
    """

    prompt_chosen = Signal(str)
    library_requested = Signal()

    def __init__(self, area: QWidget) -> None:
        super().__init__(area)
        self.setObjectName("emptyChat")
        self._area = area
        self.model_name = QLabel(self)
        self.model_name.setObjectName("emptyModel")
        self.model_name.setTextFormat(Qt.TextFormat.PlainText)  # a model's name: not markup
        self.model_name.setAlignment(Qt.AlignmentFlag.AlignCenter)
        font = QFont(self.model_name.font())
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setWeight(QFont.Weight.DemiBold)
        self.model_name.setFont(font)
        self.invitation = QLabel(self)
        self.invitation.setObjectName("emptyHint")
        self.invitation.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.examples = [QPushButton(self) for _ in example_prompts()]
        for index, button in enumerate(self.examples):
            button.setObjectName("examplePrompt")
            button.setCursor(Qt.CursorShape.PointingHandCursor)
            button.clicked.connect(lambda _=False, i=index: self._choose(i))
        self.more = QLabel(self)
        self.more.setObjectName("emptyHint")
        self.more.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.more.setWordWrap(True)
        self.hub_button = QPushButton(self)
        self.hub_button.setObjectName("examplePrompt")
        self.hub_button.clicked.connect(self.library_requested)
        column = QVBoxLayout(self)
        column.setSpacing(10)
        column.addStretch(2)
        column.addWidget(self.model_name)
        column.addWidget(self.invitation)
        column.addSpacing(8)
        for button in self.examples:
            column.addWidget(button, 0, Qt.AlignmentFlag.AlignHCenter)
        column.addSpacing(18)
        column.addWidget(self.more)
        column.addWidget(self.hub_button, 0, Qt.AlignmentFlag.AlignHCenter)
        column.addStretch(3)
        area.installEventFilter(self)
        self.retranslate()
        self.show_model("")

    def show_model(self, name: str) -> None:
        """The model that will answer (empty: none is open yet)."""
        self.model_name.setText(name or QCoreApplication.translate("EmptyChat", "No model open"))

    def retranslate(self) -> None:
        """Every word in the current language."""
        self.invitation.setText(
            QCoreApplication.translate("EmptyChat", "Ask anything, or start from an example:")
        )
        for button, text in zip(self.examples, example_prompts(), strict=True):
            button.setText(text)
            button.setToolTip(QCoreApplication.translate("EmptyChat", "Put this in the composer"))
        self.more.setText(
            QCoreApplication.translate(
                "EmptyChat",
                "Want another model? Search the Hugging Face Hub in the model library "
                "(File > Models…), or open a GGUF file you have.",
            )
        )
        self.hub_button.setText(QCoreApplication.translate("EmptyChat", "Find models on the Hub"))

    def _choose(self, index: int) -> None:
        self.prompt_chosen.emit(example_prompts()[index])

    @override
    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self._area and event.type() == QEvent.Type.Resize:
            self.setGeometry(self._area.rect())
        return False

    @override
    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.LanguageChange:
            self.retranslate()
