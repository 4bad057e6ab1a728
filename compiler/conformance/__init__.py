"""The ONNX backend conformance suite through Prism (``python -m compiler.conformance``).

``cases`` collects the cases, ``skips`` reads the checked-in skip file (``skips.toml``),
``runner`` runs cases in isolated worker processes (``worker``), ``__main__`` prints the per-op
table and writes the JSON report.
"""
