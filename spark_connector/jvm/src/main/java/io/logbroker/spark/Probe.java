package io.logbroker.spark;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.util.Arrays;

/**
 * The pure parts, callable one value at a time (the tests reach them through Spark's JVM gateway
 * and compare them with the Python implementation): the checksum, the decoding of one batch, and
 * the splitting of offset ranges.
 */
public final class Probe {
    private Probe() {}

    /** XXH3-64 of {@code data}, as Python's {@code xxhash.xxh3_64_intdigest} (as a signed long). */
    public static long xxh3(byte[] data) {
        return Xxh3.hash(data);
    }

    /**
     * Check and decode one whole batch (header, checksum, records) as the reader does, and describe
     * its records as JSON: {@code [{"offset", "timestamp", "key", "value", "headers": [[name, value]]}]}
     * with keys and values base64 (null for nil). Raises {@link CorruptDataException} for a bad batch.
     */
    public static String decodeBatch(byte[] batch) {
        return decodeBatch(batch, null);
    }

    /** {@link #decodeBatch(byte[])} with a batch encrypted at rest opened with the ring {@code ringText} describes. */
    public static String decodeSealedBatch(byte[] batch, String ringText) {
        return decodeBatch(batch, KeyRing.parse(ringText, "key ring"));
    }

    private static String decodeBatch(byte[] batch, KeyRing ring) {
        if (batch.length < BatchFormat.HEADER_SIZE) {
            throw new CorruptDataException(batch.length + " bytes is shorter than a batch header");
        }
        BatchFormat.Header h = BatchFormat.parse(batch, 0);
        String problem = BatchFormat.problem(h, BatchFormat.RECORDS_BYTES_MAX);
        if (problem != null) {
            throw new CorruptDataException(problem);
        }
        if (h.sizeBytes() != batch.length) {
            throw new CorruptDataException("batch length field says " + h.sizeBytes() + " bytes but " + batch.length
                    + " were given");
        }
        if (BatchFormat.computeChecksum(batch, 0, h) != h.checksum()) {
            throw new CorruptDataException("batch checksum mismatch");
        }
        int[] range = new int[2];
        byte[] section = BatchFormat.recordsSection(batch, 0, h, new BatchFormat.Scratch(), range, ring);
        RecordColumns c = new RecordColumns();
        c.parse(section, range[0], range[1], h);
        ObjectMapper mapper = new ObjectMapper();
        ArrayNode out = mapper.createArrayNode();
        for (int i = 0; i < c.count; i++) {
            ObjectNode row = out.addObject();
            row.put("offset", c.offsets[i]);
            row.put("timestamp", c.timestamps[i]);
            row.put("key", c.keyLen[i] == RecordColumns.NIL ? null : slice(c.data, c.keyPos[i], c.keyLen[i]));
            row.put("value", c.valueLen[i] == RecordColumns.NIL ? null : slice(c.data, c.valuePos[i], c.valueLen[i]));
            ArrayNode headers = row.putArray("headers");
            for (int j = c.headerStart[i]; j < c.headerStart[i] + c.headerCount[i]; j++) {
                headers.addArray().add(c.headerNames[j]).add(slice(c.data, c.headerValuePos[j], c.headerValueLen[j]));
            }
        }
        return out.toString();
    }

    /**
     * {@link OffsetPlan#split} over ranges written {@code "partition:start:end,..."}, answered in the
     * same form (so a test can compare it with {@code spark_connector.offsets.split}).
     */
    public static String split(String ranges, int minPartitions) {
        java.util.List<OffsetPlan.Range> in = new java.util.ArrayList<>();
        for (String part : ranges.split(",")) {
            if (!part.isEmpty()) {
                String[] f = part.split(":");
                in.add(new OffsetPlan.Range(Integer.parseInt(f[0]), Long.parseLong(f[1]), Long.parseLong(f[2])));
            }
        }
        StringBuilder out = new StringBuilder();
        for (OffsetPlan.Range r : OffsetPlan.split(in, minPartitions)) {
            out.append(out.length() == 0 ? "" : ",").append(r.partition()).append(':').append(r.start()).append(':')
                    .append(r.end());
        }
        return out.toString();
    }

    private static byte[] slice(byte[] data, int position, int length) {
        return Arrays.copyOfRange(data, position, position + length);
    }
}
