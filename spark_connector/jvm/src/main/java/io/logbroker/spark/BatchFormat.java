package io.logbroker.spark;

import com.github.luben.zstd.ZstdInputStream;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.security.GeneralSecurityException;
import java.util.zip.GZIPInputStream;
import javax.crypto.AEADBadTagException;
import javax.crypto.Cipher;
import javax.crypto.spec.GCMParameterSpec;
import javax.crypto.spec.SecretKeySpec;
import net.jpountz.lz4.LZ4FrameInputStream;
import org.xerial.snappy.Snappy;

/**
 * The record batch header (65 bytes, little-endian), its checks, the checksum and decompression
 * of the records section; the same rules as {@code segments/batch.py}. Pure: byte arrays in,
 * values or {@link CorruptDataException} out.
 *
 * <pre>
 * offset size field
 * 0      8    base_offset        u64
 * 8      4    batch_length       u32, bytes after this field
 * 12     4    leader_epoch       u32
 * 16     1    magic              u8 (1)
 * 17     8    checksum           u64, xxh3_64 of every byte after this field
 * 25     2    attributes         u16, bits 0-2 codec, bit 3 log-append time, bit 5 control,
 *                                   bit 6 encrypted at rest, bit 7 Kafka's record format
 * 27     4    last_offset_delta  u32
 * 31     8    first_timestamp    i64 ms
 * 39     8    max_timestamp      i64 ms
 * 47     8    producer_id        i64
 * 55     2    producer_epoch     i16
 * 57     4    base_sequence      i32
 * 61     4    record_count       u32
 * 65     -    records            msgpack, compressed as a whole when the codec is not 0
 * </pre>
 *
 * <p>A batch encrypted at rest (bit 6; {@code segments/encryption.py}) holds instead of its records
 * {@code key_id u32 | nonce 12 bytes | AES-256-GCM ciphertext | tag 16 bytes}, the ciphertext of
 * the (compressed) records, with {@code batch_length}, {@code magic} and the 40 header bytes from
 * {@code attributes} on as associated data; {@link #recordsSection(byte[], int, Header, Scratch,
 * int[], KeyRing)} opens it with {@code javax.crypto}.
 */
public final class BatchFormat {
    public static final int HEADER_SIZE = 65;
    public static final int LENGTH_PREFIX_SIZE = 12;
    public static final int CHECKSUMMED_FROM = 25;
    public static final int MAGIC = 1;
    public static final int CODEC_MASK = 0b111;
    public static final int TIMESTAMP_LOG_APPEND = 1 << 3;
    public static final int CONTROL_FLAG = 1 << 5;
    public static final int ENCRYPTED_FLAG = 1 << 6;
    /** The records section is Kafka's (record batch magic 2), as a Kafka producer sent it (decision 0389). */
    public static final int KAFKA_RECORDS_FLAG = 1 << 7;
    public static final int KNOWN_ATTRIBUTES =
            CODEC_MASK | TIMESTAMP_LOG_APPEND | CONTROL_FLAG | ENCRYPTED_FLAG | KAFKA_RECORDS_FLAG;
    static final int NONCE_BYTES = 12;
    static final int TAG_BITS = 128;
    static final int SEAL_PREFIX_BYTES = 4 + NONCE_BYTES;
    static final int SEAL_OVERHEAD_BYTES = SEAL_PREFIX_BYTES + TAG_BITS / 8;
    static final int ASSOCIATED_BODY_BYTES = HEADER_SIZE - CHECKSUMMED_FROM;
    public static final int CODEC_NONE = 0;
    public static final int CODEC_GZIP = 1;
    /** Only in Kafka's record format: xerial-framed (Kafka's Java client) or one raw block (librdkafka). */
    public static final int CODEC_SNAPPY = 2;
    public static final int CODEC_LZ4 = 3;
    public static final int CODEC_ZSTD = 4;
    /** The largest batch trusted from disk, and the most its records may expand to. */
    public static final int RECORDS_BYTES_MAX = 64 * 1024 * 1024;

    private static final VarHandle LONG_LE =
            MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT_LE =
            MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle SHORT_LE =
            MethodHandles.byteArrayViewVarHandle(short[].class, ByteOrder.LITTLE_ENDIAN);

    private BatchFormat() {}

    /** The fixed header of one batch, as stored. */
    public record Header(long baseOffset, long batchLength, long leaderEpoch, int magic, long checksum,
                         int attributes, long lastOffsetDelta, long firstTimestamp, long maxTimestamp,
                         long recordCount) {
        public long sizeBytes() {
            return batchLength + LENGTH_PREFIX_SIZE;
        }

        public long lastOffset() {
            return baseOffset + lastOffsetDelta;
        }

        public long nextOffset() {
            return baseOffset + lastOffsetDelta + 1;
        }

        public int codec() {
            return attributes & CODEC_MASK;
        }

        public boolean kafkaRecords() {
            return (attributes & KAFKA_RECORDS_FLAG) != 0;
        }

        public boolean logAppendTime() {
            return (attributes & TIMESTAMP_LOG_APPEND) != 0;
        }
    }

