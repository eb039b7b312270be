"""Collection, index and field names shared with deployed semvec stores.

They are the compatibility surface: sessions written by the engine must be readable
here and the other way round, so none of these may be renamed.
"""

STATE_COLLECTION = "semvec_session_state"
EVENTS_COLLECTION = "compliance_events"
COUNTERS_COLLECTION = "compliance_event_counters"
ITEMS_COLLECTION = "semvec_memory_items"
#: the erasure ledger (ours; the engine never reads it): documents ``key:<key id>`` (a
#: secret) and ``entry:<key id>:<hmac>`` (an erased subject)
LEDGER_COLLECTION = "semvecctl_erasure_ledger"

SESSION_TTL_INDEX = "semvec_session_ttl"
STATE_OWNER_INDEX = "ix_state_owner"
EVENT_USER_INDEX = "ix_evt_user"
EVENT_USER_SEQ_INDEX = "ix_evt_user_seq"
EVENT_USER_TIME_INDEX = "ix_evt_user_time"
ITEMS_SESSION_INDEX = "ix_items_session"
ITEMS_LIVE_RECENCY_INDEX = "ix_items_live_recency"
VECTOR_SEARCH_INDEX = "semvec_items_vec"
LEXICAL_SEARCH_INDEX = "semvec_items_lex"

DEFAULT_DATABASE = "semvec"
