"""The composer: the prompt editor, a sent message being edited, the files for the next prompt."""
