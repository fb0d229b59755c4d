"""The positional words of a `table` command, after AIStor's `mc table`: `[ALIAS] NAME…`.

`mc` names the cluster first (`mc table warehouse create ALIAS WAREHOUSE`). This CLI talks to its
own store (or to `--server`), so the alias is optional: given, it is dropped with a note. An alias
is told from a name by counting words, never by guessing from the words themselves: the first
word is the alias exactly when there are more words than the command's names allow without one.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any


class AliasedWords(argparse.Action):
    """The positional words of a `table` command: `[ALIAS] NAME…`, each name set on the namespace.

    `names` are the destinations in order; the last `optional` of them may be left out, one by one,
    or with `together`, all or none (`WAREHOUSE [NAMESPACE TABLE]`: a namespace means nothing
    without its table, so 2 words are `ALIAS WAREHOUSE` and 3 are `WAREHOUSE NAMESPACE TABLE`).
    """

    def __init__(
        self,
        option_strings: list[str],
        dest: str,
        names: tuple[str, ...] = (),
        optional: int = 0,
        together: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(option_strings, dest, nargs="*", **kwargs)
        self.names = names
        self.optional = optional
        self.together = together

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        words = [str(word) for word in values or []]
        required = len(self.names) - self.optional
        if self.together:
            counts: tuple[int, ...] = (required, len(self.names))
            alias = words.pop(0) if len(words) - 1 in counts else None
        else:
            counts = tuple(range(required, len(self.names) + 1))
            alias = words.pop(0) if len(words) > required else None
        if len(words) not in counts:
            # `help` is the words as the usage line shows them: `[ALIAS] WAREHOUSE [PARENT]`.
            parser.error(f"expected {self.help}, got {len(words) + (alias is not None)} word(s)")
        if alias is not None:
            if not alias.rstrip("/") or "/" in alias.rstrip("/"):
                parser.error(f"invalid alias {alias!r}: an mc alias is one word")
            print(
                f"note: the alias {alias.rstrip('/')!r} is ignored (this CLI talks to its own server)",
                file=sys.stderr,
            )
        for index, name in enumerate(self.names):
            setattr(namespace, name, words[index] if index < len(words) else None)


def leaf(
    parent: Any,
    name: str,
    what: str,
    words: tuple[str, ...],
    text: str,
    optional: int = 0,
    together: bool = False,
) -> argparse.ArgumentParser:
    """One `table` command: its words after an optional alias, and `what` for the dispatcher."""
    given, left_out = [w.upper() for w in words[: len(words) - optional]], words[len(words) - optional :]
    shown = " ".join(
        ["[ALIAS]", *given]
        + ([f"[{' '.join(w.upper() for w in left_out)}]"] if together and left_out else [])
        + ([] if together else [f"[{w.upper()}]" for w in left_out])
    )
    parser: argparse.ArgumentParser = parent.add_parser(
        name, help=text, description=text, usage=f"%(prog)s {shown} [options]"
    )
    parser.add_argument(
        "words",
        action=AliasedWords,
        names=words,
        optional=optional,
        together=together,
        metavar="WORD",
        help=shown,
    )
    parser.set_defaults(what=what)
    return parser
