"""Option declarations shared by every command, so flags look and behave the same.

Each flag is declared once here; a command's signature names the declarations it takes.
The store flags (``--backend``/``--uri``/``--adapter``) are not in any command's
signature: :func:`store_command` adds them to every command that works on one store and
hands the command one :class:`semvecctl.connection.Connection` bundle, which also takes the
command's own ``--owner``/``--unowned``/``--timeout`` (the global ``--shards`` and
``--profile`` reach it through the application). The owner flags say what they filter in
each command's own words (sessions, events, items, a data subject), so one factory makes
them.
"""


import functools
import inspect
from enum import Enum
from typing import Annotated, Any, Callable, List, Optional

import typer

from semvecctl.completers import complete_backend
from semvecctl.output import OutputFormat, StreamFormat

Output = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", help="Output format.", case_sensitive=False),
]
StreamOutput = Annotated[
    StreamFormat,
    typer.Option("--output", "-o", help="Output format (jsonl streams one object per line).",
                 case_sensitive=False),
]


class DocFormat(str, Enum):
    """Formats of a reference table (``config settings``): markdown is what the docs show."""

    table = "table"
    json = "json"
    markdown = "markdown"


DocOutput = Annotated[
    DocFormat,
    typer.Option("--output", "-o", help="Output format (markdown: the table the docs show).",
                 case_sensitive=False),
]
Backend = Annotated[
    Optional[str],
    typer.Option("--backend", "-b", help="Backend name (default: $SEMVEC_SESSION_BACKEND, then the profile; naming none is a "
                              "usage error where a store is read or written: --backend memory for the in-memory one).",
                 show_default=False, autocompletion=complete_backend),
]
#: for commands that never pick a backend for you (conformance certifies what it is told)
NamedBackend = Annotated[
    Optional[str],
    typer.Option("--backend", "-b", help="Backend name to certify (or name it with --uri / --adapter); "
                                         "there is no default: an unnamed backend is never certified as memory.",
                 show_default=False, autocompletion=complete_backend),
]
Uri = Annotated[
    Optional[str],
    typer.Option("--uri", "-u", help="Connection URI; its scheme implies the backend (redis://, mongodb://, postgresql://, memory://).",
                 show_default=False),
]
#: ``config set-profile``: what the profile stores, not a store to open now
ProfileUri = Annotated[
    Optional[str],
    typer.Option("--uri", "-u", help="The profile's connection URI (stored as given; shown redacted).",
                 show_default=False),
]
ProfileBackend = Annotated[
    Optional[str],
    typer.Option("--backend", "-b", help="The profile's backend name (optional when the URI implies it).",
                 show_default=False, autocompletion=complete_backend),
]
#: ``backends resolve``: a URI to resolve, not to connect to
ResolveUri = Annotated[
    Optional[str],
    typer.Option("--uri", help="Resolve what this URI selects (postgresql:// is told apart by what the database holds)."),
]
AdapterFactory = Annotated[
    Optional[str],
    typer.Option("--adapter", help="Load the adapter from Python code instead of the registry: module:factory.",
                 show_default=False, rich_help_panel="Backend authors"),
]
#: the one confirmation/overwrite vocabulary (docs/cli.md "Previews, --apply, --yes, --overwrite"):
#: a command that writes to a store previews unless --apply; --apply asks, --yes answers
Apply = Annotated[
    bool,
    typer.Option("--apply", help="Write (without it: a preview, nothing changed, exit 0). Asks "
                                 "first: --yes answers, required without a terminal (else exit 2)."),
]
#: ``doctor --fix --apply``: the same vocabulary, said of repairs and their proof
FixApply = Annotated[
    bool,
    typer.Option("--apply", help="With --fix: perform the repairs that cannot lose data, then "
                                 "audit the whole store again (exit 0 only when that re-audit "
                                 "finds no error). Asks first: --yes answers, required without "
                                 "a terminal (else exit 2)."),
]
#: how many a streaming read takes per round trip (listing, export, audit, prune, stats)
BatchSize = Annotated[
    int,
    typer.Option("--batch-size", min=1, max=10000, help="Sessions (keys, rows) read per round trip."),
]
Yes = Annotated[
    bool,
    typer.Option("--yes", "-y", help="Answer yes to the confirmation --apply asks for (required "
                                     "without a TTY; alone it is a usage error; never replaces "
                                     "a file)."),
]
#: an existing FILE is replaced only with this (and never because of --yes)
Overwrite = Annotated[
    bool,
    typer.Option("--overwrite", help="Replace an existing output file (without it an existing "
                                     "file is never touched: exit 2). --yes never allows this."),
]
#: export never asks; --yes is accepted (scripts pass it) and allows nothing
ExportYes = Annotated[
    bool,
    typer.Option("--yes", "-y", hidden=True,
                 help="Accepted and ignored: overwriting an existing archive needs --overwrite."),
]
#: ``conformance run``: the published divergences of the backend under test
KnownFailures = Annotated[
    Optional[str],
    typer.Option("--known-failures", metavar="FILE",
                 help="YAML list of known divergences (case, reason, link): a listed case that fails is an "
                      "expected failure, one that passes fails the run. Reports keep the strict level too.",
                 show_default=False),
]
#: age encryption of an archive (export, events export, prune --archive; the age extra)
EncryptTo = Annotated[
    Optional[List[str]],
    typer.Option("--encrypt-to", metavar="RECIPIENT", show_default=False,
                 help="Encrypt the archive to this age recipient (age1… or an ssh-ed25519/ssh-rsa "
                      "public key line); repeatable, each one can decrypt. Name the file *.age "
                      "(gzip, then encryption, for *.gz.age). Needs pip install 'semvecctl[age]'."),
]
EncryptToFile = Annotated[
    Optional[List[str]],
    typer.Option("--encrypt-to-file", metavar="FILE", show_default=False,
                 help="Encrypt to every recipient in FILE (one a line, # comments); repeatable."),
]
#: the keys that decrypt an age-encrypted archive (import)
Identity = Annotated[
    Optional[List[str]],
    typer.Option("--identity", "-i", metavar="FILE", show_default=False,
                 help="Decrypt an age-encrypted archive with this identity file (AGE-SECRET-KEY-1… "
                      "lines) or OpenSSH private key; repeatable. Needs pip install 'semvecctl[age]'."),
]
#: ``--shred-keys`` (sessions export/import, sessions prune --archive, erase, archive
#: verify): the crypto-shredding keyring, a private directory kept apart from the archives
ShredKeys = Annotated[
    Optional[str],
    typer.Option("--shred-keys", metavar="DIR", show_default=False,
                 help="Crypto-shredding keyring (a directory, mode 700, kept apart from the "
                      "archives): export and prune --archive seal each subject's events and "
                      "each session's state under keys kept there; erase --apply destroys the "
                      "subject's keys, after which no archive made with DIR yields its "
                      "records; import and archive verify open what is still readable. "
                      "Needs the cryptography package (pip install 'semvecctl[signing]')."),
]
#: ``--sign-with`` (erase, sessions prune, migrate cutover, shards cutover): a detached signature of the receipt
SignWith = Annotated[
    Optional[str],
    typer.Option("--sign-with", metavar="KEY", show_default=False,
                 help="Sign the receipt with this Ed25519 private key (OpenSSH or PKCS8 PEM, "
                      "unencrypted, mode 600): writes RECEIPT.sig, checked by 'semvecctl "
                      "receipts verify'. The key is checked before anything is done; needs "
                      "the signing extra: pip install 'semvecctl[signing]'."),
]
#: ``erasures export``: the detached signature of the ledger file (FILE.sig), as a receipt's
LedgerSignWith = Annotated[
    Optional[str],
    typer.Option("--sign-with", metavar="KEY", show_default=False,
                 help="Sign the file with this Ed25519 private key (OpenSSH or PKCS8 PEM, "
                      "unencrypted, mode 600): writes FILE.sig, as for receipts. Needs the "
                      "signing extra: pip install 'semvecctl[signing]'."),
]
#: ``erasures import``: the signer's public key; FILE.sig must then match
VerifyWith = Annotated[
    Optional[str],
    typer.Option("--verify-with", metavar="PUB", show_default=False,
                 help="Verify FILE.sig with this Ed25519 public key (an 'ssh-ed25519 AAAA…' "
                      "line or a PEM) before anything is recorded: unsigned, another signer or "
                      "changed bytes is exit 1."),
]
#: ``erasures record``: the engine's compliance public key (its certificates' signer)
CertificateKey = Annotated[
    Optional[str],
    typer.Option("--verify-with", metavar="PUB", show_default=False,
                 help="Verify the certificate's signature with the engine's compliance public "
                      "key (SEMVEC_COMPLIANCE_PUBKEY_FILE: a PEM) before recording: exit 1 "
                      "when it does not match."),
]
#: the probe's bound (health, doctor)
Timeout = Annotated[
    float,
    typer.Option("--timeout", "-t", min=0.01, max=3600.0, help="Seconds before giving up."),
]
#: how long ``indexes ensure --wait`` waits
WaitTimeout = Annotated[
    float,
    typer.Option("--timeout", "-t", min=0.0, help="Seconds --wait waits at most."),
]
#: ``--metrics-file`` (health, doctor, conformance run, prune, erase, load run, transfers)
MetricsFile = Annotated[
    Optional[str],
    typer.Option("--metrics-file", metavar="PATH", show_default=False,
                 help="Also write this run's metrics to PATH in the Prometheus text format "
                      "(replaced atomically, for node_exporter's textfile collector; needs "
                      "the metrics extra: pip install 'semvecctl[metrics]')."),
]
#: ``--watch [SECONDS]`` (health, stats, indexes validate): refresh until done or Ctrl-C
Watch = Annotated[
    Optional[float],
    typer.Option("--watch", metavar="[SECONDS]", min=0.1, max=86400.0, show_default=False,
                 help="Refresh every SECONDS (2 when left out): redrawn in place on a "
                      "terminal, one line per refresh on a pipe; Ctrl-C stops (exit 130)."),
]
#: ``indexes validate --watch``: how long to wait for every required index to match
WatchTimeout = Annotated[
    float,
    typer.Option("--timeout", "-t", min=0.0, help="With --watch: seconds to wait for every "
                                                  "required index to match (then exit 1)."),
]
#: ``stats --assume-ttl``: the same rule as ``sessions prune --assume-ttl``
AssumeTtl = Annotated[
    Optional[str],
    typer.Option("--assume-ttl", metavar="DURATION", show_default=False,
                 help="Redis only (it stores no write time): the idle TTL the engine applies on "
                      "every write; last write = now - (TTL - TTL left). A key with more TTL "
                      "left stops the run before any delete (exit 3)."),
]


