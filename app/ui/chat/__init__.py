"""The conversation view: prompts and replies as rows, read by mouse, keyboard and screen reader.

:mod:`~app.ui.chat.chat_view` is the view; :mod:`~app.ui.chat.transcript` draws a conversation in
it message by message; :mod:`~app.ui.chat.reply_rows` turns a streamed reply into rows and
:mod:`~app.ui.chat.build_queue` builds a large message's rows over event-loop turns;
:mod:`~app.ui.chat.selection`, :mod:`~app.ui.chat.message_keys` and
:mod:`~app.ui.chat.accessibility` are selecting, the keyboard and the screen reader. The rows
themselves are in :mod:`app.ui.chat.rows`.
"""
