package org.tserve.wlm.api;

/** A workload-manager failure with the HTTP-style status a client should see and a clear message. */
public class WlmException extends Exception {
    private static final long serialVersionUID = 1L;
    private final int status;

    public WlmException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** HTTP-style status: 400, 403, 404, 405, 408, 409, 500, 503, 507. */
    public int getStatus() {
        return status;
    }
}
