package io.logbroker.spark;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;

/**
 * XXH3-64 with seed 0 and the default secret: the checksum of a record batch (everything after the
 * checksum field), the same function as Python's {@code xxhash.xxh3_64_intdigest}. Pure.
 *
 * <p>Four length classes, as in the reference: 0-16, 17-128, 129-240 bytes, and longer inputs
 * hashed in 1024-byte blocks of 64-byte stripes with 8 accumulators.
 */
public final class Xxh3 {
    private static final VarHandle LONG_LE =
            MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final VarHandle INT_LE =
            MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private static final byte[] SECRET = bytes(
            0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
            0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
            0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
            0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
            0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
            0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
            0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
            0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
            0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
            0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
            0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
            0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e);
    private static final int SECRET_SIZE = 192;
    private static final int STRIPE_LEN = 64;
    private static final int STRIPES_PER_BLOCK = (SECRET_SIZE - STRIPE_LEN) / 8;
    private static final int BLOCK_LEN = STRIPE_LEN * STRIPES_PER_BLOCK;
    private static final long PRIME32_1 = 0x9E3779B1L;
    private static final long PRIME32_2 = 0x85EBCA77L;
    private static final long PRIME32_3 = 0xC2B2AE3DL;
    private static final long PRIME64_1 = 0x9E3779B185EBCA87L;
    private static final long PRIME64_2 = 0xC2B2AE3D27D4EB4FL;
    private static final long PRIME64_3 = 0x165667B19E3779F9L;
    private static final long PRIME64_4 = 0x85EBCA77C2B2AE63L;
    private static final long PRIME64_5 = 0x27D4EB2F165667C5L;
    // Secret words used by every long input, read once.
    private static final long[] SECRET_WORDS = new long[SECRET_SIZE / 8 + 1];

    static {
        for (int i = 0; i + 8 <= SECRET_SIZE; i += 8) {
            SECRET_WORDS[i / 8] = secret64(i);
        }
    }

    private Xxh3() {}

    private static byte[] bytes(int... values) {
        byte[] out = new byte[values.length];
        for (int i = 0; i < values.length; i++) {
            out[i] = (byte) values[i];
        }
        return out;
    }

    /** The hash of {@code data[offset, offset + length)}. */
    public static long hash(byte[] data, int offset, int length) {
        if (offset < 0 || length < 0 || offset > data.length - length) {
            throw new IndexOutOfBoundsException("range " + offset + "+" + length + " of " + data.length + " bytes");
        }
        if (length <= 16) {
            return hashUpTo16(data, offset, length);
        }
        if (length <= 128) {
            return hash17To128(data, offset, length);
        }
        if (length <= 240) {
            return hash129To240(data, offset, length);
        }
        return hashLong(data, offset, length);
    }

    /** The hash of a whole array (for callers over the JVM gateway). */
    public static long hash(byte[] data) {
        return hash(data, 0, data.length);
    }

    private static long read64(byte[] b, int i) {
        return (long) LONG_LE.get(b, i);
    }

    private static long read32(byte[] b, int i) {
        return ((int) INT_LE.get(b, i)) & 0xFFFFFFFFL;
    }

    private static long secret64(int i) {
        return read64(SECRET, i);
    }

    private static long mulFold(long a, long b) {
        long high = Math.multiplyHigh(a, b) + ((a >> 63) & b) + ((b >> 63) & a);
        return (a * b) ^ high;
    }

    private static long avalanche64(long h) {
        h ^= h >>> 33;
        h *= PRIME64_2;
        h ^= h >>> 29;
        h *= PRIME64_3;
        return h ^ (h >>> 32);
    }

    private static long avalanche(long h) {
        h ^= h >>> 37;
        h *= 0x165667919E3779F9L;
        return h ^ (h >>> 32);
    }

    private static long rrmxmx(long h, long length) {
        h ^= Long.rotateLeft(h, 49) ^ Long.rotateLeft(h, 24);
        h *= 0x9FB21C651E98DF25L;
        h ^= (h >>> 35) + length;
        h *= 0x9FB21C651E98DF25L;
        return h ^ (h >>> 28);
    }

