package org.tserve.auth;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * Counts failed token checks per client address in fixed windows: after {@code limit} failures
 * within {@code windowMillis}, every check from that address is refused until the window ends.
 * Memory is bounded: the least recently seen addresses are forgotten beyond {@code maxClients}.
 * Not thread-safe; {@link TokenAuthorization} calls it under its lock.
 */
final class FailureThrottle {
    /** Failures one address may make in a window before it is refused. */
    static final int LIMIT = 30;
    static final long WINDOW_MILLIS = 60_000;
    static final int MAX_CLIENTS = 10_000;

    private static final class Window {
        long start;
        int failures;
    }

    private final int limit;
    private final long windowMillis;
    private final int maxClients;
    private final Map<String, Window> clients;

    FailureThrottle(int limit, long windowMillis, int maxClients) {
        this.limit = limit;
        this.windowMillis = windowMillis;
        this.maxClients = maxClients;
        this.clients = new LinkedHashMap<String, Window>(16, 0.75f, true) {
            private static final long serialVersionUID = 1L;

            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Window> eldest) {
                return size() > FailureThrottle.this.maxClients;
            }
        };
    }

    FailureThrottle() {
        this(LIMIT, WINDOW_MILLIS, MAX_CLIENTS);
    }

    /** Milliseconds until {@code client} may try again; 0 when it may now. */
    long retryAfterMillis(String client, long now) {
        Window w = clients.get(client);
        if (w == null || now - w.start >= windowMillis) {
            return 0;
        }
        return w.failures >= limit ? windowMillis - (now - w.start) : 0;
    }

    /** Records one failed check from {@code client}. */
    void failed(String client, long now) {
        Window w = clients.get(client);
        if (w == null) {
            w = new Window();
            clients.put(client, w);
        }
        if (now - w.start >= windowMillis || w.failures == 0) {
            w.start = now;
            w.failures = 0;
        }
        w.failures++;
    }

    int size() {
        return clients.size();
    }
}
