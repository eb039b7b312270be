"""semvec's session-backend layer: the contract, the registry and the adapters.

Importable and useful without the CLI. Importing this package is cheap: drivers and
numpy are imported only by the adapter or retriever that needs them.
"""

__all__ = ["__version__"]

__version__ = "0.1.0"
