"""A launcher for this checkout on a Linux desktop, without root: `make install`, `uninstall`.

What it puts, following the freedesktop.org specifications (XDG base directories, desktop
entries, the hicolor icon theme, AppStream):

- ``$XDG_DATA_HOME/applications/<id>.desktop``: the entry menus, docks and launchers show;
- ``$XDG_DATA_HOME/icons/hicolor/<n>x<n>/apps/<id>.png`` for every rendered size of
  ``resources/icons/app/``, and ``hicolor/scalable/apps/<id>.svg``, the drawing itself;
- ``$XDG_DATA_HOME/metainfo/<id>.metainfo.xml``: what software centres say about it;
- ``~/.local/bin/floodgate``: a small shell script that starts this checkout's Floodgate from
  any folder (``.venv/bin/floodgate``, with the arguments it is given), on the model given with
  ``--model``, else ``$FLOODGATE_MODEL``, else the model used last (the bundled default the
  first time), as ``make run`` does.

``$XDG_DATA_HOME`` is ``~/.local/share`` when unset. Uninstalling removes exactly those files,
and only ours: the text files carry a marker line, and install refuses to replace a file of
that name that lacks it (another program's ``floodgate``, say) before writing anything. The
folders stay: they are the standard ones every application shares.

Caches: GTK reads a theme's ``icon-theme.cache`` only while it is newer than the theme's folder,
and a stale one hides icons installed after it; the desktop database (``mimeinfo.cache``) only
maps file types, which this entry declares none of. So each is refreshed where it already exists
and its tool is installed, and never created: without them the desktop reads the folders.

Linux only for now: elsewhere it says so, and how to start Floodgate, and touches nothing.

Run by the Makefile from the project folder::

    python -m app.install.launcher install|uninstall|check

Standard library only, like the rest of :mod:`app.install`.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

APP_ID = "io.github.floodgate.Floodgate"
"""The application's reverse-DNS name: the desktop entry's and the icon's file name, the
AppStream id, and the name Wayland docks match Floodgate's windows to (app/main.py sets it)."""

COMMAND = "floodgate"
"""The launcher's name in the user's ``bin`` folder."""

MARKER = "Written by Floodgate's `make install`; `make uninstall` removes it."
"""The line that tells our files from another program's of the same name."""

PROJECT_DIR = Path(__file__).resolve().parent.parent.parent
"""This checkout: the folder holding ``app/``, ``resources/`` and ``.venv/``."""

_ICON_DIR = Path("resources") / "icons" / "app"
_DRAWING = "floodgate.svg"
_RENDERING = re.compile(r"floodgate-(\d+)\.png")
"""A rendering of the drawing at one size (app/ui/look/app_icon.py makes them)."""


@dataclass(frozen=True)
class Places:
    """Where a launcher goes: the user's data folder and the folder of their commands."""

    data_home: Path
    """``$XDG_DATA_HOME``: applications/, icons/, metainfo/ go under it."""
    bin_dir: Path
    """Where the ``floodgate`` command goes (``~/.local/bin``)."""

    @classmethod
    def of_user(cls, environ: Mapping[str, str] = os.environ) -> Places:
        """The current user's places, as the XDG base directory specification defines them."""
        home = Path(environ.get("HOME") or Path.home())
        given = environ.get("XDG_DATA_HOME", "")
        # The specification: a relative path is invalid and is ignored.
        data_home = Path(given) if given and Path(given).is_absolute() else home / ".local/share"
        return cls(data_home=data_home, bin_dir=home / ".local" / "bin")

    def desktop_entry(self) -> Path:
        """The desktop entry's file."""
        return self.data_home / "applications" / f"{APP_ID}.desktop"

    def metainfo(self) -> Path:
        """The AppStream metainfo file."""
        return self.data_home / "metainfo" / f"{APP_ID}.metainfo.xml"

    def icon_theme(self) -> Path:
        """The user's part of the hicolor theme (the fallback theme every desktop reads)."""
        return self.data_home / "icons" / "hicolor"

    def icon(self, size: int | None) -> Path:
        """The icon at ``size`` pixels, or the scalable drawing when ``size`` is None."""
        if size is None:
            return self.icon_theme() / "scalable" / "apps" / f"{APP_ID}.svg"
        return self.icon_theme() / f"{size}x{size}" / "apps" / f"{APP_ID}.png"

    def command(self) -> Path:
        """The launcher script."""
        return self.bin_dir / COMMAND


@dataclass(frozen=True)
class InstallFile:
    """One file install writes: where, what, and whether it is a program."""

    path: Path
    content: bytes
    executable: bool = False
    marked: bool = True
    """A text file carrying :data:`MARKER` (icons are recognised by their name alone)."""


class ForeignFileError(Exception):
    """A file where the launcher would go belongs to someone else; nothing was written."""


def icon_sizes(project_dir: Path) -> list[int]:
    """The sizes rendered in ``resources/icons/app/``, smallest first."""
    sizes = []
    for path in (project_dir / _ICON_DIR).iterdir():
        found = _RENDERING.fullmatch(path.name)
        if found:
            sizes.append(int(found.group(1)))
    return sorted(sizes)


