package org.tserve.dist;

/** A worker needs more free devices than the server has; the message says how many of each. */
public final class InsufficientDevicesException extends Exception {
    private static final long serialVersionUID = 1L;

    private final int needed;
    private final int free;

    public InsufficientDevicesException(String message, int needed, int free) {
        super(message);
        this.needed = needed;
        this.free = free;
    }

    public int needed() {
        return needed;
    }

    public int free() {
        return free;
    }
}
