"""`make install`: a launcher, desktop entry, icons and metainfo in an XDG tree; uninstall."""

from __future__ import annotations

import configparser
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from app.install.launcher import (
    APP_ID,
    MARKER,
    ForeignFileError,
    Places,
    install,
    main,
    uninstall,
)
from app.store.paths import PROJECT_DIR
from app.ui.look.app_icon import DRAWING, SIZES


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """A user's home folder, with a space in its path (Exec and the script must quote it)."""
    return tmp_path / "a home"


@pytest.fixture
def places(home: Path) -> Places:
    return Places(data_home=home / ".local" / "share", bin_dir=home / ".local" / "bin")


def files_under(folder: Path) -> dict[Path, bytes]:
    return {path: path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def other_programs_files(places: Places) -> None:
    """What another application installed before: it must survive install and uninstall."""
    for path, text in [
        (places.data_home / "applications" / "org.example.Other.desktop", b"[Desktop Entry]\n"),
        (places.data_home / "icons/hicolor/16x16/apps/org.example.Other.png", b"not ours"),
        (places.data_home / "metainfo" / "org.example.Other.metainfo.xml", b"<component/>"),
        (places.bin_dir / "other-tool", b"#!/bin/sh\n"),
    ]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text)


def desktop_entry(places: Places) -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    parser.read(places.desktop_entry(), encoding="utf-8")
    return parser["Desktop Entry"]


def png_size(path: Path) -> tuple[int, int]:
    header = path.read_bytes()[:24]
    assert header[:8] == b"\x89PNG\r\n\x1a\n"
    return int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")


