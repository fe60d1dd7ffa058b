"""The Python client library: what a user imports (``from logbroker.client import Client, Producer``).

It speaks to a node only over HTTP and imports nothing of the server: its own modules, aiohttp and
msgpack, and ``segments.batch`` (the pure record-batch codec, the API's binary format).
``tests/test_layering.py`` checks this. Modules: ``core`` (``Client``), ``producer``, ``consumer``,
``group_consumer``, ``queue_consumer``, ``sync`` (blocking wrappers for scripts), and their parts
(``calls``, ``errors``, ``consumer_batch``, ``partitioning``, ``sse``, and ``metadata`` and
``routing``: where a call goes in a cluster and when it is sent again). Inside the package, modules
import each other by module, never through this one, so each imports on its own.
"""

from logbroker.client.consumer import Consumer, OffsetReset
from logbroker.client.consumer_batch import ConsumerBatch, ConsumerRecord, SkippedRecords
from logbroker.client.core import (
           CA_FILE_ENV,
           CERT_FILE_ENV,
           DEFAULT_URL,
           KEY_FILE_ENV,
           PASSWORD_ENV,
           TOKEN_ENV,
           USER_ENV,
           Client,
           FetchedBatches,
)
from logbroker.client.errors import LogBrokerError, UnreachableError
from logbroker.client.group_consumer import CommitFailedError, GroupConsumer
from logbroker.client.partitioning import key_partition
from logbroker.client.produce_stream import ProduceStream
from logbroker.client.producer import Producer, RecordMetadata
from logbroker.client.queue_consumer import QueueConsumer, QueueMessage
from logbroker.client.routing import RetryPolicy
from logbroker.client.sse import Event
from logbroker.client.subscription import Subscription
from logbroker.client.sync import SyncClient

__all__ = ["CA_FILE_ENV", "CERT_FILE_ENV", "DEFAULT_URL", "KEY_FILE_ENV", "PASSWORD_ENV", "TOKEN_ENV", "USER_ENV",
           "Client", "CommitFailedError", "Consumer", "ConsumerBatch", "ConsumerRecord", "Event", "FetchedBatches",
           "GroupConsumer", "LogBrokerError", "OffsetReset", "ProduceStream", "Producer", "QueueConsumer",
           "QueueMessage", "RecordMetadata", "RetryPolicy", "SkippedRecords", "Subscription", "SyncClient",
           "UnreachableError",
           "key_partition"]
