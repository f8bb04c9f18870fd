"""SQL errors that point at the offending text: the construct, its line and column, and a caret."""

from __future__ import annotations

from collections.abc import Sequence

from sqlglot import exp
from sqlglot.tokenizer_core import Token, TokenType

from bayesdp.errors import InvalidParameter

_WIDTH = 72


class SqlError(InvalidParameter):
    """A query bayesdp refuses or cannot read; `start`/`end` index the offending text (end
    exclusive). `str()` is the message followed by the query line with a caret under the text."""

    def __init__(self, message: str, query: str = "", start: int | None = None,
                 end: int | None = None) -> None:
        self.message, self.query = message, query
        self.start = start
        self.end = end if end is not None else (None if start is None else start + 1)
        super().__init__(self._render())

    @property
    def span(self) -> tuple[int, int] | None:
        """[start, end) of the offending text in the query, or None."""
        if self.start is None or not self.query:
            return None
        return self.start, self.end if self.end is not None else self.start + 1

    def _render(self) -> str:
        if self.start is None or not self.query:
            return self.message
        start = max(0, min(self.start, len(self.query)))
        end = max(start + 1, min(self.end or start + 1, len(self.query)))
        line_start = self.query.rfind("\n", 0, start) + 1
        line_end = self.query.find("\n", start)
        line_end = len(self.query) if line_end < 0 else line_end
        line_no = self.query.count("\n", 0, start) + 1
        # Show at most _WIDTH characters of the line, from a little before the offending text.
        left = max(line_start, min(start - 20, line_end - _WIDTH))
        right = min(line_end, left + _WIDTH)
        text = ("…" if left > line_start else "") + self.query[left:right].replace("\t", " ") + \
            ("…" if right < line_end else "")
        pad = (left > line_start) + start - left
        caret = " " * pad + "^" * max(1, min(end, right) - start)
        return (f"{self.message} (line {line_no}, column {start - line_start + 1})\n"
                f"  {text}\n  {caret}")


def span(node: exp.Expr | None, tokens: Sequence[Token] = ()) -> tuple[int | None, int | None]:
    """Character range [start, end) of a parsed node: the union over its subtree's tokens, widened
    with `tokens` over the keywords and parentheses that open it (sqlglot keeps no position for
    SELECT, DISTINCT, a function's name or a parenthesis)."""
    if node is None:
        return None, None
    starts, ends = [], []
    for n in node.walk():
        meta = n.meta if n._meta is not None else None
        if meta and "start" in meta:
            starts.append(meta["start"])
            ends.append(meta["end"] + 1)
    if not starts:
        return None, None
    start, end = min(starts), max(ends)
    at = next((i for i, t in enumerate(tokens) if t.start == start), None)
    own = node._meta is not None and "start" in node.meta
    if at is None or own:
        return start, end
    lead = next((v for k, v in _LEAD.items() if isinstance(node, k)), frozenset())
    named = isinstance(node, _CALLS)
    opened = 0
    while at > 0 and tokens[at - 1].token_type in lead:
        at -= 1
        kind = tokens[at].token_type
        opened += kind == TokenType.L_PAREN
        name_follows = (kind == TokenType.FARROW) if isinstance(node, exp.Kwarg) else \
            (kind == TokenType.L_PAREN and named)
        if name_follows and at > 0 and tokens[at - 1].token_type not in _STOP:
            at -= 1  # the function's or the named argument's name
            break
    close = next((i for i, t in enumerate(tokens) if t.end + 1 >= end), len(tokens) - 1)
    # Parentheses opened inside the span (a call such as read_csv('x')) close after its last token.
    opened += sum((t.token_type == TokenType.L_PAREN) - (t.token_type == TokenType.R_PAREN)
                  for t in tokens[at + 1:close + 1] if t.token_type in _OPEN | {TokenType.R_PAREN})
    while opened and close + 1 < len(tokens) and tokens[close + 1].token_type == TokenType.R_PAREN:
        close, opened = close + 1, opened - 1
    return tokens[at].start, max(end, tokens[close].end + 1)


_OPEN = frozenset({TokenType.L_PAREN})
_CALLS = (exp.Func, exp.Rollup, exp.Cube, exp.GroupingSets)
_LEAD: dict[type, frozenset[TokenType]] = {
    exp.Query: frozenset({TokenType.SELECT, TokenType.L_PAREN, TokenType.EXISTS, TokenType.DISTINCT}),
    exp.Subquery: frozenset({TokenType.SELECT, TokenType.L_PAREN, TokenType.EXISTS}),
    exp.Exists: frozenset({TokenType.SELECT, TokenType.L_PAREN, TokenType.EXISTS}),
    exp.Distinct: frozenset({TokenType.DISTINCT}),
    exp.Kwarg: frozenset({TokenType.FARROW, TokenType.L_PAREN}),
    exp.Neg: frozenset({TokenType.DASH}),
    exp.Tuple: _OPEN, exp.Paren: _OPEN, exp.Func: _OPEN, exp.Rollup: _OPEN, exp.Cube: _OPEN,
    exp.GroupingSets: _OPEN,
}
_STOP = frozenset({TokenType.COMMA, TokenType.L_PAREN, TokenType.R_PAREN, TokenType.SELECT,
                   TokenType.FARROW})


def refuse(message: str, query: str, node: exp.Expr | None, tokens: Sequence[Token] = ()) -> SqlError:
    start, end = span(node, tokens)
    return SqlError(message, query, start, end)
