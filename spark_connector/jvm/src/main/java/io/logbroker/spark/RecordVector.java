package io.logbroker.spark;

import java.util.Arrays;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.vectorized.ColumnVector;
import org.apache.spark.sql.vectorized.ColumnarArray;
import org.apache.spark.sql.vectorized.ColumnarMap;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * A read-only column over one decoded batch's {@link RecordColumns}, rows {@code [base, base +
 * n)}: keys and values are read from the records section where they lie, offsets and timestamps from
 * the parsed arrays, so nothing is copied into a vector first. Valid until the reader moves on to
 * the next batch (Spark is done with a columnar batch before it asks for the next one).
 */
final class RecordVector extends ColumnVector {
    enum Field { KEY, VALUE, OFFSET, TIMESTAMP }

    private final Field field;
    private RecordColumns columns;
    private int base;
    private int nulls;

    RecordVector(DataType type, Field field) {
        super(type);
        this.field = field;
    }

    /** Show rows {@code [base, base + rows)} of {@code c}. */
    void point(RecordColumns c, int base, int rows) {
        this.columns = c;
        this.base = base;
        int[] lengths = field == Field.KEY ? c.keyLen : field == Field.VALUE ? c.valueLen : null;
        int count = 0;
        if (lengths != null) {
            for (int i = base; i < base + rows; i++) {
                if (lengths[i] == RecordColumns.NIL) {
                    count++;
                }
            }
        }
        nulls = count;
    }

    @Override
    public void close() {
        columns = null;
    }

    @Override
    public boolean hasNull() {
        return nulls > 0;
    }

    @Override
    public int numNulls() {
        return nulls;
    }

    @Override
    public boolean isNullAt(int rowId) {
        return switch (field) {
            case KEY -> columns.keyLen[base + rowId] == RecordColumns.NIL;
            case VALUE -> columns.valueLen[base + rowId] == RecordColumns.NIL;
            default -> false;
        };
    }

    @Override
    public long getLong(int rowId) {
        return switch (field) {
            case OFFSET -> columns.offsets[base + rowId];
            case TIMESTAMP -> ColumnarReaderFactory.micros(columns.timestamps[base + rowId]);
            default -> throw unsupported("getLong");
        };
    }

    @Override
    public byte[] getBinary(int rowId) {
        int row = base + rowId;
        int position;
        int length;
        if (field == Field.VALUE) {
            position = columns.valuePos[row];
            length = columns.valueLen[row];
        } else if (field == Field.KEY) {
            position = columns.keyPos[row];
            length = columns.keyLen[row];
        } else {
            throw unsupported("getBinary");
        }
        return length == RecordColumns.NIL ? null : Arrays.copyOfRange(columns.data, position, position + length);
    }

    private UnsupportedOperationException unsupported(String what) {
        return new UnsupportedOperationException(what + " on the " + field + " column");
    }

    @Override
    public boolean getBoolean(int rowId) {
        throw unsupported("getBoolean");
    }

    @Override
    public byte getByte(int rowId) {
        throw unsupported("getByte");
    }

    @Override
    public short getShort(int rowId) {
        throw unsupported("getShort");
    }

    @Override
    public int getInt(int rowId) {
        throw unsupported("getInt");
    }

    @Override
    public float getFloat(int rowId) {
        throw unsupported("getFloat");
    }

    @Override
    public double getDouble(int rowId) {
        throw unsupported("getDouble");
    }

    @Override
    public ColumnarArray getArray(int rowId) {
        throw unsupported("getArray");
    }

    @Override
    public ColumnarMap getMap(int ordinal) {
        throw unsupported("getMap");
    }

    @Override
    public Decimal getDecimal(int rowId, int precision, int scale) {
        throw unsupported("getDecimal");
    }

    @Override
    public UTF8String getUTF8String(int rowId) {
        throw unsupported("getUTF8String");
    }

    @Override
    public ColumnVector getChild(int ordinal) {
        throw unsupported("getChild");
    }
}