def test_install_puts_a_launcher_that_starts_floodgate_and_uninstall_removes_only_it(
    home: Path, places: Places
) -> None:
    other_programs_files(places)
    before = files_under(home)

    written = install(PROJECT_DIR, places)

    command = places.command()
    assert command.is_file()
    assert os.access(command, os.X_OK)
    entry = desktop_entry(places)
    assert entry["Type"] == "Application"
    assert entry["Name"] == "Floodgate"
    # The home has a space: Exec quotes the path, and it reads back as one argument.
    assert shlex.split(entry["Exec"]) == [str(command)]
    assert entry["TryExec"] == str(command)
    assert "Utility" in entry["Categories"].split(";")
    assert entry["Icon"] == APP_ID
    for size in SIZES:
        assert png_size(places.icon(size)) == (size, size)
    assert places.icon(None).read_bytes() == DRAWING.read_bytes()
    metainfo = ET.parse(places.metainfo()).getroot()
    assert metainfo.findtext("id") == APP_ID
    assert metainfo.findtext("launchable") == places.desktop_entry().name
    assert metainfo.findtext("project_license") == "Apache-2.0"

    # The command starts the real entry point from any folder.
    started = subprocess.run(
        [str(command), "--version"],
        cwd=home.parent,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert started.returncode == 0, started.stderr
    assert started.stdout.strip() == f"floodgate {importlib.metadata.version('floodgate')}"

    assert set(files_under(home)) == set(before) | set(written)
    assert sorted(uninstall(places)) == sorted(written)
    assert files_under(home) == before


def validate(tool: str, package: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a validator, or skip the test where it is not installed."""
    found = shutil.which(tool)
    if found is None:
        pytest.skip(f"{tool} is not installed (Debian/Ubuntu: {package})")
    return subprocess.run([found, *args], capture_output=True, text=True, timeout=60)


def test_the_desktop_entry_passes_desktop_file_validate(places: Places) -> None:
    install(PROJECT_DIR, places)
    checked = validate("desktop-file-validate", "desktop-file-utils", str(places.desktop_entry()))
    # Silent when the entry has neither an error nor a warning nor a hint.
    assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", "")


def test_the_metainfo_passes_appstreamcli_validate(places: Places) -> None:
    install(PROJECT_DIR, places)
    checked = validate("appstreamcli", "appstream", "validate", "--no-net", str(places.metainfo()))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "Validation was successful" in checked.stdout


def test_install_never_replaces_another_programs_floodgate(home: Path, places: Places) -> None:
    places.bin_dir.mkdir(parents=True)
    places.command().write_text("#!/bin/sh\necho another floodgate\n")
    before = files_under(home)

    with pytest.raises(ForeignFileError, match=str(places.command())):
        install(PROJECT_DIR, places)
    assert files_under(home) == before  # nothing written, not even the icons

    assert uninstall(places) == []
    assert files_under(home) == before


def test_installing_again_replaces_our_own_files(home: Path, places: Places) -> None:
    first = install(PROJECT_DIR, places)
    places.desktop_entry().write_text(f"# {MARKER}\n[Desktop Entry]\nName=stale\n")

    assert install(PROJECT_DIR, places) == first
    assert desktop_entry(places)["Name"] == "Floodgate"
    uninstall(places)
    assert files_under(home) == {}


def test_the_launcher_says_when_its_checkout_is_gone(tmp_path: Path, places: Places) -> None:
    checkout = tmp_path / "checkout"
    shutil.copytree(PROJECT_DIR / "resources" / "icons" / "app", checkout / "resources/icons/app")
    shutil.copy(PROJECT_DIR / "pyproject.toml", checkout)
    program = checkout / ".venv" / "bin" / "floodgate"
    program.parent.mkdir(parents=True)
    program.write_text('#!/bin/sh\necho "started with $*"\n')
    program.chmod(0o755)
    install(checkout, places)

    ran = subprocess.run(
        [str(places.command()), "--model", "a b.gguf"], capture_output=True, text=True, timeout=30
    )
    assert (ran.returncode, ran.stdout) == (0, "started with --model a b.gguf\n")

    shutil.rmtree(checkout)
    ran = subprocess.run([str(places.command())], capture_output=True, text=True, timeout=30)
    assert ran.returncode == 127
    assert f"no longer set up in {checkout}" in ran.stderr
    assert "make uninstall" in ran.stderr


def test_an_icon_cache_is_refreshed_where_one_exists_and_never_made(places: Places) -> None:
    tool = shutil.which("gtk-update-icon-cache")
    if tool is None:
        pytest.skip("gtk-update-icon-cache is not installed (Debian/Ubuntu: libgtk-3-bin)")
    cache = places.icon_theme() / "icon-theme.cache"
    install(PROJECT_DIR, places)
    assert not cache.exists()
    uninstall(places)

    # A theme with a cache (made by another program's install): ours must appear in it.
    other_programs_files(places)
    subprocess.run([tool, "-q", "-f", "-t", str(places.icon_theme())], check=True, timeout=60)
    assert APP_ID.encode() not in cache.read_bytes()
    install(PROJECT_DIR, places)
    assert APP_ID.encode() in cache.read_bytes()
    uninstall(places)
    assert APP_ID.encode() not in cache.read_bytes()


def test_the_user_places_follow_the_xdg_base_directories(home: Path) -> None:
    default = Places.of_user({"HOME": str(home)})
    assert default == Places(home / ".local/share", home / ".local/bin")
    given = Places.of_user({"HOME": str(home), "XDG_DATA_HOME": str(home / "data")})
    assert given.data_home == home / "data"
    # The specification: a relative XDG_DATA_HOME is invalid and ignored.
    relative = Places.of_user({"HOME": str(home), "XDG_DATA_HOME": "data"})
    assert relative.data_home == home / ".local/share"


@pytest.mark.parametrize("platform", ["darwin", "win32"])
def test_elsewhere_install_says_how_to_run_floodgate_and_touches_nothing(
    platform: str, home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)

    assert main(["install"], platform=platform) == 1
    assert main(["uninstall"], platform=platform) == 1

    said = capsys.readouterr().err
    assert "Linux desktop" in said
    assert platform in said
    assert "make run" in said
    assert not home.exists()


def test_on_linux_check_passes_and_uninstall_without_install_says_so(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    assert main(["check"], platform="linux") == 0
    assert main(["uninstall"], platform="linux") == 0
    assert "No Floodgate launcher was installed." in capsys.readouterr().out
    assert not home.exists()
