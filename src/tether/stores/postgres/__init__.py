"""The PostgreSQL backend (extra tether[postgres]): an owner's schema in a shared database.
What is here is what PostgreSQL alone does: connections, pools and tenancy (``conn``),
the DDL and its migration tracks (``schema``, ``sweep_schema``), the ``tsvector`` index
and its search (``text``, ``search``), COPY (``store``), the sweep workers' claims and
model stage (``sweep_claims``, ``sweep_stage``) and vectors (``vectors``). The
repositories are written once, in ``stores``."""

from tether.stores.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
