"""The web pages: one module per area (runs, compare, task sets, verifiers,
accounts), each a set of thin function views routed from dashboard/urls.py."""
