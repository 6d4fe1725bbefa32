"""The CLI's error edge: lodex errors (and anything unexpected) become one line on stderr and a non-zero exit."""

import os
from collections.abc import Callable
from functools import wraps
from typing import Any

import typer
from rich.console import Console

from lodex.store.errors import LodexError

err = Console(stderr=True, soft_wrap=True)


class ServerRefused(LodexError):
    """The `lodex serve` of this data dir refused a request with a 4xx answer: its message becomes the CLI's error
    (the request is at fault, so searching here instead would hide it)."""

    code = "server_refused"

    def __init__(self, where: str, message: str, status: int) -> None:
        fix = "set api.api_key (LODEX_API__API_KEY) to the server's key, or search here with --local" if status == 401 else ""
        super().__init__(f"{where}: {message}" if message else where, fix)
        self.status = status


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn lodex errors (and anything unexpected) into one line on stderr and exit code 2."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except LodexError as exc:
            err.print(f"[red]error:[/red] {exc.one_line()}", highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err.print("interrupted; committed work is kept, run the command again to finish")
            raise typer.Exit(130) from None
        except typer.Exit:
            raise
        except Exception as exc:  # the last line of defence: no stack trace reaches a user
            if os.environ.get("LODEX_DEBUG"):
                raise
            err.print(
                f"[red]error:[/red] unexpected {type(exc).__name__}: {exc} — rerun with LODEX_DEBUG=1 for details and report it",
                highlight=False,
                soft_wrap=True,
            )
            raise typer.Exit(1) from None

    return wrapper
