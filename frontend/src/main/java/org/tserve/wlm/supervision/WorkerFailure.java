package org.tserve.wlm.supervision;

/** A failure that ends the backend's current process lifetime; the message is for logs and clients. */
public final class WorkerFailure extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;

    public WorkerFailure(int status, String message) {
        super(message);
        this.status = status;
    }
}
