"""Record batches no well-behaved client would write, sent to the real broker with a raw produce request.

Kafka's record format v2: a batch header (base offset, length, leader epoch, magic, a CRC-32C of
everything from the attributes on, the attributes whose low 3 bits are the codec, ...) and its records,
compressed as one block when the batch is. A corrupt block with a correct CRC passes the broker (Tansu
stores it as it is) and the consumer's CRC check, and fails when the consumer decompresses it: the
case of a producer bug, or of a codec library that decompresses differently.
"""

from __future__ import annotations

import struct
import time

from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.protocol.produce import ProduceRequest
from aiokafka.record.default_records import DefaultRecordBatchBuilder
from aiokafka.record.default_records import _DefaultRecordBatchPy as _Batch
from aiokafka.record.util import calc_crc32c

GZIP = 1


def batch_bytes(values: list[bytes], codec: int = 0) -> bytearray:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=0, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    now = int(time.time() * 1000)
    for i, value in enumerate(values):
        builder.append(i, timestamp=now, key=None, value=value, headers=[])
    return bytearray(builder.build())


def _with_crc(buf: bytearray) -> bytes:
    struct.pack_into(">I", buf, _Batch.CRC_OFFSET, calc_crc32c(bytes(buf[_Batch.ATTRIBUTES_OFFSET:])))
    return bytes(buf)


def corrupt_gzip_batch(values: list[bytes]) -> bytes:
    """A gzip batch whose compressed block is damaged, with a CRC that matches the damage."""
    buf = batch_bytes(values, GZIP)
    start = _Batch.HEADER_STRUCT.size + 12  # past the gzip header, into the deflate stream
    for i in range(start, min(len(buf), start + 24)):
        buf[i] ^= 0x5A
    return _with_crc(buf)


async def send_raw_batch(bootstrap: str, topic: str, partition: int, data: bytes) -> int:
    """Produce one batch of bytes as they are; returns the broker's error code (0: stored)."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=False)
    await producer.start()
    try:
        await producer.client.force_metadata_update()
        node = producer.client.cluster.leader_for_partition(TopicPartition(topic, partition))
        request = ProduceRequest(transactional_id=None, required_acks=-1, timeout=10000,
                                 topics=[(topic, [(partition, data)])])
        response = await producer.client.send(node, request)
    finally:
        await producer.stop()
    return response.topics[0][1][0][1]
