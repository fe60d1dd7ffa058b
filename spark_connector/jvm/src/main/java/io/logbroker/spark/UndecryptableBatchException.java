package io.logbroker.spark;

import java.io.Serial;

/**
 * A batch encrypted at rest that cannot be opened: no key ring was given, its key is not in the
 * ring, or its authentication tag fails. Not {@link CorruptDataException}: the records are intact
 * and readable with the right key, so the read fails whatever failOnDataLoss says.
 */
public final class UndecryptableBatchException extends RuntimeException {
    @Serial
    private static final long serialVersionUID = 1L;

    public UndecryptableBatchException(String message) {
        super(message);
    }
}