    /** Unpack the header at {@code position}; {@code b} must hold {@link #HEADER_SIZE} bytes there. */
    public static Header parse(byte[] b, int position) {
        return new Header((long) LONG_LE.get(b, position), u32(b, position + 8), u32(b, position + 12),
                b[position + 16] & 0xFF, (long) LONG_LE.get(b, position + 17),
                ((short) SHORT_LE.get(b, position + 25)) & 0xFFFF, u32(b, position + 27),
                (long) LONG_LE.get(b, position + 31), (long) LONG_LE.get(b, position + 39), u32(b, position + 61));
    }

    private static long u32(byte[] b, int position) {
        return ((int) INT_LE.get(b, position)) & 0xFFFFFFFFL;
    }

    /** What is wrong with the header's own fields (all but the checksum), or null when nothing is. */
    public static String problem(Header h, long sizeBytesMax) {
        if (h.magic() != MAGIC) {
            return "unsupported batch magic " + h.magic();
        }
        if (h.batchLength() < HEADER_SIZE - LENGTH_PREFIX_SIZE) {
            return "batch length " + h.batchLength() + " is shorter than a header";
        }
        if (h.sizeBytes() > sizeBytesMax) {
            return "batch of " + h.sizeBytes() + " bytes exceeds " + sizeBytesMax;
        }
        if (h.recordCount() != h.lastOffsetDelta() + 1 || h.recordCount() == 0) {
            return "record count " + h.recordCount() + " does not match last offset delta " + h.lastOffsetDelta();
        }
        int codec = h.codec();
        boolean knownCodec = codec == CODEC_NONE || codec == CODEC_GZIP || codec == CODEC_LZ4 || codec == CODEC_ZSTD
                || (codec == CODEC_SNAPPY && h.kafkaRecords());
        if ((h.attributes() & ~KNOWN_ATTRIBUTES) != 0 || !knownCodec) {
            return "unknown batch attributes 0x" + Integer.toHexString(h.attributes());
        }
        return null;
    }

    /** The checksum of the batch at {@code position} (the bytes after the checksum field). */
    public static long computeChecksum(byte[] b, int position, Header h) {
        return Xxh3.hash(b, position + CHECKSUMMED_FROM, (int) h.sizeBytes() - CHECKSUMMED_FROM);
    }

    /**
     * The records section of the batch at {@code position}, decompressed into {@code scratch} when
     * its codec is not 0. Returns the array holding it ({@code b} itself, or a decompressed copy) and
     * sets {@code range[0..1]} to its start and end.
     */
    public static byte[] recordsSection(byte[] b, int position, Header h, Scratch scratch, int[] range) {
        if ((h.attributes() & ENCRYPTED_FLAG) != 0) {
            return recordsSection(b, position, h, scratch, range, null);
        }
        int start = position + HEADER_SIZE;
        int end = position + (int) h.sizeBytes();
        if (h.codec() == CODEC_NONE) {
            range[0] = start;
            range[1] = end;
            return b;
        }
        int size = decompress(h.codec(), b, start, end - start, scratch);
        range[0] = 0;
        range[1] = size;
        return scratch.buffer;
    }

    /**
     * Like {@link #recordsSection(byte[], int, Header, Scratch, int[])}, a batch encrypted at rest
     * opened first with {@code ring} ({@link UndecryptableBatchException} when the ring is null,
     * lacks the batch's key, or the tag fails).
     */
    public static byte[] recordsSection(byte[] b, int position, Header h, Scratch scratch, int[] range, KeyRing ring) {
        if ((h.attributes() & ENCRYPTED_FLAG) == 0) {
            return recordsSection(b, position, h, scratch, range);
        }
        byte[] plain = open(b, position, h, ring);
        if (h.codec() == CODEC_NONE) {
            range[0] = 0;
            range[1] = plain.length;
            return plain;
        }
        int size = decompress(h.codec(), plain, 0, plain.length, scratch);
        range[0] = 0;
        range[1] = size;
        return scratch.buffer;
    }

