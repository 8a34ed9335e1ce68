"""Every command the deploy files name, read from the files themselves: the Procfile's
processes, fly.toml's [processes] and release_command, the Dockerfile's CMD and app.json's
scripts. A process renamed, added or moved in any of them shows up here, and in the tests
that start each one."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from loopback.harness import ROOT

Kind = Literal["web", "worker", "release"]
# What each platform's process name means, so that the tests know how to check it.
KINDS: dict[str, Kind] = {
    "web": "web",
    "worker": "worker",
    "release": "release",
    "release_command": "release",
    "postdeploy": "release",
    "CMD": "web",  # the image's default process: the Dockerfile says so
}


@dataclass(frozen=True)
class DeployCommand:
    """One command a platform runs: where it is named, what it is, and how it is run —
    `argv`, or `shell` for a line the platform hands to a shell (Heroku runs Procfile lines
    and app.json scripts with bash)."""

    source: str
    name: str
    argv: tuple[str, ...] = ()
    shell: str | None = None

    @property
    def kind(self) -> Kind:
        return KINDS[self.name]

    @property
    def id(self) -> str:
        return f"{self.source}:{self.name}"

    @property
    def words(self) -> tuple[str, ...]:
        """The command's words, as a shell would split them."""
        return tuple(shlex.split(self.shell)) if self.shell is not None else self.argv


def procfile(root: Path = ROOT) -> list[DeployCommand]:
    """The Procfile's processes: `name: command` lines, run by bash on Heroku."""
    found = []
    for line in (root / "Procfile").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, _, command = line.partition(":")
            found.append(DeployCommand("Procfile", name.strip(), shell=command.strip()))
    return found


def fly(root: Path = ROOT) -> list[DeployCommand]:
    """fly.toml's [processes] and [deploy] release_command. Fly runs them without a shell:
    it splits the string into words and executes them."""
    config = tomllib.loads((root / "fly.toml").read_text())
    found = [
        DeployCommand("fly.toml", name, argv=tuple(shlex.split(command)))
        for name, command in config.get("processes", {}).items()
    ]
    release = config.get("deploy", {}).get("release_command")
    if release:
        found.append(DeployCommand("fly.toml", "release_command", argv=tuple(shlex.split(release))))
    return found


def dockerfile(root: Path = ROOT) -> list[DeployCommand]:
    """The Dockerfile's CMD, in its JSON (exec) form: the words, run without a shell."""
    text = (root / "Dockerfile").read_text()
    commands = re.findall(r"^CMD\s+(\[.*\])\s*$", text, flags=re.MULTILINE)
    assert len(commands) == 1, "the Dockerfile has one CMD, in the JSON (exec) form"
    argv = json.loads(commands[0])
    assert isinstance(argv, list) and all(isinstance(word, str) for word in argv)
    return [DeployCommand("Dockerfile", "CMD", argv=tuple(argv))]


def app_json(root: Path = ROOT) -> list[DeployCommand]:
    """app.json's scripts (Heroku runs each with bash)."""
    scripts = json.loads((root / "app.json").read_text()).get("scripts", {})
    return [DeployCommand("app.json", name, shell=command) for name, command in scripts.items()]


def deploy_commands(root: Path = ROOT) -> list[DeployCommand]:
    """Every command any deploy file names."""
    return [*procfile(root), *fly(root), *dockerfile(root), *app_json(root)]


def fly_config(root: Path = ROOT) -> dict[str, object]:
    """fly.toml, parsed."""
    return tomllib.loads((root / "fly.toml").read_text())
