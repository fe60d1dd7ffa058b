package io.logbroker.spark;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * One batch's records as columns of positions into the records section (pure, reused from batch
 * to batch so a read allocates nothing per record).
 *
 * <p>{@link #parse} walks the msgpack records section once and checks what
 * {@code segments.batch.decode_columns} checks: an array of exactly {@code record_count} records,
 * each {@code [offset_delta int, timestamp_delta int, key bin|nil, value bin|nil, headers array of
 * [str, bin]]}, offset deltas increasing from >= 0 up to at most {@code last_offset_delta}, header
 * names valid UTF-8, timestamps that fit in 64 bits, and nothing after the last record. Anything
 * else raises {@link CorruptDataException}; no partially parsed batch is ever used.
 *
 * <p>A batch in Kafka's record format ({@link BatchFormat#KAFKA_RECORDS_FLAG}) is walked as
 * {@code segments.kafka_records.records} walks it: exactly {@code record_count} varint-framed records
 * filling the section, attributes bytes 0, offset deltas 0..n-1, varints of at most 5 (10 for the
 * timestamp delta) bytes, lengths of -1 (null) or more, at most 10,000 headers a record, header
 * names UTF-8; a header value Kafka wrote as null reads as empty bytes.
 */
public final class RecordColumns {
    /** Key or value length that stands for nil. */
    public static final int NIL = -1;

    public int count;
    public byte[] data;
    public long[] offsets = new long[0];
    public long[] timestamps = new long[0];
    public int[] keyPos = new int[0];
    public int[] keyLen = new int[0];
    public int[] valuePos = new int[0];
    public int[] valueLen = new int[0];
    /** Per record: its first header's index in the header arrays, and how many it has. */
    public int[] headerStart = new int[0];
    public int[] headerCount = new int[0];
    public int headerTotal;
    public String[] headerNames = new String[0];
    public int[] headerValuePos = new int[0];
    public int[] headerValueLen = new int[0];

    private final CharsetDecoder utf8 = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
    private int pos;
    private int end;

    /** Parse {@code b[start, end)}, the records section of the batch with header {@code h}. */
    public void parse(byte[] b, int start, int end, BatchFormat.Header h) {
        this.data = b;
        this.pos = start;
        this.end = end;
        this.headerTotal = 0;
        this.count = 0;
        if (h.kafkaRecords()) {
            parseKafka(h);
            return;
        }
        long records = h.recordCount();
        if (arrayLength("records section") != records) {
            throw new CorruptDataException("records section does not hold " + records + " records");
        }
        int n = (int) records;
        ensure(n);
        long previous = -1;
        boolean logAppend = h.logAppendTime();
        for (int i = 0; i < n; i++) {
            if (arrayLength("record") != 5) {
                throw new CorruptDataException("a record must be an array of 5 fields");
            }
            long delta = integer("offset delta");
            if (delta <= previous || delta > h.lastOffsetDelta()) {
                throw new CorruptDataException("record offset deltas must be increasing integers within the batch");
            }
            previous = delta;
            offsets[i] = h.baseOffset() + delta;
            long tsDelta = integer("timestamp delta");
            timestamps[i] = logAppend ? h.maxTimestamp() : timestamp(h.firstTimestamp(), tsDelta, lastIntegerUnsigned);
            keyLen[i] = binOrNil("key");
            keyPos[i] = pos - Math.max(keyLen[i], 0);
            valueLen[i] = binOrNil("value");
            valuePos[i] = pos - Math.max(valueLen[i], 0);
            headers(i);
        }
        if (pos != end) {
            throw new CorruptDataException("records section is not valid msgpack: " + (end - pos)
                    + " extra bytes after the records");
        }
        count = n;
    }

    private static final int KAFKA_RECORD_BODY_MIN = 6;
    /** {@code segments.kafka_records.HEADERS_PER_RECORD_MAX}. */
    private static final int KAFKA_HEADERS_PER_RECORD_MAX = 10_000;

    private void parseKafka(BatchFormat.Header h) {
        long records = h.recordCount();
        if (records > (end - pos) / (KAFKA_RECORD_BODY_MIN + 1)) {
            throw new CorruptDataException(records + " records cannot fit in a Kafka records section of " + (end - pos)
                    + " bytes");
        }
        int n = (int) records;
        ensure(n);
        boolean logAppend = h.logAppendTime();
        for (int i = 0; i < n; i++) {
            long length = varint(32, end);
            if (length < KAFKA_RECORD_BODY_MIN || length > end - pos) {
                throw new CorruptDataException("record " + i + ": length " + length + ", " + (end - pos) + " bytes left");
            }
            int recordEnd = pos + (int) length;
            if (data[pos++] != 0) {  // unused in magic 2: Kafka's writers write 0, librdkafka reads bit 3
                throw new CorruptDataException("record " + i + ": attributes byte " + (data[pos - 1] & 0xFF) + ", not 0");
            }
            long tsDelta = varint(64, recordEnd);
            if (varint(32, recordEnd) != i) {
                throw new CorruptDataException("record " + i + ": offset deltas must be 0, 1, 2 ... in order");
            }
            offsets[i] = h.baseOffset() + i;
            timestamps[i] = logAppend ? h.maxTimestamp() : timestamp(h.firstTimestamp(), tsDelta, false);
            keyLen[i] = kafkaBytes(recordEnd, "key");
            keyPos[i] = pos - Math.max(keyLen[i], 0);
            valueLen[i] = kafkaBytes(recordEnd, "value");
            valuePos[i] = pos - Math.max(valueLen[i], 0);
            kafkaHeaders(i, recordEnd);
            if (pos != recordEnd) {
                throw new CorruptDataException("record " + i + ": " + (recordEnd - pos) + " bytes left over after its headers");
            }
        }
        if (pos != end) {
            throw new CorruptDataException((end - pos) + " bytes left over after " + n + " Kafka records");
        }
        count = n;
    }

    /** A zigzag varint of at most {@code bits} bits that must end before {@code limit}. */
    private long varint(int bits, int limit) {
        int start = pos;
        int maxBytes = (bits + 6) / 7;
        long raw = 0;
        for (int shift = 0; ; shift += 7) {
            if (pos >= limit) {
                throw new CorruptDataException("a varint at byte " + start + " runs past its record");
            }
            if (pos - start >= maxBytes) {
                throw new CorruptDataException("a varint at byte " + start + " is longer than " + maxBytes + " bytes");
            }
            int b = data[pos++] & 0xFF;
            if (shift == 63 && (b & 0x7E) != 0) {
                throw new CorruptDataException("a varint at byte " + start + " overflows int64");
            }
            raw |= (long) (b & 0x7F) << shift;
            if (b < 0x80) {
                break;
            }
        }
        if (bits == 32 && (raw >>> 32) != 0) {
            throw new CorruptDataException("a varint at byte " + start + " overflows int32");
        }
        return (raw >>> 1) ^ -(raw & 1);
    }

    /** A Kafka nullable byte string's length (its bytes skipped) or {@link #NIL} for -1. */
    private int kafkaBytes(int limit, String what) {
        long length = varint(32, limit);
        if (length == -1) {
            return NIL;
        }
        if (length < -1 || length > limit - pos) {
            throw new CorruptDataException(what + ": length " + length + ", " + (limit - pos) + " bytes left in the record");
        }
        pos += (int) length;
        return (int) length;
    }

    private void kafkaHeaders(int record, int limit) {
        long pairs = varint(32, limit);
        if (pairs < 0 || pairs > (limit - pos) / 2 || pairs > KAFKA_HEADERS_PER_RECORD_MAX) {
            throw new CorruptDataException("record " + record + ": header count " + pairs);
        }
        headerStart[record] = headerTotal;
        headerCount[record] = (int) pairs;
        for (long j = 0; j < pairs; j++) {
            long nameLength = varint(32, limit);
            if (nameLength < 0 || nameLength > limit - pos) {
                throw new CorruptDataException("record " + record + ": header name length " + nameLength);
            }
            int at = pos;
            pos += (int) nameLength;
            String name;
            try {
                name = utf8.decode(ByteBuffer.wrap(data, at, (int) nameLength)).toString();
            } catch (CharacterCodingException e) {
                throw new CorruptDataException("record " + record + ": a header name is not UTF-8");
            }
            int length = Math.max(kafkaBytes(limit, "header value"), 0);  // null reads as empty bytes
            addHeader(name, length);
        }
    }

    private void addHeader(String name, int length) {
        if (headerTotal == headerNames.length) {
            int size = Math.max(16, headerTotal * 2);
            headerNames = Arrays.copyOf(headerNames, size);
            headerValuePos = Arrays.copyOf(headerValuePos, size);
            headerValueLen = Arrays.copyOf(headerValueLen, size);
        }
        headerNames[headerTotal] = name;
        headerValuePos[headerTotal] = pos - length;
        headerValueLen[headerTotal] = length;
        headerTotal++;
    }

    private void ensure(int n) {
        if (offsets.length < n) {
            int size = Math.max(n, offsets.length * 2);
            offsets = new long[size];
            timestamps = new long[size];
            keyPos = new int[size];
            keyLen = new int[size];
            valuePos = new int[size];
            valueLen = new int[size];
            headerStart = new int[size];
            headerCount = new int[size];
        }
    }

    private static long timestamp(long first, long delta, boolean unsigned) {
        try {
            if (unsigned && delta < 0) {  // a uint64 delta of 2^63 or more: only a negative first can fit
                if (first >= 0) {
                    throw new ArithmeticException("overflow");
                }
                return Math.addExact(first + Long.MAX_VALUE + 1, delta - Long.MIN_VALUE);
            }
            return Math.addExact(first, delta);
        } catch (ArithmeticException e) {
            throw new CorruptDataException("a record timestamp does not fit in 64 bits");
        }
    }

    private void headers(int record) {
        long pairs = arrayLength("record headers");
        headerStart[record] = headerTotal;
        headerCount[record] = (int) pairs;
        for (long j = 0; j < pairs; j++) {
            if (arrayLength("record header") != 2) {
                throw new CorruptDataException("a record header must be a [name str, value bin] pair");
            }
            String name = string();
            int length = binOrNil("header value");
            if (length == NIL) {
                throw new CorruptDataException("a record header must be a [name str, value bin] pair");
            }
            addHeader(name, length);
        }
    }

    private int u8() {
        if (pos >= end) {
            throw truncated();
        }
        return data[pos++] & 0xFF;
    }

    private long be(int bytes) {
        if (end - pos < bytes) {
            throw truncated();
        }
        long v = 0;
        for (int i = 0; i < bytes; i++) {
            v = (v << 8) | (data[pos++] & 0xFF);
        }
        return v;
    }

    private CorruptDataException truncated() {
        return new CorruptDataException("records section is not valid msgpack: it ends inside a value");
    }

    private long arrayLength(String what) {
        int tag = u8();
        if ((tag & 0xF0) == 0x90) {
            return tag & 0x0F;
        }
        if (tag == 0xdc) {
            return be(2);
        }
        if (tag == 0xdd) {
            return be(4);
        }
        pos--;
        String message = switch (what) {
            case "records section" -> "records section does not hold an array of records";
            case "record" -> "a record must be an array of 5 fields";
            case "record headers" -> "record headers must be an array";
            default -> "a record header must be a [name str, value bin] pair";
        };
        throw new CorruptDataException(message + " (msgpack type 0x" + Integer.toHexString(tag) + " at byte "
                + pos + ")");
    }

    private boolean lastIntegerUnsigned;

    private long integer(String what) {
        int tag = u8();
        lastIntegerUnsigned = false;
        if (tag <= 0x7f) {
            return tag;
        }
        if (tag >= 0xe0) {
            return (byte) tag;
        }
        switch (tag) {
            case 0xcc: return be(1);
            case 0xcd: return be(2);
            case 0xce: return be(4);
            case 0xcf: lastIntegerUnsigned = true; return be(8);
            case 0xd0: return (byte) be(1);
            case 0xd1: return (short) be(2);
            case 0xd2: return (int) be(4);
            case 0xd3: return be(8);
            default:
                throw new CorruptDataException("record deltas must be integers, keys and values bytes or nil ("
                        + what + " has msgpack type 0x" + Integer.toHexString(tag) + ")");
        }
    }

    /** A bin's length (its bytes are skipped, ending at {@code pos}) or {@link #NIL}. */
    private int binOrNil(String what) {
        int tag = u8();
        long length;
        switch (tag) {
            case 0xc0: return NIL;
            case 0xc4: length = be(1); break;
            case 0xc5: length = be(2); break;
            case 0xc6: length = be(4); break;
            default:
                throw new CorruptDataException("record deltas must be integers, keys and values bytes or nil ("
                        + what + " has msgpack type 0x" + Integer.toHexString(tag) + ")");
        }
        if (length > end - pos) {
            throw truncated();
        }
        pos += (int) length;
        return (int) length;
    }

    private String string() {
        int tag = u8();
        long length;
        if ((tag & 0xE0) == 0xA0) {
            length = tag & 0x1F;
        } else if (tag == 0xd9) {
            length = be(1);
        } else if (tag == 0xda) {
            length = be(2);
        } else if (tag == 0xdb) {
            length = be(4);
        } else {
            throw new CorruptDataException("a record header must be a [name str, value bin] pair (name has msgpack type 0x"
                    + Integer.toHexString(tag) + ")");
        }
        if (length > end - pos) {
            throw truncated();
        }
        int at = pos;
        pos += (int) length;
        try {
            return utf8.decode(ByteBuffer.wrap(data, at, (int) length)).toString();
        } catch (CharacterCodingException e) {
            throw new CorruptDataException("records section is not valid msgpack: a header name is not UTF-8");
        }
    }
}