def _owner(help_text: str) -> Any:
    return Annotated[Optional[str], typer.Option("--owner", help=help_text, show_default=False)]


def _unowned(help_text: str) -> Any:
    return Annotated[bool, typer.Option("--unowned", help=help_text)]


SessionOwner = _owner("Only sessions of this exact owner (tenant or tenant/agent).")
SessionUnowned = _unowned("Only sessions with no owner.")
EventOwner = _owner("Only events of this exact owner (tenant or tenant/agent).")
EventUnowned = _unowned("Only events with no owner.")
ItemOwner = _owner("Only items of this owner (tenant or tenant/agent). Default: unscoped.")
ItemUnowned = _unowned("Only items with no owner.")
#: ``sessions delete``: a guard on the one session named, not a filter
DeleteOwner = _owner("Delete only if the session belongs to this owner.")
DeleteUnowned = _unowned("Delete only if the session has no owner.")
#: ``erase``: which owner's user is the data subject (one of the two is required)
SubjectOwner = _owner("The subject's owner (tenant or tenant/agent): the user's events of "
                      "this owner only.")
SubjectUnowned = _unowned("The subject whose events carry no owner.")
#: ``erasures check``: the subject asked about (no owner: the unowned subject)
LedgerOwner = _owner("The subject's owner (tenant or tenant/agent); without it, the subject "
                     "whose events carry no owner.")


