"""The window shell: the main window, its menus, status line and conversation list.

Also the application's dialogs wired to the window (:mod:`~app.ui.window.app_dialogs`) and one
Floodgate per data directory (:mod:`~app.ui.window.single_instance`).
"""