def planned_files(project_dir: Path, places: Places) -> list[InstallFile]:
    """Every file install writes, with its content (the uninstall removes these paths)."""
    icons = project_dir / _ICON_DIR
    files = [
        InstallFile(places.command(), _launcher_script(project_dir), executable=True),
        InstallFile(places.desktop_entry(), _desktop_entry(places.command())),
        InstallFile(places.metainfo(), _metainfo(project_dir)),
        InstallFile(places.icon(None), (icons / _DRAWING).read_bytes(), marked=False),
    ]
    for size in icon_sizes(project_dir):
        data = (icons / f"floodgate-{size}.png").read_bytes()
        files.append(InstallFile(places.icon(size), data, marked=False))
    return files


def install(project_dir: Path, places: Places) -> list[Path]:
    """Write the launcher, the desktop entry, the icons and the metainfo; refresh caches.

    Returns:
        The files written.

    Raises:
        ForeignFileError: a file of one of those names is another program's (nothing was written).
        FileNotFoundError: this checkout has no Floodgate set up in ``.venv`` yet.
    """
    program = _floodgate(project_dir)
    if not os.access(program, os.X_OK):
        raise FileNotFoundError(f"{program} is missing: run `make install` (it sets it up).")
    files = planned_files(project_dir, places)
    foreign = [f.path for f in files if f.marked and f.path.exists() and not _is_ours(f.path)]
    if foreign:
        raise ForeignFileError(
            "Not installed: these files already exist and were not written by Floodgate: "
            + ", ".join(str(path) for path in foreign)
            + ". Move them away and run `make install` again."
        )
    for file in files:
        _write(file)
    _refresh_caches(places)
    return [file.path for file in files]


def uninstall(places: Places) -> list[Path]:
    """Remove what :func:`install` wrote and refresh the caches it touched.

    Returns:
        The files removed. A file of the same name without the marker (another program's
        ``floodgate``) is left alone.
    """
    removed = []
    for path in _installed_paths(places):
        is_icon = path.suffix in (".png", ".svg")
        if path.is_file() and (is_icon or _is_ours(path)):
            path.unlink()
            removed.append(path)
    _refresh_caches(places)
    return removed


def _installed_paths(places: Places) -> list[Path]:
    """Every path install may have written, whatever sizes the icon had then."""
    paths = [places.command(), places.desktop_entry(), places.metainfo(), places.icon(None)]
    theme = places.icon_theme()
    if theme.is_dir():
        for folder in sorted(theme.iterdir()):
            found = re.fullmatch(r"(\d+)x\1", folder.name)
            if found:
                paths.append(places.icon(int(found.group(1))))
    return paths


def _floodgate(project_dir: Path) -> Path:
    """The ``floodgate`` command of this checkout's venv (the Makefile's ``.venv``)."""
    return project_dir / ".venv" / "bin" / "floodgate"


def _is_ours(path: Path) -> bool:
    """Whether a text file carries our marker (a read problem counts as not ours)."""
    try:
        with path.open("rb") as file:
            return MARKER.encode() in file.read(4096)
    except OSError:
        return False


def _write(file: InstallFile) -> None:
    """Write one file whole (a temporary file renamed over it), with its mode."""
    file.path.parent.mkdir(parents=True, exist_ok=True)
    partial = file.path.with_name(f".{file.path.name}.partial")
    partial.write_bytes(file.content)
    mode = 0o644
    if file.executable:
        mode |= stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH
    partial.chmod(mode)
    partial.replace(file.path)


def _launcher_script(project_dir: Path) -> bytes:
    """A POSIX shell script that runs this checkout's Floodgate with its arguments."""
    program = shlex.quote(str(_floodgate(project_dir)))
    checkout = shlex.quote(str(project_dir))
    return (
        "#!/bin/sh\n"
        f"# {MARKER}\n"
        f"# Starts Floodgate from the checkout at {project_dir} (its .venv), with the arguments\n"
        "# given: --model PATH, else $FLOODGATE_MODEL, else the model used last.\n"
        f"program={program}\n"
        'if [ ! -x "$program" ]; then\n'
        f'    echo "Floodgate is no longer set up in "{checkout}" (moved or deleted?). Run'
        ' make install in the checkout you use, or make uninstall to remove this launcher." >&2\n'
        "    exit 127\n"
        "fi\n"
        'exec "$program" "$@"\n'
    ).encode()


_EXEC_RESERVED = set(" \t\n\"'\\><~|&;$*?#()`")
"""Characters that make an Exec argument need quoting (the desktop entry specification)."""


def _exec_argument(text: str) -> str:
    """One argument of an Exec key: field codes escaped, quoted when it needs to be."""
    text = text.replace("%", "%%")
    if any(character in _EXEC_RESERVED for character in text):
        text = '"' + re.sub(r'(["`$\\])', r"\\\1", text) + '"'
    return _string_value(text)


def _string_value(text: str) -> str:
    """A desktop entry string value: backslashes and control characters escaped."""
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r")


