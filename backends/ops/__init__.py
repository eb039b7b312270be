"""The use cases the CLI calls, over any adapter, through the contract and its
capabilities: erasing a subject (``erasure``), pruning idle sessions (``prune``), the
event log (``eventlog``), session snapshots and blob facts (``snapshot``, ``blobinfo``),
checking registry entries (``inspection``), the load test and its cleanup (``loadtest``),
the journal of a resumable destructive operation (``journal``) and the doctor's model,
dispatch and shared audits (``doctor``; each backend's own audit lives in its backend's
package and is declared in its :class:`~backends.info.BackendInfo`).

Nothing here is imported by an adapter: adapters sit below this layer. The package
imports nothing itself, so that ``semvecctl --help`` stays cheap.
"""