    /** The records section of the sealed batch at {@code position}, decrypted and authenticated. */
    static byte[] open(byte[] b, int position, Header h, KeyRing ring) {
        int start = position + HEADER_SIZE;
        int end = position + (int) h.sizeBytes();
        if (end - start < SEAL_OVERHEAD_BYTES) {
            throw new UndecryptableBatchException("the sealed batch at offset " + h.baseOffset()
                    + " is too short to hold a key id, a nonce and a tag");
        }
        long keyId = u32(b, start);
        if (ring == null) {
            throw new UndecryptableBatchException("the batch at offset " + h.baseOffset() + " is encrypted at rest (key "
                    + keyId + "); give the node's key ring as the option encryptionKeysFile");
        }
        byte[] key = ring.key(keyId);
        if (key == null) {
            throw new UndecryptableBatchException("the batch at offset " + h.baseOffset() + " is sealed with key " + keyId
                    + ", which is not in the key ring");
        }
        try {
            Cipher cipher = Cipher.getInstance("AES/GCM/NoPadding");
            cipher.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"),
                    new GCMParameterSpec(TAG_BITS, b, start + 4, NONCE_BYTES));
            cipher.updateAAD(b, position + 8, 4);
            cipher.updateAAD(b, position + 16, 1);
            cipher.updateAAD(b, position + CHECKSUMMED_FROM, ASSOCIATED_BODY_BYTES);
            return cipher.doFinal(b, start + SEAL_PREFIX_BYTES, end - start - SEAL_PREFIX_BYTES);
        } catch (AEADBadTagException e) {
            throw new UndecryptableBatchException("the batch at offset " + h.baseOffset()
                    + " fails its authentication tag under key " + keyId
                    + ": its ciphertext or header was altered, or the key is not the one that sealed it");
        } catch (GeneralSecurityException e) {
            throw new UndecryptableBatchException("the batch at offset " + h.baseOffset() + " cannot be decrypted: " + e);
        }
    }

    /** A reusable output buffer for decompression (grows to at most {@link #RECORDS_BYTES_MAX}). */
    public static final class Scratch {
        byte[] buffer = new byte[1 << 16];
    }

    private static int decompress(int codec, byte[] b, int offset, int length, Scratch scratch) {
        if (codec == CODEC_SNAPPY) {
            return unsnappy(b, offset, length, scratch);
        }
        try (InputStream in = open(codec, new ByteArrayInputStream(b, offset, length))) {
            int size = 0;
            while (true) {
                if (size == scratch.buffer.length) {
                    if (size > RECORDS_BYTES_MAX) {
                        throw new CorruptDataException("records expand past the limit of " + RECORDS_BYTES_MAX + " bytes");
                    }
                    scratch.buffer = java.util.Arrays.copyOf(scratch.buffer, Math.min(size * 2, RECORDS_BYTES_MAX + 1));
                }
                int n = in.read(scratch.buffer, size, scratch.buffer.length - size);
                if (n < 0) {
                    break;
                }
                size += n;
                if (size > RECORDS_BYTES_MAX) {
                    throw new CorruptDataException("records expand past the limit of " + RECORDS_BYTES_MAX + " bytes");
                }
            }
            return size;
        } catch (IOException | RuntimeException e) {
            if (e instanceof CorruptDataException c) {
                throw c;
            }
            throw new CorruptDataException("cannot decompress records (codec " + codec + "): " + e, e);
        }
    }

    private static final byte[] XERIAL_MAGIC = {(byte) 0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};
    private static final int XERIAL_HEADER_BYTES = 16;

    /** Snappy as Kafka's producers write it: xerial blocks (a 16-byte header, then length-prefixed
     *  blocks) or one raw block; each block's declared size is checked before it is expanded. */
    private static int unsnappy(byte[] b, int offset, int length, Scratch scratch) {
        try {
            if (length < XERIAL_MAGIC.length
                    || !java.util.Arrays.equals(b, offset, offset + XERIAL_MAGIC.length, XERIAL_MAGIC, 0, XERIAL_MAGIC.length)) {
                return unsnappyBlock(b, offset, length, scratch, 0);
            }
            if (length < XERIAL_HEADER_BYTES) {
                throw new CorruptDataException("cannot decompress records (codec 2): xerial header truncated");
            }
            int pos = offset + XERIAL_HEADER_BYTES;
            int end = offset + length;
            int size = 0;
            while (pos < end) {
                if (end - pos < 4) {
                    throw new CorruptDataException("cannot decompress records (codec 2): a block length is truncated");
                }
                int block = ((b[pos] & 0xFF) << 24) | ((b[pos + 1] & 0xFF) << 16) | ((b[pos + 2] & 0xFF) << 8) | (b[pos + 3] & 0xFF);
                pos += 4;
                if (block < 0 || block > end - pos) {
                    throw new CorruptDataException("cannot decompress records (codec 2): a block of " + block
                            + " bytes with " + (end - pos) + " left");
                }
                size = unsnappyBlock(b, pos, block, scratch, size);
                pos += block;
            }
            return size;
        } catch (IOException e) {
            throw new CorruptDataException("cannot decompress records (codec 2): " + e, e);
        }
    }

    private static int unsnappyBlock(byte[] b, int offset, int length, Scratch scratch, int at) throws IOException {
        int declared = Snappy.uncompressedLength(b, offset, length);
        if (declared < 0 || declared > RECORDS_BYTES_MAX - at) {
            throw new CorruptDataException("records expand past the limit of " + RECORDS_BYTES_MAX + " bytes");
        }
        if (scratch.buffer.length < at + declared) {
            scratch.buffer = java.util.Arrays.copyOf(scratch.buffer,
                    Math.min(Math.max(at + declared, scratch.buffer.length * 2), RECORDS_BYTES_MAX));
        }
        return at + Snappy.uncompress(b, offset, length, scratch.buffer, at);
    }

    private static InputStream open(int codec, InputStream raw) throws IOException {
        return switch (codec) {
            case CODEC_GZIP -> new GZIPInputStream(raw);
            case CODEC_LZ4 -> new LZ4FrameInputStream(raw);
            case CODEC_ZSTD -> new ZstdInputStream(raw);
            default -> throw new CorruptDataException("unknown compression codec " + codec);
        };
    }
}
