package io.logbroker.spark;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Stream;

/**
 * Read-only batches of one partition directory, as {@code segments.reader.SegmentReader} reads them.
 *
 * <p>Never writes. Segment files are {@code <20-digit base offset>.log}; an offset index
 * ({@code .index}, entries {@code (relative offset u32, position u32)}) is only a hint, trusted when
 * the batch header it points at has the offset it claims. Every batch's header is checked and its
 * checksum verified; a batch that runs past the end of the last segment is an append in progress
 * (the end of the data), anywhere else it is corruption, reported with the file and position. A
 * segment deleted by retention while being read is skipped (the caller sees the gap).
 */
public final class SegmentLog {
    static final String LOG_SUFFIX = ".log";
    static final String INDEX_SUFFIX = ".index";
    /** Batches are read in chunks of at least this many bytes. */
    static final int CHUNK_BYTES = 4 << 20;
    private static final VarHandle INT_LE =
            MethodHandles.byteArrayViewVarHandle(int[].class, ByteOrder.LITTLE_ENDIAN);

    private final Path directory;

    public SegmentLog(String directory) {
        this.directory = Path.of(directory);
        if (!Files.isDirectory(this.directory)) {
            throw new CorruptDataException(directory + " is not a partition directory");
        }
    }

    public Path directory() {
        return directory;
    }

    /** Base offsets of the segment files, ascending. */
    public long[] segmentBases() {
        List<Long> bases = new ArrayList<>();
        try (Stream<Path> files = Files.list(directory)) {
            files.forEach(f -> {
                String name = f.getFileName().toString();
                if (name.length() == 24 && name.endsWith(LOG_SUFFIX) && name.substring(0, 20).chars().allMatch(Character::isDigit)) {
                    bases.add(Long.parseLong(name.substring(0, 20)));
                }
            });
        } catch (IOException e) {
            throw new CorruptDataException(directory + ": cannot list segment files: " + e, e);
        }
        return bases.stream().mapToLong(Long::longValue).sorted().toArray();
    }

    public long logStartOffset() {
        long[] bases = segmentBases();
        return bases.length == 0 ? 0 : bases[0];
    }

    static String fileName(long base, String suffix) {
        return String.format("%020d%s", base, suffix);
    }

