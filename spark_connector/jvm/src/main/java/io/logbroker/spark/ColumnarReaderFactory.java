package io.logbroker.spark;

import java.nio.charset.StandardCharsets;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReader;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.execution.vectorized.ConstantColumnVector;
import org.apache.spark.sql.execution.vectorized.OnHeapColumnVector;
import org.apache.spark.sql.execution.vectorized.WritableColumnVector;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarBatch;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Builds each task's reader, which hands Spark columnar batches of only the columns the query asked
 * for. A stored batch with at least {@link #VIEW_ROWS_MIN} records left is shown in place
 * ({@link RecordVector}: keys and values read where they lie in the records section, up to
 * {@link #ROWS_PER_BATCH} rows at a time); smaller ones are copied into on-heap vectors, several
 * to a columnar batch, {@link #ROWS_PER_BATCH} rows or about {@link #BYTES_PER_BATCH} bytes of keys,
 * values and headers, whichever comes first, so memory stays bounded whatever the record sizes. {@code topic} and {@code partition}
 * are constant vectors. Timestamps go from milliseconds to Spark's microseconds; a header name
 * repeated within one record keeps its last value (a map holds each name once).
 */
final class ColumnarReaderFactory implements PartitionReaderFactory {
    private static final long serialVersionUID = 1L;
    static final int ROWS_PER_BATCH = 8192;
    /** A batch with at least this many records left is shown in place rather than copied. */
    static final int VIEW_ROWS_MIN = 256;
    static final long BYTES_PER_BATCH = 32L << 20;
    static final long US_PER_MS = 1000;

    private final StructType schema;

    ColumnarReaderFactory(StructType schema) {
        this.schema = schema;
    }

    /** Milliseconds to Spark's microseconds; a timestamp out of Spark's range is an error, not a wrong row. */
    static long micros(long ms) {
        try {
            return Math.multiplyExact(ms, US_PER_MS);
        } catch (ArithmeticException e) {
            throw new CorruptDataException("record timestamp " + ms + " ms does not fit Spark's timestamp range");
        }
    }

    @Override
    public boolean supportColumnarReads(InputPartition partition) {
        return true;
    }

    @Override
    public PartitionReader<InternalRow> createReader(InputPartition partition) {
        throw new UnsupportedOperationException(SegmentsDataSource.NAME + " reads columnar batches only");
    }

    @Override
    public PartitionReader<ColumnarBatch> createColumnarReader(InputPartition partition) {
        return new Reader((SegmentsScan.RangePartition) partition, schema);
    }

    static final class Reader implements PartitionReader<ColumnarBatch> {
        private final RangeReader records;
        // Copied: rows from any number of small batches, copied into on-heap vectors.
        private final ColumnarBatch copied;
        private final WritableColumnVector key;
        private final WritableColumnVector value;
        private final WritableColumnVector offset;
        private final WritableColumnVector timestamp;
        private final WritableColumnVector headers;
        private final WritableColumnVector[] owned;
        // Viewed: rows of one large batch, read where they lie (headers are still copied).
        private final ColumnarBatch viewed;
        private final RecordVector[] views;
        private final WritableColumnVector viewHeaders;
        private ColumnarBatch current;
        private int cursor;
        private boolean started;

        Reader(SegmentsScan.RangePartition p, StructType schema) {
            StructField[] fields = schema.fields();
            ColumnVector[] vectors = new ColumnVector[fields.length];
            ColumnVector[] viewVectors = new ColumnVector[fields.length];
            WritableColumnVector[] byName = new WritableColumnVector[SegmentsDataSource.SCHEMA.size()];
            RecordVector[] viewList = new RecordVector[fields.length];
            WritableColumnVector headersView = null;
            int viewCount = 0;
            for (int i = 0; i < fields.length; i++) {
                String name = fields[i].name();
                if (name.equals("topic") || name.equals("partition")) {
                    vectors[i] = constant(p, fields[i]);
                    viewVectors[i] = constant(p, fields[i]);
                    continue;
                }
                OnHeapColumnVector vector = new OnHeapColumnVector(ROWS_PER_BATCH, fields[i].dataType());
                byName[SegmentsDataSource.SCHEMA.fieldIndex(name)] = vector;
                vectors[i] = vector;
                if (name.equals("headers")) {
                    headersView = new OnHeapColumnVector(ROWS_PER_BATCH, fields[i].dataType());
                    viewVectors[i] = headersView;
                } else {
                    RecordVector view = new RecordVector(fields[i].dataType(), RecordVector.Field.valueOf(name.toUpperCase(java.util.Locale.ROOT)));
                    viewList[viewCount++] = view;
                    viewVectors[i] = view;
                }
            }
            key = byName[0];
            value = byName[1];
            offset = byName[4];
            timestamp = byName[5];
            headers = byName[6];
            owned = byName;
            copied = new ColumnarBatch(vectors);
            viewed = new ColumnarBatch(viewVectors);
            views = java.util.Arrays.copyOf(viewList, viewCount);
            viewHeaders = headersView;
            records = new RangeReader(p.directory(), p.topic(), p.partition(), p.start(), p.end(), p.failOnDataLoss(),
                    p.keysFile());
        }

        private static ConstantColumnVector constant(SegmentsScan.RangePartition p, StructField field) {
            ConstantColumnVector vector = new ConstantColumnVector(ROWS_PER_BATCH, field.dataType());
            if (field.name().equals("topic")) {
                vector.setUtf8String(UTF8String.fromString(p.topic()));
            } else {
                vector.setInt(p.partition());
            }
            return vector;
        }

        /** Make sure the cursor is on a record of the current batch; false when the range is done. */
        private boolean advance() {
            if (started && cursor < records.to) {
                return true;
            }
            if (!records.nextBatch()) {
                return false;
            }
            started = true;
            cursor = records.from;
            return true;
        }

        @Override
        public boolean next() {
            if (!advance()) {
                return false;
            }
            int remaining = records.to - cursor;
            if (remaining >= VIEW_ROWS_MIN) {
                int n = Math.min(remaining, ROWS_PER_BATCH);
                for (RecordVector view : views) {
                    view.point(records.columns(), cursor, n);
                }
                if (viewHeaders != null) {
                    viewHeaders.reset();
                    for (int i = 0; i < n; i++) {
                        headerMap(viewHeaders, records.columns(), cursor + i, i);
                    }
                }
                viewed.setNumRows(n);
                cursor += n;
                current = viewed;
                return true;
            }
            current = copied;
            return fillCopied();
        }

        private boolean fillCopied() {
            for (WritableColumnVector v : owned) {
                if (v != null) {
                    v.reset();
                }
            }
            int rows = 0;
            long bytes = 0;
            while (rows < ROWS_PER_BATCH && bytes < BYTES_PER_BATCH && advance()) {
                int n = Math.min(records.to - cursor, ROWS_PER_BATCH - rows);
                n = boundedByBytes(cursor, n, BYTES_PER_BATCH - bytes);
                bytes += copy(cursor, n, rows);
                cursor += n;
                rows += n;
            }
            copied.setNumRows(rows);
            return rows > 0;
        }

        /** How many of the {@code n} rows from {@code first} fit in {@code budget} bytes (at least one). */
        private int boundedByBytes(int first, int n, long budget) {
            RecordColumns c = records.columns();
            long total = 0;
            for (int i = 0; i < n; i++) {
                total += Math.max(c.keyLen[first + i], 0) + Math.max(c.valueLen[first + i], 0);
                if (total > budget && i > 0) {
                    return i;
                }
            }
            return n;
        }

        /** Copy rows {@code [first, first + n)} of the current batch to vector rows from {@code at}. */
        private long copy(int first, int n, int at) {
            RecordColumns c = records.columns();
            long bytes = 0;
            if (key != null) {
                bytes += binary(key, c.data, c.keyPos, c.keyLen, first, n, at);
            }
            if (value != null) {
                bytes += binary(value, c.data, c.valuePos, c.valueLen, first, n, at);
            }
            if (offset != null) {
                for (int i = 0; i < n; i++) {
                    offset.putLong(at + i, c.offsets[first + i]);
                }
            }
            if (timestamp != null) {
                for (int i = 0; i < n; i++) {
                    timestamp.putLong(at + i, micros(c.timestamps[first + i]));
                }
            }
            if (headers != null) {
                for (int i = 0; i < n; i++) {
                    bytes += headerMap(headers, c, first + i, at + i);
                }
            }
            return bytes;
        }

        private static long binary(WritableColumnVector v, byte[] data, int[] pos, int[] len, int first, int n, int at) {
            long bytes = 0;
            for (int i = 0; i < n; i++) {
                int length = len[first + i];
                if (length == RecordColumns.NIL) {
                    v.putNull(at + i);
                } else {
                    v.putByteArray(at + i, data, pos[first + i], length);
                    bytes += length;
                }
            }
            return bytes;
        }

        private static long headerMap(WritableColumnVector headers, RecordColumns c, int record, int row) {
            WritableColumnVector names = headers.getChild(0);
            WritableColumnVector values = headers.getChild(1);
            int start = c.headerStart[record];
            int count = c.headerCount[record];
            int element = headers.getElementsAppended();
            int kept = 0;
            long bytes = 0;
            names.reserve(element + count);
            values.reserve(element + count);
            for (int j = 0; j < count; j++) {
                String name = c.headerNames[start + j];
                int last = j;
                boolean seen = false;
                for (int k = 0; k < count; k++) {
                    if (c.headerNames[start + k].equals(name)) {
                        if (k < j) {
                            seen = true;
                            break;
                        }
                        last = k;
                    }
                }
                if (seen) {
                    continue;  // the first occurrence placed this name, with its last value
                }
                byte[] nameBytes = name.getBytes(StandardCharsets.UTF_8);
                names.putByteArray(element + kept, nameBytes, 0, nameBytes.length);
                values.putByteArray(element + kept, c.data, c.headerValuePos[start + last], c.headerValueLen[start + last]);
                bytes += nameBytes.length + c.headerValueLen[start + last];
                kept++;
            }
            headers.putArray(row, element, kept);
            headers.addElementsAppended(kept);
            return bytes;
        }

        @Override
        public ColumnarBatch get() {
            return current;
        }

        @Override
        public void close() {
            records.close();
            copied.close();
            viewed.close();
        }
    }
}
