package io.logbroker.spark;

/** Planned offsets that cannot be read (deleted by retention, or missing): with failOnDataLoss=true. */
public final class DataLossException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public DataLossException(String message) {
        super(message);
    }
}
