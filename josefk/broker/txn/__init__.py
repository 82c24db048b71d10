"""The transaction coordinator (KIP-98): transaction metadata, its ``__transaction_state``
log, the state machine and the markers that complete a transaction.

Modules: ``log_schema`` (Kafka's key/value format of the transaction log), ``metadata`` (the
states and one transactional id's metadata), ``store`` (where the records live), ``markers``
(who writes COMMIT/ABORT markers), ``coordinator`` (the requests and the timers).
"""
