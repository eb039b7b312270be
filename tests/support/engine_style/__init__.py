"""An engine-style adapter written by us, following ENGINE-WIRE §1-3 and §6 (and never
importing the engine): the convention the deployed engine calls (``scope=``, ``load``
returning ``(blob, version)``, its own event class, its event-store surface) over the
engine's Redis layout, one Lua script per write.

``Factory`` is what an entry point would name: called with no arguments, configured
only through the environment (``REDIS_URL``), as the engine loads a plugin. The copies
in :mod:`tests.support.engine_style.defective` carry the engine's two known Redis defects
(ENGINE-WIRE §7), so the conformance suite can show it catches each by name.
"""

from tests.support.engine_style.adapter import EngineStyleAdapter, Factory

__all__ = ["EngineStyleAdapter", "Factory"]
