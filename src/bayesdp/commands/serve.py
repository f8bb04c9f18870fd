"""`bayesdp serve`: run the curator's query service, or manage its analysts.

    bayesdp serve --config service.toml [--host 127.0.0.1] [--port 8000]
        [--ssl-keyfile key.pem --ssl-certfile cert.pem]
    bayesdp serve --demo [--port N]
    bayesdp serve analysts add NAME [--datasets D ...] --config service.toml   # prints the token once
    bayesdp serve analysts datasets NAME [D ... | --all] --config ...    # show or limit their datasets
    bayesdp serve analysts list|revoke NAME --config service.toml
    bayesdp serve analysts budget NAME [DATASET --epsilon E --delta D --accounting A] --config ...
    bayesdp serve audit [--analyst NAME] --config service.toml  # the log, with private details
"""

from __future__ import annotations

import argparse
import datetime
import socket
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from bayesdp.commands import ACCOUNTINGS
from bayesdp.errors import InvalidParameter

out = Console(highlight=False)


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "serve", help="run the curator's query service (HTTP API for analysts), or manage analysts",
        description="Serve private releases, a reusable holdout and synthetic data to analysts, each "
                    "with a token and a budget per dataset. Only differentially private outputs leave.",
        epilog=(__doc__ or "").split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", help="the service configuration (TOML; see bayesdp.serve.config)")
    parser.add_argument("--demo", action="store_true",
                        help="serve the RAND Health Insurance Experiment with one new analyst")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (default 8000; 0: a free one)")
    parser.add_argument("--ssl-keyfile", help="TLS private key (PEM); with --ssl-certfile serves HTTPS")
    parser.add_argument("--ssl-certfile", help="TLS certificate chain (PEM)")
    parser.set_defaults(run=run)
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    analysts = actions.add_parser("analysts", help="add, list or revoke analysts; set their budgets")
    verbs = analysts.add_subparsers(dest="verb", metavar="VERB", required=True)
    for verb, text in (("add", "create an analyst and print their token (shown once)"),
                       ("list", "list the analysts"), ("revoke", "revoke an analyst's token"),
                       ("budget", "show an analyst's budgets, or set one before first use"),
                       ("datasets", "show the datasets an analyst may use, or limit them")):
        p = verbs.add_parser(verb, help=text)
        if verb != "list":
            p.add_argument("name", help="the analyst's name")
        if verb == "add":
            p.add_argument("--datasets", nargs="+", metavar="DATASET",
                           help="only these datasets (default: all the configuration opens to them)")
        if verb == "datasets":
            p.add_argument("datasets", nargs="*", metavar="DATASET", help="limit the analyst to these")
            p.add_argument("--all", action="store_true", help="lift the limit")
        if verb == "budget":
            p.add_argument("dataset", nargs="?", help="set the budget on this dataset")
            p.add_argument("--epsilon", type=float)
            p.add_argument("--delta", type=float, default=0.0)
            p.add_argument("--accounting", default="basic", choices=ACCOUNTINGS)
        p.add_argument("--config", default=argparse.SUPPRESS, help="the service configuration")
    audit = actions.add_parser("audit", help="show the audit log (curator only: it holds private details)")
    audit.add_argument("--analyst", help="only this analyst's requests")
    audit.add_argument("--config", default=argparse.SUPPRESS, help="the service configuration")


def run(args: argparse.Namespace) -> int:
    if args.demo:
        if args.action or args.config:
            raise InvalidParameter("--demo takes no --config and no action")
        return _serve_demo(args)
    if not args.config:
        raise InvalidParameter("--config is missing: bayesdp serve --config service.toml (or --demo)")
    from bayesdp.serve.config import load_config
    from bayesdp.serve.state import State

    config = load_config(args.config)
    if args.action is None:
        return _serve(config, args)
    state = State(config)
    try:
        if args.action == "audit":
            return _audit(state, args.analyst)
        return _analysts(state, args)
    finally:
        state.close()


