"""Files attached to a prompt: their text, read safely, and how they reach the model."""
