package org.tserve.archive;

/** A model archive that cannot be found, fetched or read; carries the HTTP status to answer with. */
public class ArchiveException extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;

    public ArchiveException(int status, String message) {
        super(message);
        this.status = status;
    }

    public int getStatus() {
        return status;
    }
}