def owner_filter(owner: Optional[str], unowned: bool) -> Any:
    """The three-state owner filter (kept here for callers of this path; it lives with
    the connection bundle, :func:`semvecctl.connection.owner_filter`)."""
    from semvecctl.connection import owner_filter as resolve

    return resolve(owner, unowned)


# -- migrate (live migration between two stores) ---------------------------------------

MigrateFrom = Annotated[
    Optional[str],
    typer.Option("--from", help="Source URI (its scheme implies the backend).", show_default=False),
]
MigrateTo = Annotated[
    Optional[str],
    typer.Option("--to", help="Target URI (its scheme implies the backend).", show_default=False),
]
MigrateFromAdapter = Annotated[
    Optional[str],
    typer.Option("--from-adapter", help="Source adapter from Python code: module:factory.",
                 show_default=False, rich_help_panel="Backend authors"),
]
MigrateToAdapter = Annotated[
    Optional[str],
    typer.Option("--to-adapter", help="Target adapter from Python code: module:factory.",
                 show_default=False, rich_help_panel="Backend authors"),
]
MigrationStateFile = Annotated[
    str,
    typer.Option("--state", help="The migration's state file (created by the first 'migrate run', "
                                 "continued by every later one; bound to the two stores).",
                 show_default=False),
]
#: ``migrate run|cutover|abort``: the same --apply, said of the migration's target
MigrateApply = Annotated[
    bool,
    typer.Option("--apply", help="Write to the target (without it: a preview, nothing changed, "
                                 "exit 0). Asks first: --yes answers, required without a "
                                 "terminal (else exit 2)."),
]
AllowLoss = Annotated[
    bool,
    typer.Option("--allow-loss", help="Accept losing what the source cannot provide or the target "
                                      "cannot keep (items, events, sequences, expiry times, write "
                                      "times, drift flags); without it such a transfer is refused "
                                      "(exit 1) before anything is written."),
]
MatchSessions = Annotated[
    Optional[str],
    typer.Option("--match", "-m", help="Only session ids matching this glob (*, ?, [..]).",
                 show_default=False),
]

