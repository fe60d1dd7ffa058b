package io.logbroker.spark;

/** A batch, segment or checkpoint that is not what the broker writes: the read fails, never returns rows. */
public final class CorruptDataException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public CorruptDataException(String message) {
        super(message);
    }

    public CorruptDataException(String message, Throwable cause) {
        super(message, cause);
    }
}
