"""Models from the Hugging Face Hub: search, choose what fits, download, resume, verify (no Qt)."""
