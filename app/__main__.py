"""``python -m app`` launches Floodgate."""

from app.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
