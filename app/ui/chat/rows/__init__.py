"""The rows of the conversation: widgets that know their height for a width, stacked by hand.

:mod:`~app.ui.chat.rows.base` (what every row is), :mod:`~app.ui.chat.rows.stack` (the stack
that places them), :mod:`~app.ui.chat.rows.text` (Markdown blocks, prompts, notes, thinking),
:mod:`~app.ui.chat.rows.code` (a code block, highlighted with :mod:`~app.ui.chat.rows.lexers`),
:mod:`~app.ui.chat.rows.header` (who wrote a message, and its buttons),
:mod:`~app.ui.chat.rows.text_block` (the text a row paints) and
:mod:`~app.ui.chat.rows.action_button` (the small buttons and the focus ring).
"""