    /** Offsets below the log's first segment were requested (deleted by retention). */
    public static final class OutOfRangeException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        OutOfRangeException(String message) {
            super(message);
        }
    }

    /** Batches holding any offset in {@code [start, end)}, in order; {@link #next} moves to the next one. */
    public Cursor batches(long start, long end) {
        long[] bases = segmentBases();
        if (bases.length > 0 && start < bases[0]) {
            throw new OutOfRangeException("offset " + start + " is before the log start offset " + bases[0]);
        }
        int i = Arrays.binarySearch(bases, start);
        int first = i >= 0 ? i : Math.max(0, -i - 2);
        return new Cursor(bases, first, start, end);
    }

    /** Iterates batches; after {@code next()} returns true, {@link #header}, {@link #buffer} and
     * {@link #position} describe the current batch (valid until the next call). */
    public final class Cursor implements AutoCloseable {
        private final long[] bases;
        private final long start;
        private final long end;
        private int segment;
        private FileChannel channel;
        private Path path;
        private long fileSize;
        private long filePosition;
        private byte[] chunk = new byte[0];
        private long chunkStart;
        private int chunkLength;
        public BatchFormat.Header header;
        public byte[] buffer;
        public int position;
        /** The current batch's file and its position in that file. */
        public Path file;
        public long filePositionOfBatch;

        Cursor(long[] bases, int first, long start, long end) {
            this.bases = bases;
            this.segment = first - 1;
            this.start = start;
            this.end = end;
        }

        public boolean next() {
            while (true) {
                if (channel == null && !openNext()) {
                    return false;
                }
                if (readBatch()) {
                    if (header.baseOffset() >= end) {
                        closeChannel();
                        segment = bases.length;
                        return false;
                    }
                    if (header.lastOffset() >= start) {
                        return true;
                    }
                } else {
                    closeChannel();
                }
            }
        }

        private boolean openNext() {
            while (++segment < bases.length) {
                if (bases[segment] >= end) {
                    return false;
                }
                path = directory.resolve(fileName(bases[segment], LOG_SUFFIX));
                try {
                    channel = FileChannel.open(path, StandardOpenOption.READ);
                    fileSize = channel.size();
                } catch (NoSuchFileException e) {
                    continue;  // deleted by retention since it was listed
                } catch (IOException e) {
                    throw new CorruptDataException(path + ": cannot open: " + e, e);
                }
                chunkStart = 0;
                chunkLength = 0;
                filePosition = startPosition(bases[segment]);
                return true;
            }
            return false;
        }

        /** Read and check the batch at {@code filePosition}; false at the end of the segment's data. */
        private boolean readBatch() {
            long remaining = fileSize - filePosition;
            boolean last = segment == bases.length - 1;
            if (remaining < BatchFormat.HEADER_SIZE) {
                if (remaining > 0 && !last) {
                    throw corrupt("torn", "a batch header is cut short by the end of the file");
                }
                return false;
            }
            fill(BatchFormat.HEADER_SIZE);
            int at = (int) (filePosition - chunkStart);
            BatchFormat.Header h = BatchFormat.parse(chunk, at);
            String problem = BatchFormat.problem(h, BatchFormat.RECORDS_BYTES_MAX);
            if (problem != null) {
                throw corrupt("corrupt", problem);
            }
            if (filePosition + h.sizeBytes() > fileSize) {
                if (!last) {
                    throw corrupt("torn", "the batch runs past the end of the file");
                }
                return false;  // an append in progress
            }
            if (h.baseOffset() >= end) {
                header = h;  // past the range: next() stops here, without reading the batch
                return true;
            }
            fill((int) h.sizeBytes());
            at = (int) (filePosition - chunkStart);
            long computed = BatchFormat.computeChecksum(chunk, at, h);
            if (computed != h.checksum()) {
                throw corrupt("corrupt", String.format("batch checksum mismatch: stored 0x%016x, computed 0x%016x",
                        h.checksum(), computed));
            }
            header = h;
            buffer = chunk;
            position = at;
            file = path;
            filePositionOfBatch = filePosition;
            filePosition += h.sizeBytes();
            return true;
        }

        private CorruptDataException corrupt(String kind, String why) {
            return new CorruptDataException(path + ": " + kind + " batch at position " + filePosition + ": " + why);
        }

        /** Make sure the chunk holds {@code need} bytes from {@code filePosition}. */
        private void fill(int need) {
            if (filePosition >= chunkStart && filePosition + need <= chunkStart + chunkLength) {
                return;
            }
            int want = (int) Math.min(Math.max(CHUNK_BYTES, need), fileSize - filePosition);
            if (chunk.length < want) {
                chunk = new byte[Math.max(want, CHUNK_BYTES)];
            }
            ByteBuffer target = ByteBuffer.wrap(chunk, 0, want);
            try {
                while (target.hasRemaining()) {
                    int n = channel.read(target, filePosition + target.position());
                    if (n < 0) {
                        throw corrupt("torn", "the file shrank while being read");
                    }
                }
            } catch (IOException e) {
                throw new CorruptDataException(path + ": cannot read at position " + filePosition + ": " + e, e);
            }
            chunkStart = filePosition;
            chunkLength = want;
        }

        /** Position of an indexed batch at or before {@code start} (0 when the index does not help). */
        private long startPosition(long base) {
            if (start <= base) {
                return 0;
            }
            byte[] index;
            try {
                index = Files.readAllBytes(directory.resolve(fileName(base, INDEX_SUFFIX)));
            } catch (IOException | OutOfMemoryError e) {
                return 0;
            }
            long target = start - base;
            long rel = 0;
            long position = 0;
            for (int i = 0; i + 8 <= index.length; i += 8) {
                long entryRel = ((int) INT_LE.get(index, i)) & 0xFFFFFFFFL;
                if (i > 0 && entryRel == 0 || entryRel > target) {
                    break;  // the zero tail of a pre-allocated index, or past the target
                }
                rel = entryRel;
                position = ((int) INT_LE.get(index, i + 4)) & 0xFFFFFFFFL;
            }
            if (position == 0 || position + BatchFormat.HEADER_SIZE > fileSize) {
                return 0;
            }
            filePosition = position;
            fill(BatchFormat.HEADER_SIZE);
            BatchFormat.Header h = BatchFormat.parse(chunk, (int) (position - chunkStart));
            boolean sane = BatchFormat.problem(h, BatchFormat.RECORDS_BYTES_MAX) == null;
            return sane && h.baseOffset() == base + rel ? position : 0;
        }

        private void closeChannel() {
            if (channel != null) {
                try {
                    channel.close();
                } catch (IOException e) {
                    // read-only: nothing is lost
                }
                channel = null;
            }
        }

        @Override
        public void close() {
            closeChannel();
        }
    }
}
