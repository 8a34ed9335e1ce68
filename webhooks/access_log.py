"""gunicorn's logger for the web process, without credentials: a signed media link
(`/charts/<token>.png`, `/voice/<token>.ogg`) lets anyone fetch a learner's chart or voice for a
day, and a query string carries what an operator searched for (`/recall?q=…`). The access log
keeps the method, the path with its token replaced, a mark where a query was, the status, the
size and the time taken; gunicorn's own error lines about a request are cleaned the same way."""

from __future__ import annotations

import re
from typing import Any

from gunicorn.glogging import Logger

# The routes whose path holds a signed token (webhooks/charts.py), and the extension each
# ends with; tests/webhooks/test_access_log.py checks that every route with a <token> is here.
SIGNED_ROUTES = {"/charts/": ".png", "/voice/": ".ogg"}
SIGNED_PREFIXES = tuple(SIGNED_ROUTES)
TOKEN = "<token>"
QUERY = "?<query>"
# A signed path or a query inside free text (gunicorn's error lines quote the request).
SIGNED_IN_TEXT = re.compile("(" + "|".join(map(re.escape, SIGNED_PREFIXES)) + r")[^\s'\"?/]+")
QUERY_IN_TEXT = re.compile(r"\?[^\s'\"]+")


def redact_path(path: str) -> str:
    """`path` with a signed link's token replaced: `/charts/<token>.png`."""
    for prefix, extension in SIGNED_ROUTES.items():
        if path.startswith(prefix):
            # Only the route's own extension is kept: a token holds dots of its own.
            return f"{prefix}{TOKEN}{extension if path.endswith(extension) else ''}"
    return path


def redact_target(path: str, query: str) -> str:
    """A request's target as the logs may show it: the redacted path, and only a mark where
    there was a query string."""
    return redact_path(path) + (QUERY if query else "")


def redact_text(text: str) -> str:
    """Free text (an error line) with every signed path's token and every query removed."""
    return QUERY_IN_TEXT.sub(QUERY, SIGNED_IN_TEXT.sub(rf"\g<1>{TOKEN}", text))


class RedactingLogger(Logger):  # type: ignore[misc]  # gunicorn has no type hints
    """gunicorn's logger, whose access and error lines carry no token and no query string."""

    def atoms(
        self, resp: Any, req: Any, environ: dict[str, Any], request_time: Any
    ) -> dict[str, Any]:
        """gunicorn's access-log atoms, with the request's target redacted in each of them."""
        atoms: dict[str, Any] = super().atoms(resp, req, environ, request_time)
        # PATH_INFO is decoded: a token hidden as /charts%2F… is still recognised.
        path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
        target = redact_target(path, query)
        method, protocol = environ.get("REQUEST_METHOD", "-"), environ.get("SERVER_PROTOCOL", "-")
        atoms.update(
            {
                "r": f"{method} {target} {protocol}",
                "U": redact_path(path),
                "q": QUERY if query else "",
                "f": redact_text(str(atoms.get("f", "-"))),
                "{referer}i": redact_text(str(atoms.get("{referer}i", "-"))),
            }
        )
        # The same, where a format names them as environment variables (%({raw_uri}e)s).
        for name, value in (
            ("{raw_uri}e", target),
            ("{request_uri}e", target),
            ("{path_info}e", redact_path(path)),
            ("{query_string}e", QUERY if query else ""),
        ):
            if name in atoms:
                atoms[name] = value
        return atoms

    def error(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        """An error line, cleaned of tokens and queries."""
        super().error(self._clean(msg, args), **kwargs)

    def warning(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        """A warning line (e.g. an invalid request, quoted), cleaned of tokens and queries."""
        super().warning(self._clean(msg, args), **kwargs)

    def exception(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        """gunicorn's "Error handling request <uri>" and its traceback, the URI cleaned."""
        super().exception(self._clean(msg, args), **kwargs)

    @staticmethod
    def _clean(msg: Any, args: tuple[Any, ...]) -> str:
        try:
            text = str(msg) % args if args else str(msg)
        except (TypeError, ValueError):  # arguments that do not fit: keep them all the same
            text = " ".join(map(str, (msg, *args)))
        return redact_text(text)
