package io.logbroker.spark;

import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * What one Spark task reads: a partition's offsets {@code [start, end)} from its segment files, as
 * {@code spark_connector.tasks._read_direct} reads them (no Spark here).
 *
 * <p>Invariant: each record with {@code start <= offset < end} is handed out exactly once, in offset
 * order, or the read fails; records it cannot find, or whose stored batch cannot be decoded, are data
 * loss ({@link DataLossException}, or a warning when failOnDataLoss is false), never silently
 * missing. {@code end} was capped at the high watermark when the task was planned, so records past
 * it are never read.
 */
public final class RangeReader implements AutoCloseable {
    private static final Logger LOG = LoggerFactory.getLogger(RangeReader.class);

    private final String directory;
    private final String topic;
    private final int partition;
    private final long end;
    private final boolean failOnDataLoss;
    private final long start;
    private final RecordColumns columns = new RecordColumns();
    private final BatchFormat.Scratch scratch = new BatchFormat.Scratch();
    private final int[] range = new int[2];
    /** The node's key ring (option encryptionKeysFile), or null: opens batches encrypted at rest. */
    private final KeyRing ring;
    private SegmentLog.Cursor cursor;
    private boolean finished;
    /** Every offset below this was handed out (or reported lost). */
    private long nextOffset;
    /** The current batch's records to hand out: {@code columns} rows {@code [from, to)}. */
    public int from;
    public int to;

    public RangeReader(String directory, String topic, int partition, long start, long end, boolean failOnDataLoss) {
        this(directory, topic, partition, start, end, failOnDataLoss, null);
    }

    public RangeReader(String directory, String topic, int partition, long start, long end, boolean failOnDataLoss,
                       String keysFile) {
        this.ring = keysFile == null ? null : KeyRing.load(keysFile);
        this.directory = directory;
        this.topic = topic;
        this.partition = partition;
        this.end = end;
        this.failOnDataLoss = failOnDataLoss;
        long first = start;
        if (start < end) {
            SegmentLog log = new SegmentLog(directory);
            long earliest = log.logStartOffset();
            if (first < earliest) {
                lost(first, Math.min(earliest, end), "deleted by retention before they were read");
                first = Math.min(earliest, end);
            }
            try {
                cursor = log.batches(first, end);
            } catch (SegmentLog.OutOfRangeException e) {
                lost(first, end, "deleted by retention while being read: " + e.getMessage());
                finished = true;
            }
        } else {
            finished = true;
        }
        this.start = first;
        this.nextOffset = first;
    }

    public RecordColumns columns() {
        return columns;
    }

    /** Move to the next batch with records in range; false when the range is done. */
    public boolean nextBatch() {
        while (!finished) {
            boolean more;
            try {
                more = cursor.next();
            } catch (CorruptDataException e) {
                throw new CorruptDataException(directory + ": " + e.getMessage(), e);
            }
            if (!more) {
                finish();
                return false;
            }
            BatchFormat.Header h = cursor.header;
            if (h.baseOffset() > nextOffset) {
                lost(nextOffset, h.baseOffset(), "a segment was deleted while being read");
                nextOffset = h.baseOffset();
            }
            try {
                byte[] section = BatchFormat.recordsSection(cursor.buffer, cursor.position, h, scratch, range, ring);
                columns.parse(section, range[0], range[1], h);
            } catch (UndecryptableBatchException e) {
                throw new UndecryptableBatchException("topic " + topic + " partition " + partition + ": " + e.getMessage());
            } catch (CorruptDataException e) {
                // The cursor verified the checksum: the batch was stored as sent, before produce checked rows.
                long first = Math.max(nextOffset, h.baseOffset());
                long after = Math.min(h.nextOffset(), end);
                if (first < after) {
                    lost(first, after, "their batch's records cannot be decoded: " + cursor.file + " position "
                            + cursor.filePositionOfBatch + ": " + e.getMessage());
                }
                nextOffset = Math.max(nextOffset, after);
                continue;
            }
            long[] offsets = columns.offsets;
            int lo = 0;
            int hi = columns.count;
            while (lo < hi && offsets[lo] < start) {
                lo++;
            }
            while (hi > lo && offsets[hi - 1] >= end) {
                hi--;
            }
            if (lo < hi) {
                from = lo;
                to = hi;
                nextOffset = offsets[hi - 1] + 1;
                return true;
            }
        }
        return false;
    }

    private void finish() {
        finished = true;
        close();
        if (nextOffset < end) {
            lost(nextOffset, end, "the partition's files end before the planned offsets");
        }
    }

    private void lost(long first, long after, String why) {
        String message = "topic " + topic + " partition " + partition + ": offsets " + first + ".." + (after - 1)
                + " cannot be read (" + why + ")";
        if (failOnDataLoss) {
            throw new DataLossException(message + "; set failOnDataLoss=false to skip them with a warning");
        }
        LOG.warn("{}; skipped (failOnDataLoss=false)", message);
    }

    @Override
    public void close() {
        if (cursor != null) {
            cursor.close();
        }
    }
}
