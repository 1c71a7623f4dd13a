package org.tserve.server;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.IntConsumer;

/**
 * Who hears that an answer went out (its status code): the REST and gRPC front ends tell it, the metrics
 * extension listens (Requests2XX/4XX/5XX). It keeps the front ends from reaching into {@code metrics}.
 */
public final class ResponseListeners {
    private final List<IntConsumer> listeners = new CopyOnWriteArrayList<>();

    /** Adds a listener; it runs on network threads, so it must not block. */
    public void add(IntConsumer listener) {
        listeners.add(listener);
    }

    /** An answer with this status was sent. */
    public void sent(int status) {
        for (IntConsumer l : listeners) {
            l.accept(status);
        }
    }
}
