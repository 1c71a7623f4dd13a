package org.tserve.util;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Executor;
import org.apache.logging.log4j.Logger;

/**
 * Hands tasks to other threads' executors (the clients' event loops), coalescing within a group:
 * while a thread has a group open ({@link #open}, closed in a finally block), the tasks it hands to
 * one executor are queued as one task when the group closes, in the order given. A batch's answers then cost each event
 * loop one task and at most one wake-up, instead of one per answer (each a queue offer, and a
 * selector wake-up whenever the loop went back to sleep between two of them).
 */
public final class Handoff {
    private static final Logger LOG = Logging.logger(Handoff.class);
    private static final ThreadLocal<Group> OPEN = new ThreadLocal<>();

    private Handoff() {
    }

    /** Runs {@code task} on {@code executor}: now, or when this thread's open group closes. */
    public static void execute(Executor executor, Runnable task) {
        Group g = OPEN.get();
        if (g == null) {
            executor.execute(task);
        } else {
            g.add(executor, task);
        }
    }

    /**
     * Opens a group on this thread (close it in a finally block); inside an open group it returns a
     * group whose close does nothing: the outer one hands everything over.
     */
    public static Group open() {
        if (OPEN.get() != null) {
            return Group.NESTED;
        }
        Group g = new Group();
        OPEN.set(g);
        return g;
    }

    /** The tasks handed off since {@link #open}, per executor; {@link #close} queues them. */
    public static final class Group {
        static final Group NESTED = new Group();
        /** Few executors per group (the event loops, one per core): a list beats a map. */
        private final List<Executor> executors = new ArrayList<>(4);
        private final List<List<Runnable>> tasks = new ArrayList<>(4);

        private void add(Executor executor, Runnable task) {
            for (int i = 0; i < executors.size(); i++) {
                if (executors.get(i) == executor) {
                    tasks.get(i).add(task);
                    return;
                }
            }
            executors.add(executor);
            List<Runnable> l = new ArrayList<>(8);
            l.add(task);
            tasks.add(l);
        }

        public void close() {
            if (this == NESTED) {
                return;
            }
            OPEN.remove();
            for (int i = 0; i < executors.size(); i++) {
                List<Runnable> l = tasks.get(i);
                try {
                    executors.get(i).execute(l.size() == 1 ? l.get(0) : () -> runAll(l));
                } catch (RuntimeException e) {   // an event loop shut down: the others still get theirs
                    LOG.warn("Could not hand " + l.size() + " task(s) over: " + e);
                }
            }
        }

        /** One task failing must not cost the others their turn (each ran alone before). */
        private static void runAll(List<Runnable> l) {
            for (Runnable r : l) {
                try {
                    r.run();
                } catch (RuntimeException e) {
                    LOG.warn("A handed-off task failed: " + e);
                }
            }
        }
    }
}
