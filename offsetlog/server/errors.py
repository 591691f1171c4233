"""offsetlog's exceptions as Kafka error codes on the wire."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from offsetlog.errors import OffsetlogError, StoreClosedError, StoreFailedError

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = int(ErrorCode.unknown_topic_or_partition)
COORDINATOR_NOT_AVAILABLE = int(ErrorCode.coordinator_not_available)
INVALID_TOPIC = int(ErrorCode.invalid_topic_exception)
OFFSET_METADATA_TOO_LARGE = int(ErrorCode.offset_metadata_too_large)
ILLEGAL_GENERATION = int(ErrorCode.illegal_generation)
INVALID_GROUP_ID = int(ErrorCode.invalid_group_id)
UNSUPPORTED_VERSION = int(ErrorCode.unsupported_version)
TOPIC_ALREADY_EXISTS = int(ErrorCode.topic_already_exists)
INVALID_PARTITIONS = int(ErrorCode.invalid_partitions)
INVALID_REPLICATION_FACTOR = int(ErrorCode.invalid_replication_factor)
INVALID_REQUEST = int(ErrorCode.invalid_request)
INVALID_PRODUCER_EPOCH = int(ErrorCode.invalid_producer_epoch)
INVALID_TXN_STATE = int(ErrorCode.invalid_txn_state)
INVALID_PRODUCER_ID_MAPPING = int(ErrorCode.invalid_producer_id_mapping)
INVALID_TRANSACTION_TIMEOUT = int(ErrorCode.invalid_transaction_timeout)
PRODUCER_FENCED = int(ErrorCode.producer_fenced)
NON_EMPTY_GROUP = int(ErrorCode.non_empty_group)
GROUP_ID_NOT_FOUND = int(ErrorCode.group_id_not_found)
UNSTABLE_OFFSET_COMMIT = int(ErrorCode.unstable_offset_commit)
GROUP_SUBSCRIBED_TO_TOPIC = int(ErrorCode.group_subscribed_to_topic)
STALE_MEMBER_EPOCH = int(ErrorCode.stale_member_epoch)
KAFKA_STORAGE_ERROR = int(ErrorCode.kafka_storage_error)
UNKNOWN_TOPIC_ID = int(ErrorCode.unknown_topic_id)
TRANSACTIONAL_ID_NOT_FOUND = int(ErrorCode.transactional_id_not_found)
INVALID_REGULAR_EXPRESSION = int(ErrorCode.invalid_regular_expression)
TRANSACTION_ABORTABLE = int(ErrorCode.transaction_abortable)
UNSUPPORTED_SASL_MECHANISM = int(ErrorCode.unsupported_sasl_mechanism)
ILLEGAL_SASL_STATE = int(ErrorCode.illegal_sasl_state)
SASL_AUTHENTICATION_FAILED = int(ErrorCode.sasl_authentication_failed)
RESOURCE_NOT_FOUND = int(ErrorCode.resource_not_found)
DUPLICATE_RESOURCE = int(ErrorCode.duplicate_resource)
UNACCEPTABLE_CREDENTIAL = int(ErrorCode.unacceptable_credential)

# authorization (docs/SECURITY.md)
TOPIC_AUTHORIZATION_FAILED = int(ErrorCode.topic_authorization_failed)
GROUP_AUTHORIZATION_FAILED = int(ErrorCode.group_authorization_failed)
CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = int(ErrorCode.transactional_id_authorization_failed)
SECURITY_DISABLED = int(ErrorCode.security_disabled)


def code_of(error: BaseException | None) -> int:
    """Kafka's error code for an exception from the store (0 for None).

    A closed store is COORDINATOR_NOT_AVAILABLE (the server is shutting down: clients look
    for the coordinator again); a failed store is KAFKA_STORAGE_ERROR; anything without a
    Kafka code is UNKNOWN_SERVER_ERROR."""
    if error is None:
        return NONE
    if isinstance(error, StoreClosedError):
        return COORDINATOR_NOT_AVAILABLE
    if isinstance(error, StoreFailedError):
        return KAFKA_STORAGE_ERROR
    if isinstance(error, OffsetlogError) and error.code:
        return error.code
    return UNKNOWN_SERVER_ERROR
