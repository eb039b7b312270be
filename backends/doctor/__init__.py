"""The vocabulary every store's audit speaks (``semvecctl doctor``): findings, severities,
sections and safe repairs (``model``), and index reports as findings (``indexes``).

It sits below the backends, so that each backend's own audit (:mod:`backends.redis.audit`,
:mod:`backends.mongo.audit`, :mod:`backends.sql.audit`) imports it without reaching up; the
doctor itself (dispatch through :class:`~backends.info.BackendInfo`, the generic audit) is
:mod:`backends.ops.doctor`."""
