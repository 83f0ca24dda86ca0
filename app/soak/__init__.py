"""The soak: the real window and the real model through hundreds of random, seeded cycles.

``floodgate soak`` (``make soak``) acts on the window as a restless user would: it sends,
stops (while the prompt is read, mid-reply, at once, twice, and sends again while the stop is
under way), regenerates, switches conversations and starts new chats, and now and then closes
the window mid-reply and starts Floodgate again on the same history. Meanwhile it records
what the user saw. At the end it reports:

- how many cycles ran, how long the longest took (a hang shows here, or ends the run);
- the process's threads and memory at intervals (both must stay flat);
- whether every greedy reply to the same prompt was the same (a probe prompt in a fresh chat
  now and then, and regenerated replies against the reply they replace): an abort that left
  the model's cache wrong shows up as a different reply;
- whether every prompt and every reply, partial or whole, is in the SQLite file exactly as
  it was shown, read directly with ``sqlite3`` after Floodgate closed.

The parts: :mod:`~app.soak.driver` (the cycles, acting on the window as a user would),
:mod:`~app.soak.report` (what was seen, and the checks of the history file) and
:mod:`~app.soak.cli` (the command line).
"""
