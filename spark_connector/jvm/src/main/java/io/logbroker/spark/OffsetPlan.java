package io.logbroker.spark;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.TreeSet;

/**
 * Offset planning (pure), as {@code spark_connector.offsets}: option specs and the partitions'
 * bounds become ranges. Invariants: every range satisfies {@code earliest <= start <= end <= high
 * watermark} when planned (a read never goes past the high watermark), ranges of one partition
 * never overlap, and {@link #split} keeps every offset of the ranges it splits exactly once.
 */
public final class OffsetPlan {
    public static final long EARLIEST = -2;
    public static final long LATEST = -1;

    private OffsetPlan() {}

    /** What a partition holds now: {@code [earliest, latest)}, latest being the high watermark. */
    public record Bounds(long earliest, long latest) implements Serializable {}

    public record Range(int partition, long start, long end) implements Serializable {
        public long size() {
            return end - start;
        }
    }

    /**
     * {@code earliest}, {@code latest}, or per-partition offsets ({@link #EARLIEST}/{@link #LATEST}
     * allowed as values); partitions a JSON spec leaves out take the caller's default.
     */
    public record Spec(long whole, SortedMap<Integer, Long> perPartition) implements Serializable {
        public static Spec of(long whole) {
            return new Spec(whole, null);
        }
    }

    public static SortedMap<Integer, Long> resolve(Spec spec, SortedMap<Integer, Bounds> bounds, long fallback,
                                                   String display) {
        SortedMap<Integer, Long> out = new TreeMap<>();
        if (spec.perPartition() != null) {
            TreeSet<Integer> unknown = new TreeSet<>(spec.perPartition().keySet());
            unknown.removeAll(bounds.keySet());
            if (!unknown.isEmpty()) {
                throw new IllegalArgumentException(display + " names partition(s) " + unknown
                        + " that the topic does not have (it has " + bounds.keySet() + ")");
            }
        }
        bounds.forEach((p, b) -> {
            long wanted = spec.perPartition() == null ? spec.whole() : spec.perPartition().getOrDefault(p, fallback);
            out.put(p, wanted == EARLIEST ? b.earliest() : wanted == LATEST ? b.latest() : wanted);
        });
        return out;
    }

    /** One range per partition, ends capped at the high watermark; a start below the earliest
     * offset is data loss (an error, or moved up to the earliest when failOnDataLoss is false). */
    public static List<Range> batchRanges(Map<Integer, Long> starts, Map<Integer, Long> ends,
                                          SortedMap<Integer, Bounds> bounds, boolean failOnDataLoss) {
        List<Range> out = new ArrayList<>();
        bounds.forEach((p, b) -> {
            long end = Math.min(ends.get(p), b.latest());
            long start = checkStart(p, starts.get(p), b.earliest(), failOnDataLoss);
            if (start > end) {
                throw new IllegalArgumentException("partition " + p + ": the starting offset " + start
                        + " is after the ending offset " + end + " (the high watermark is " + b.latest() + ")");
            }
            out.add(new Range(p, start, end));
        });
        return out;
    }

    public static long checkStart(int partition, long start, long earliest, boolean failOnDataLoss) {
        if (start >= earliest) {
            return start;
        }
        if (failOnDataLoss) {
            throw new DataLossException("partition " + partition + ": offsets " + start + ".." + (earliest - 1)
                    + " were deleted (retention) before they were read; the earliest offset is now " + earliest
                    + ". Set failOnDataLoss=false to skip them with a warning");
        }
        return earliest;
    }

    /** Split ranges so there are at least {@code minPartitions} (by size, as Kafka's source does);
     * empty ranges are dropped. {@code minPartitions} 0 means no minimum. */
    public static List<Range> split(List<Range> ranges, int minPartitions) {
        List<Range> nonEmpty = ranges.stream().filter(r -> r.size() > 0).toList();
        long total = nonEmpty.stream().mapToLong(Range::size).sum();
        if (minPartitions <= nonEmpty.size() || total == 0) {
            return nonEmpty;
        }
        List<Range> out = new ArrayList<>();
        for (Range r : nonEmpty) {
            long pieces = Math.max(1, Math.min(r.size(), ceilDiv(r.size(), minPartitions, total)));
            long step = r.size() / pieces;
            long extra = r.size() % pieces;
            long start = r.start();
            for (long i = 0; i < pieces; i++) {
                long end = start + step + (i < extra ? 1 : 0);
                out.add(new Range(r.partition(), start, end));
                start = end;
            }
            assert start == r.end();
        }
        return out;
    }

    private static long ceilDiv(long size, long factor, long total) {
        java.math.BigInteger product = java.math.BigInteger.valueOf(size).multiply(java.math.BigInteger.valueOf(factor));
        java.math.BigInteger[] qr = product.divideAndRemainder(java.math.BigInteger.valueOf(total));
        return qr[0].longValueExact() + (qr[1].signum() > 0 ? 1 : 0);
    }
}
