package io.logbroker.spark;

import java.util.Map;
import java.util.Set;
import org.apache.spark.sql.connector.catalog.SupportsRead;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.read.ScanBuilder;
import org.apache.spark.sql.sources.DataSourceRegister;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * {@code spark.read.format("logbroker-segments")}: batch reads of a topic straight from the
 * broker's segment files, in the JVM (Spark DataSource V2, columnar). Same options, rows and
 * checks as the Python {@code logbroker} source's {@code path} reads, without the Python worker.
 *
 * <p>Options are checked when the table is made ({@code load()}), so a bad option fails before any
 * task runs; offsets are planned when the query runs.
 */
public final class SegmentsDataSource implements TableProvider, DataSourceRegister {
    public static final String NAME = "logbroker-segments";
    public static final StructType SCHEMA = new StructType()
            .add("key", DataTypes.BinaryType)
            .add("value", DataTypes.BinaryType)
            .add("topic", DataTypes.StringType)
            .add("partition", DataTypes.IntegerType)
            .add("offset", DataTypes.LongType)
            .add("timestamp", DataTypes.TimestampType)
            .add("headers", DataTypes.createMapType(DataTypes.StringType, DataTypes.BinaryType));

    @Override
    public String shortName() {
        return NAME;
    }

    @Override
    public StructType inferSchema(CaseInsensitiveStringMap options) {
        return SCHEMA;
    }

    @Override
    public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
        if (schema != null && !schema.equals(SCHEMA)) {
            throw new IllegalArgumentException("the " + NAME + " source has a fixed schema (" + SCHEMA.simpleString()
                    + "); do not set another one (got " + schema.simpleString() + ")");
        }
        return new SegmentsTable(ReadOptions.parse(properties));
    }

    /** A topic in a set of data directories. */
    static final class SegmentsTable implements SupportsRead {
        private final ReadOptions options;

        SegmentsTable(ReadOptions options) {
            this.options = options;
        }

        @Override
        public String name() {
            return NAME + ":" + options.topic();
        }

        @Override
        @SuppressWarnings("deprecation")
        public StructType schema() {
            return SCHEMA;
        }

        @Override
        public Set<TableCapability> capabilities() {
            return Set.of(TableCapability.BATCH_READ);
        }

        @Override
        public ScanBuilder newScanBuilder(CaseInsensitiveStringMap scanOptions) {
            return new SegmentsScan.Builder(options);
        }
    }
}
