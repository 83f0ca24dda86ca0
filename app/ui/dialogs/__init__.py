"""The dialogs: settings, connecting to a server, the model library, and the Chat menu's dialogs."""
