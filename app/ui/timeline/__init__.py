"""The flow diagnostics: the live timeline, the panel around it, and recording a flow trace.

:mod:`~app.ui.timeline.timeline` draws :mod:`~app.ui.timeline.plots` of
:mod:`~app.ui.timeline.series`, with a reply's moments (:mod:`~app.ui.timeline.marks`) in
:mod:`~app.ui.timeline.style`'s colours; :mod:`~app.ui.timeline.diagnostics` is the panel and
:mod:`~app.ui.timeline.trace_recording` the View menu's flow trace.
"""