#: a two-store command's shard lists (the global --shards names one store's)
FromShards = Annotated[Optional[str], typer.Option(
    "--from-shards", show_default=False, metavar="DSN,DSN",
    help="The source SQL deployment's shard list, in the engine's order (as "
         "SEMVEC_STATE_DB_SHARDS; '' for none).")]
ToShards = Annotated[Optional[str], typer.Option(
    "--to-shards", show_default=False, metavar="DSN,DSN",
    help="The target SQL deployment's shard list, in the engine's order ('' for none).")]


# -- the store flags, added to every command that works on one store -------------------------

#: the parameters a command's bundle also takes from the command's own flags, when it has them
_BUNDLED = ("owner", "unowned", "timeout")


def store_command(*, backend: Any = Backend, adapter: bool = True) -> Callable[[Any], Any]:
    """Give a command the store flags and one connection bundle.

    The decorated function takes a parameter ``conn`` (a
    :class:`semvecctl.connection.Connection`) in place of ``--backend``/``--uri``/
    ``--adapter``: the decorator puts those options where ``conn`` stands in the signature
    Typer reads (so ``--help`` lists them with the command's own), builds the bundle from
    them and from the command's ``owner``/``unowned``/``timeout`` parameters when it has
    them (which the command still receives), and calls the command with it. ``backend``
    is the ``--backend`` declaration (``NamedBackend`` for a command that picks no
    default); ``adapter=False`` for commands that open no adapter from Python code."""
    store_params = [("backend", backend), ("uri", Uri)] + ([("adapter", AdapterFactory)]
                                                          if adapter else [])

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        signature = inspect.signature(command, eval_str=True)
        if "conn" not in signature.parameters:
            raise TypeError(f"{command.__name__}: a store command takes a 'conn' parameter")
        injected = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None,
                                      annotation=annotation)
                    for name, annotation in store_params]
        params: list[inspect.Parameter] = []
        for param in signature.parameters.values():
            if param.name == "conn":
                params.extend(injected)
            else:
                params.append(param.replace(kind=inspect.Parameter.KEYWORD_ONLY))

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            from semvecctl.connection import Connection

            store = [kwargs.pop(name) for name, _ in store_params]
            bundled = {name: kwargs[name] for name in _BUNDLED if name in kwargs}
            bundled["unowned"] = bool(bundled.get("unowned", False))
            conn = Connection(*store, **bundled)
            return command(conn=conn, **kwargs)

        run.__signature__ = signature.replace(parameters=params)  # type: ignore[attr-defined]
        run.__annotations__ = {p.name: p.annotation for p in params
                               if p.annotation is not inspect.Parameter.empty}
        run.__dict__.pop("__wrapped__", None)  # Typer reads this signature, not the command's
        return run
    return decorate
