"""The Python client library (what a user imports)."""

from logbroker.client.core import (
    CA_FILE_ENV,
    DEFAULT_URL,
    PASSWORD_ENV,
    TOKEN_ENV,
    USER_ENV,
    Client,
    CommitFailedError,
    Consumer,
    ConsumerBatch,
    ConsumerRecord,
    FetchedBatches,
    GroupConsumer,
    LogBrokerError,
    Producer,
    QueueConsumer,
    QueueMessage,
    RecordMetadata,
)

__all__ = ["CA_FILE_ENV", "DEFAULT_URL", "PASSWORD_ENV", "TOKEN_ENV", "USER_ENV", "Client", "CommitFailedError",
           "Consumer", "ConsumerBatch", "ConsumerRecord", "FetchedBatches", "GroupConsumer", "LogBrokerError",
           "Producer", "QueueConsumer", "QueueMessage", "RecordMetadata"]
