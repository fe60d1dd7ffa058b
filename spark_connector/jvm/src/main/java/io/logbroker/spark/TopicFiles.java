package io.logbroker.spark;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.stream.Stream;

/**
 * Where a topic's partitions are in the given data directories and how far they go, as
 * {@code spark_connector.sources.DirectSource} finds them (runs on the driver).
 *
 * <p>A partition is a {@code <topic>-<n>} directory. Its high watermark comes from the broker's
 * {@code high-watermark-checkpoint} (never from the segment files, which may hold appended records
 * that are not committed yet); with several data directories, each partition is read from the
 * directory whose checkpoint is furthest on.
 */
public final class TopicFiles {
    static final String HIGH_WATERMARK_FILE = "high-watermark-checkpoint";
    static final int CHECKPOINT_ENTRIES_MAX = 1_000_000;
    static final int CHECKPOINT_LINE_BYTES_MAX = 256;

    private final SortedMap<Integer, String> directories = new TreeMap<>();
    private final Map<Integer, Long> marks = new HashMap<>();

    public TopicFiles(List<String> dataDirs, String topic) {
        for (String dataDir : dataDirs) {
            Path dir = Path.of(dataDir);
            if (!Files.isDirectory(dir)) {
                throw new IllegalArgumentException("path: '" + dataDir + "' is not a directory (give the broker's data directory)");
            }
            Map<Integer, Long> found = highWatermarks(dir, topic);
            partitionDirectories(dir, topic).forEach((partition, directory) -> {
                long mark = found.getOrDefault(partition, 0L);
                if (!directories.containsKey(partition) || mark > marks.get(partition)) {
                    directories.put(partition, directory);
                    marks.put(partition, mark);
                }
            });
        }
        if (directories.isEmpty()) {
            throw new IllegalArgumentException("topic '" + topic + "' has no partition directory (" + topic + "-<n>) in "
                    + dataDirs);
        }
    }

    /** {@code partition -> [earliest, high watermark]} for every partition found. */
    public SortedMap<Integer, OffsetPlan.Bounds> bounds() {
        SortedMap<Integer, OffsetPlan.Bounds> out = new TreeMap<>();
        directories.forEach((partition, directory) -> {
            long mark = marks.get(partition);
            long earliest = new SegmentLog(directory).logStartOffset();
            out.put(partition, new OffsetPlan.Bounds(Math.min(earliest, mark), mark));
        });
        return out;
    }

    public String directory(int partition) {
        return directories.get(partition);
    }

    /**
     * Base offset of the first batch below {@code latest} whose max timestamp is at or after
     * {@code timestampMs} (else {@code latest}): the broker's answer to {@code offsets?at=}, from
     * batch headers alone.
     */
    public long offsetForTimestamp(int partition, long timestampMs, long latest) {
        SegmentLog log = new SegmentLog(directory(partition));
        byte[] head = new byte[BatchFormat.HEADER_SIZE];
        for (long base : log.segmentBases()) {
            if (base >= latest) {
                break;
            }
            Path path = log.directory().resolve(SegmentLog.fileName(base, SegmentLog.LOG_SUFFIX));
            try (FileChannel channel = FileChannel.open(path, StandardOpenOption.READ)) {
                long size = channel.size();
                long position = 0;
                while (size - position >= BatchFormat.HEADER_SIZE) {
                    ByteBuffer target = ByteBuffer.wrap(head);
                    while (target.hasRemaining() && channel.read(target, position + target.position()) > 0) {
                        // read the whole header
                    }
                    BatchFormat.Header h = BatchFormat.parse(head, 0);
                    if (BatchFormat.problem(h, BatchFormat.RECORDS_BYTES_MAX) != null
                            || position + h.sizeBytes() > size) {
                        break;  // the end of this segment's valid data
                    }
                    if (h.baseOffset() >= latest) {
                        return latest;
                    }
                    if (h.maxTimestamp() >= timestampMs) {
                        return h.baseOffset();
                    }
                    position += h.sizeBytes();
                }
            } catch (NoSuchFileException e) {
                continue;
            } catch (IOException e) {
                throw new CorruptDataException(path + ": " + e, e);
            }
        }
        return latest;
    }

    static SortedMap<Integer, String> partitionDirectories(Path dataDir, String topic) {
        SortedMap<Integer, String> found = new TreeMap<>();
        try (Stream<Path> entries = Files.list(dataDir)) {
            entries.forEach(entry -> {
                String name = entry.getFileName().toString();
                int dash = name.lastIndexOf('-');
                if (dash < 0 || !name.substring(0, dash).equals(topic)) {
                    return;
                }
                String number = name.substring(dash + 1);
                if (!number.isEmpty() && number.length() < 10 && number.chars().allMatch(c -> c >= '0' && c <= '9')
                        && Files.isDirectory(entry)) {
                    found.put(Integer.parseInt(number), entry.toString());
                }
            });
        } catch (IOException e) {
            throw new CorruptDataException(dataDir + ": cannot list the data directory: " + e, e);
        }
        return found;
    }

    /** The checkpointed high watermark of each of {@code topic}'s partitions (an absent file: none). */
    static Map<Integer, Long> highWatermarks(Path dataDir, String topic) {
        Path path = dataDir.resolve(HIGH_WATERMARK_FILE);
        String text;
        try {
            if (Files.size(path) > (long) CHECKPOINT_LINE_BYTES_MAX * (CHECKPOINT_ENTRIES_MAX + 2)) {
                throw unreadable(path, "the file is larger than any checkpoint");
            }
            text = new String(Files.readAllBytes(path), StandardCharsets.US_ASCII);
        } catch (NoSuchFileException e) {
            return Map.of();
        } catch (IOException e) {
            throw unreadable(path, e.toString());
        }
        String[] lines = text.split("\n", -1);
        int lineCount = text.endsWith("\n") ? lines.length - 1 : lines.length;
        Map<Integer, Long> out = new HashMap<>();
        try {
            int version = Integer.parseInt(lines[0].strip());
            int count = Integer.parseInt(lines[1].strip());
            if (version != 0 || count < 0 || count > CHECKPOINT_ENTRIES_MAX || lineCount != count + 2) {
                throw unreadable(path, "version " + version + ", " + count + " entries, " + (lineCount - 2) + " lines");
            }
            for (int i = 2; i < lineCount; i++) {
                String[] fields = lines[i].split(" ", -1);
                if (fields.length != 3) {
                    throw unreadable(path, "a line does not have 3 fields");
                }
                int partition = Integer.parseInt(fields[1].strip());
                long offset = Long.parseLong(fields[2].strip());
                if (partition < 0 || offset < 0) {
                    throw unreadable(path, "negative value in line " + (i + 1));
                }
                if (fields[0].equals(topic)) {
                    out.put(partition, offset);
                }
            }
        } catch (NumberFormatException | ArrayIndexOutOfBoundsException e) {
            throw unreadable(path, e.toString());
        }
        return out;
    }

    private static CorruptDataException unreadable(Path path, String why) {
        return new CorruptDataException(path.getParent() + ": the high watermark checkpoint cannot be read: " + path
                + ": " + why);
    }
}
