package io.logbroker.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.SortedMap;
import java.util.TreeMap;
import org.apache.spark.sql.connector.read.Batch;
import org.apache.spark.sql.connector.read.InputPartition;
import org.apache.spark.sql.connector.read.PartitionReaderFactory;
import org.apache.spark.sql.connector.read.Scan;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.connector.read.SupportsPushDownRequiredColumns;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The scan of one query: the columns it needs (pruned), and its input partitions, planned on the
 * driver as the Python source plans them: one per topic partition, {@code [startingOffsets,
 * endingOffsets)} capped at the checkpointed high watermark, split by offset range when
 * {@code minPartitions} asks for more.
 */
final class SegmentsScan implements Scan, Batch {
    private final ReadOptions options;
    private final StructType readSchema;
    private InputPartition[] planned;

    SegmentsScan(ReadOptions options, StructType readSchema) {
        this.options = options;
        this.readSchema = readSchema;
    }

    static final class Builder implements ScanBuilder, SupportsPushDownRequiredColumns {
        private final ReadOptions options;
        private StructType required = SegmentsDataSource.SCHEMA;

        Builder(ReadOptions options) {
            this.options = options;
        }

        @Override
        public void pruneColumns(StructType requiredSchema) {
            StructType kept = new StructType();
            for (StructField field : SegmentsDataSource.SCHEMA.fields()) {
                if (requiredSchema.getFieldIndex(field.name()).isDefined()) {
                    kept = kept.add(field);
                }
            }
            required = kept;
        }

        @Override
        public Scan build() {
            return new SegmentsScan(options, required);
        }
    }

    /** One task's work: a partition's offsets {@code [start, end)} in one partition directory. */
    record RangePartition(String directory, String topic, int partition, long start, long end,
                          boolean failOnDataLoss, String keysFile) implements InputPartition {}

    @Override
    public StructType readSchema() {
        return readSchema;
    }

    @Override
    public String description() {
        return SegmentsDataSource.NAME + " topic=" + options.topic() + " path=" + String.join(",", options.dataDirs());
    }

    @Override
    public Batch toBatch() {
        return this;
    }

    @Override
    public synchronized InputPartition[] planInputPartitions() {
        if (planned == null) {
            planned = plan();
        }
        return planned;
    }

    private InputPartition[] plan() {
        TopicFiles files = new TopicFiles(options.dataDirs(), options.topic());
        SortedMap<Integer, OffsetPlan.Bounds> bounds = files.bounds();
        SortedMap<Integer, Long> starts;
        if (options.startingTimestamp() != null) {
            starts = new TreeMap<>();
            for (var entry : bounds.entrySet()) {
                starts.put(entry.getKey(), files.offsetForTimestamp(entry.getKey(), options.startingTimestamp(),
                        entry.getValue().latest()));
            }
        } else {
            starts = OffsetPlan.resolve(options.starting(), bounds, OffsetPlan.EARLIEST, "startingOffsets");
        }
        SortedMap<Integer, Long> ends = OffsetPlan.resolve(options.ending(), bounds, OffsetPlan.LATEST, "endingOffsets");
        List<OffsetPlan.Range> ranges = OffsetPlan.split(
                OffsetPlan.batchRanges(starts, ends, bounds, options.failOnDataLoss()), options.minPartitions());
        List<InputPartition> out = new ArrayList<>();
        for (OffsetPlan.Range r : ranges) {
            out.add(new RangePartition(files.directory(r.partition()), options.topic(), r.partition(), r.start(), r.end(),
                    options.failOnDataLoss(), options.keysFile()));
        }
        return out.toArray(new InputPartition[0]);
    }

    @Override
    public PartitionReaderFactory createReaderFactory() {
        return new ColumnarReaderFactory(readSchema);
    }
}
