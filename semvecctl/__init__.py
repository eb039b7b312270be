"""semvecctl: the operator toolkit for semvec session backends (thin CLI over ``backends``)."""

from backends import __version__

__all__ = ["__version__"]