    private static long hashUpTo16(byte[] b, int off, int len) {
        if (len > 8) {
            long lo = read64(b, off) ^ (secret64(24) ^ secret64(32));
            long hi = read64(b, off + len - 8) ^ (secret64(40) ^ secret64(48));
            return avalanche(len + Long.reverseBytes(lo) + hi + mulFold(lo, hi));
        }
        if (len >= 4) {
            long first = read32(b, off);
            long last = read32(b, off + len - 4);
            long keyed = (last + (first << 32)) ^ (secret64(8) ^ secret64(16));
            return rrmxmx(keyed, len);
        }
        if (len > 0) {
            int c1 = b[off] & 0xFF;
            int c2 = b[off + (len >> 1)] & 0xFF;
            int c3 = b[off + len - 1] & 0xFF;
            long combined = ((c1 << 16) | (c2 << 24) | c3 | (len << 8)) & 0xFFFFFFFFL;
            long flip = (read32(SECRET, 0) ^ read32(SECRET, 4));
            return avalanche64(combined ^ flip);
        }
        return avalanche64(secret64(56) ^ secret64(64));
    }

    private static long mix16(byte[] b, int off, int secretOffset) {
        return mulFold(read64(b, off) ^ secret64(secretOffset), read64(b, off + 8) ^ secret64(secretOffset + 8));
    }

    private static long hash17To128(byte[] b, int off, int len) {
        long acc = len * PRIME64_1;
        if (len > 32) {
            if (len > 64) {
                if (len > 96) {
                    acc += mix16(b, off + 48, 96);
                    acc += mix16(b, off + len - 64, 112);
                }
                acc += mix16(b, off + 32, 64);
                acc += mix16(b, off + len - 48, 80);
            }
            acc += mix16(b, off + 16, 32);
            acc += mix16(b, off + len - 32, 48);
        }
        acc += mix16(b, off, 0);
        acc += mix16(b, off + len - 16, 16);
        return avalanche(acc);
    }

    private static long hash129To240(byte[] b, int off, int len) {
        long acc = len * PRIME64_1;
        int rounds = len / 16;
        for (int i = 0; i < 8; i++) {
            acc += mix16(b, off + 16 * i, 16 * i);
        }
        acc = avalanche(acc);
        for (int i = 8; i < rounds; i++) {
            acc += mix16(b, off + 16 * i, 16 * (i - 8) + 3);
        }
        acc += mix16(b, off + len - 16, 136 - 17);
        return avalanche(acc);
    }

    private static long hashLong(byte[] b, int off, int len) {
        long[] acc = {PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1};
        int blocks = (len - 1) / BLOCK_LEN;
        for (int n = 0; n < blocks; n++) {
            int block = off + n * BLOCK_LEN;
            for (int s = 0; s < STRIPES_PER_BLOCK; s++) {
                accumulate(acc, b, block + s * STRIPE_LEN, s * 8);
            }
            scramble(acc);
        }
        int stripes = ((len - 1) - BLOCK_LEN * blocks) / STRIPE_LEN;
        int block = off + blocks * BLOCK_LEN;
        for (int s = 0; s < stripes; s++) {
            accumulate(acc, b, block + s * STRIPE_LEN, s * 8);
        }
        accumulate(acc, b, off + len - STRIPE_LEN, SECRET_SIZE - STRIPE_LEN - 7);
        long result = len * PRIME64_1;
        for (int i = 0; i < 4; i++) {
            result += mulFold(acc[2 * i] ^ secret64(11 + 16 * i), acc[2 * i + 1] ^ secret64(11 + 16 * i + 8));
        }
        return avalanche(result);
    }

    private static void accumulate(long[] acc, byte[] b, int stripe, int secretOffset) {
        for (int i = 0; i < 8; i++) {
            long value = read64(b, stripe + 8 * i);
            long key = value ^ secret64(secretOffset + 8 * i);
            acc[i ^ 1] += value;
            acc[i] += (key & 0xFFFFFFFFL) * (key >>> 32);
        }
    }

    private static void scramble(long[] acc) {
        for (int i = 0; i < 8; i++) {
            long a = acc[i];
            acc[i] = (a ^ (a >>> 47) ^ SECRET_WORDS[(SECRET_SIZE - STRIPE_LEN) / 8 + i]) * PRIME32_1;
        }
    }
}
