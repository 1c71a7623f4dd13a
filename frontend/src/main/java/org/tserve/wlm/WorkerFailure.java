package org.tserve.wlm;

/** A failure that ends the backend's current process lifetime; the message is for logs and clients. */
final class WorkerFailure extends Exception {
    private static final long serialVersionUID = 1L;
    final int status;

    WorkerFailure(int status, String message) {
        super(message);
        this.status = status;
    }
}