def _desktop_entry(command: Path) -> bytes:
    """The desktop entry that starts the launcher script."""
    lines = [
        f"# {MARKER}",
        "[Desktop Entry]",
        "Type=Application",
        "Name=Floodgate",
        "GenericName=Local AI Chat",
        "GenericName[zh_CN]=本地 AI 聊天",
        "Comment=Chat with local language models (GGUF files, through llama.cpp)",
        "Comment[zh_CN]=与本地语言模型聊天（GGUF 文件，通过 llama.cpp）",
        f"Exec={_exec_argument(str(command))}",
        f"TryExec={_string_value(str(command))}",
        f"Icon={APP_ID}",
        "Terminal=false",
        "Categories=Utility;",
        "Keywords=AI;LLM;chat;GGUF;llama;language model;",
        "StartupNotify=true",
        # Qt names the X11 window class after the application's name (app/main.py).
        "StartupWMClass=Floodgate",
    ]
    return ("\n".join(lines) + "\n").encode()


def _metainfo(project_dir: Path) -> bytes:
    """The AppStream metainfo: what a software centre shows about Floodgate.

    No ``<releases>``: AppStream wants each with its date, and Floodgate has made none yet.
    """
    import tomllib  # here: `make uninstall` may run on a Python older than 3.11

    with (project_dir / "pyproject.toml").open("rb") as file:
        project = tomllib.load(file)["project"]
    licence = escape(str(project["license"]))
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<!-- {escape(MARKER)} -->
<component type="desktop-application">
  <id>{APP_ID}</id>
  <metadata_license>CC0-1.0</metadata_license>
  <project_license>{licence}</project_license>
  <name>Floodgate</name>
  <summary>Chat with local language models</summary>
  <description>
    <p>
      A desktop chat app for language models that run on your own machine: any GGUF file,
      through llama.cpp, with a small default model that works out of the box.
    </p>
    <p>
      Replies stream in without ever freezing the window, however fast the model runs, and
      Stop halts the computation itself within milliseconds, even in the middle of a long prompt.
      Conversations are kept, searchable, and can be exported.
    </p>
  </description>
  <launchable type="desktop-id">{APP_ID}.desktop</launchable>
  <developer_name>The Floodgate developers</developer_name>
  <content_rating type="oars-1.1"/>
  <provides>
    <binary>{COMMAND}</binary>
  </provides>
</component>
""".encode()


def _refresh_caches(places: Places) -> None:
    """Refresh the icon and desktop caches that exist, when their tools are installed."""
    theme = places.icon_theme()
    if (theme / "icon-theme.cache").is_file():
        _run_quietly(["gtk-update-icon-cache", "--quiet", "--force", "--ignore-theme-index"], theme)
    applications = places.desktop_entry().parent
    if (applications / "mimeinfo.cache").is_file():
        _run_quietly(["update-desktop-database", "--quiet"], applications)


def _run_quietly(command: list[str], folder: Path) -> None:
    """Run a cache tool on ``folder`` if it is installed; a failure is said, never fatal."""
    program = shutil.which(command[0])
    if program is None:
        return
    try:
        done = subprocess.run(
            [program, *command[1:], str(folder)], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        print(f"{command[0]} did not run ({error}); the desktop reads the folders instead.")
        return
    if done.returncode != 0:
        print(f"{command[0]} failed: {done.stderr.strip()}; the desktop reads the folders.")


def unsupported(platform: str) -> str | None:
    """Why there is no launcher to install on this platform, or None on Linux."""
    if platform.startswith("linux"):
        return None
    return (
        "`make install` puts a launcher on a Linux desktop (the freedesktop.org menus); on "
        f"this system ({platform}) it does nothing yet. Start Floodgate with `make run` in this "
        "folder, or run .venv/bin/floodgate (on Windows .venv\\Scripts\\floodgate.exe)."
    )


def main(argv: Sequence[str] | None = None, platform: str = sys.platform) -> int:
    """The command line (see the module's docstring)."""
    parser = argparse.ArgumentParser(
        prog="python -m app.install.launcher",
        description="Put a launcher for this checkout on the Linux desktop, or remove it.",
    )
    parser.add_argument(
        "action",
        choices=("install", "uninstall", "check"),
        help="install or uninstall the launcher; check: only whether this platform has one",
    )
    args = parser.parse_args(argv)
    why_not = unsupported(platform)
    if why_not is not None:
        print(why_not, file=sys.stderr)
        return 1
    places = Places.of_user()
    if args.action == "check":
        return 0
    if args.action == "uninstall":
        removed = uninstall(places)
        for path in removed:
            print(f"removed {path}")
        if not removed:
            print("No Floodgate launcher was installed.")
        return 0
    try:
        written = install(PROJECT_DIR, places)
    except (ForeignFileError, FileNotFoundError) as problem:
        print(problem, file=sys.stderr)
        return 1
    for path in written:
        print(f"installed {path}")
    print("Floodgate is in your applications menu; `make uninstall` removes it.")
    on_path = os.environ.get("PATH", "").split(os.pathsep)
    if str(places.bin_dir) in on_path:
        print(f"From a terminal: {COMMAND}")
    else:
        print(f"From a terminal: {places.command()} ({places.bin_dir} is not on your PATH)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
