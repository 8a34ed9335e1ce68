"""`pam chat`: talk to Pam in the terminal, one line per message (so it can be scripted)."""

from __future__ import annotations

import sys
from typing import TextIO

from bot.runtime import Pam

QUIT = "/quit"


def chat(pam: Pam, user: str, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout) -> None:
    """Read lines until /quit or end of input, printing Pam's answers."""
    interactive = stdin.isatty()
    if interactive:
        print(f"Pam is here, {user}. Type /help for commands and /quit to leave.\n", file=stdout)
    external_id = f"terminal:{user}"
    while True:
        if interactive:
            print("you> ", end="", file=stdout, flush=True)
        line = stdin.readline()
        if not line:
            break
        text = line.rstrip("\n")
        if text.strip().lower() == QUIT:
            break
        for answer in pam.tutor.handle(external_id, text, display_name=user):
            print(f"pam> {answer}\n", file=stdout, flush=True)