def _analysts(state: Any, args: argparse.Namespace) -> int:
    from bayesdp.serve.config import Budget
    from bayesdp.serve.service import budget_json

    if args.verb == "add":
        token = state.add_analyst(args.name, args.datasets)
        out.print(f"analyst {escape(args.name)} added; their token (shown only now):")
        print(token)
    elif args.verb == "datasets":
        if args.all and args.datasets:
            raise InvalidParameter("give either datasets or --all, not both")
        if args.all or args.datasets:
            state.set_access(args.name, None if args.all else args.datasets)
        shown = state.datasets_for(state.analyst(args.name).id)
        out.print(f"{escape(args.name)} may use: {escape(', '.join(shown)) or 'no dataset'}")
    elif args.verb == "revoke":
        state.revoke(args.name)
        out.print(f"revoked {escape(args.name)}'s token")
    elif args.verb == "list":
        table = Table("name", "id", "created", "status", "datasets")
        for a in state.analysts():
            table.add_row(escape(a.name), a.id, _when(a.created),
                          "active" if a.revoked is None else f"revoked {_when(a.revoked)}",
                          escape(", ".join(state.datasets_for(a.id))))
        out.print(table)
    elif args.dataset is not None:
        if args.epsilon is None:
            raise InvalidParameter("--epsilon is missing: the budget's ε on this dataset")
        state.set_budget(args.name, args.dataset, Budget(args.epsilon, args.delta, args.accounting))
        out.print(f"{escape(args.name)}'s budget on {escape(args.dataset)}: ε={args.epsilon:g}, "
                  f"δ={args.delta:g} ({args.accounting})")
    else:
        a = state.analyst(args.name)
        table = Table("dataset", "budget", "spent", "remaining", "releases")
        for name in state.config.datasets:
            if state.ledger_path(a.id, name).exists():
                b = budget_json(state.ledger(a.id, name))
                table.add_row(name, b["budget"]["text"], b["spent"]["text"], b["remaining"]["text"],
                              str(b["releases"]))
            else:
                b = state.budget(a.id, name)
                table.add_row(name, f"ε={b.epsilon:g}, δ={b.delta:g} ({b.accounting})", "nothing", "all", "0")
        out.print(table)
    return 0


def _audit(state: Any, analyst: str | None) -> int:
    names = {a.id: a.name for a in state.analysts()}
    table = Table("time", "analyst", "request", "status", "spend ε", "result", "detail")
    for r in state.audit_log(state.analyst(analyst).id if analyst else None):
        table.add_row(_when(r["time"]), escape(names.get(r["analyst"], "-")),
                      escape(f"{r['method']} {r['path']}"), r["status"],
                      "" if r["spend_epsilon"] is None else f"{r['spend_epsilon']:.4g}",
                      r["result"] or "", escape(r["detail"] or ""))
    out.print(table)
    return 0


def _when(t: float) -> str:
    return datetime.datetime.fromtimestamp(t, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _serve_demo(args: argparse.Namespace) -> int:
    from bayesdp.serve.demo import demo_config
    from bayesdp.serve.state import State

    config = demo_config()
    state = State(config)
    try:
        token = state.add_analyst("demo")
    finally:
        state.close()
    return _serve(config, args, token)


def _serve(config: Any, args: argparse.Namespace, token: str | None = None) -> int:
    """Bind first (so the printed URL is the real one, port 0 included), then run uvicorn."""
    import uvicorn

    from bayesdp.serve.app import create_app
    from bayesdp.serve.limits import cap_process

    if bool(args.ssl_keyfile) != bool(args.ssl_certfile):
        raise InvalidParameter("give both --ssl-keyfile and --ssl-certfile to serve HTTPS")
    cap_process(config.limits)
    app = create_app(config)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    # proto IPPROTO_TCP, not 0: asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets
    # that say they are TCP, and with it on every keep-alive response waited 40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.host, args.port))
    host, port = sock.getsockname()[:2]
    scheme = "https" if args.ssl_certfile else "http"
    shown = f"[{host}]" if family == socket.AF_INET6 else host
    print(f"URL: {scheme}://{shown}:{port}/", flush=True)
    if token is not None:
        print(f"Token: {token}", flush=True)
    server = uvicorn.Server(uvicorn_config(app, config, args))
    server.run(sockets=[sock])
    return 0


def uvicorn_config(app: Any, config: Any, args: argparse.Namespace) -> Any:
    """Uvicorn's settings: X-Forwarded-For and -Proto are read only from the configured proxies
    (uvicorn trusts 127.0.0.1 by default, which lets anyone on the host pick their address)."""
    import uvicorn

    from bayesdp.serve.connections import timed_h11

    proxies = list(config.trusted_proxies)
    return uvicorn.Config(app, ssl_keyfile=args.ssl_keyfile, ssl_certfile=args.ssl_certfile, log_level="info",
                          access_log=False, proxy_headers=bool(proxies), forwarded_allow_ips=proxies,
                          http=timed_h11(config.limits.body_seconds))
