package org.tserve.fuzz;

import java.lang.management.ManagementFactory;
import java.util.Base64;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs a fuzz target over mutated inputs. Each input must return within a deadline (no hang) and
 * allocate at most the bound the target gives for it (measured with the JVM's per-thread
 * allocation counter, so a buffer sized from a declared length shows even when it would fit in
 * the heap). The number of inputs is {@code -Dtserve.fuzz.iterations} (passed through by
 * build.gradle) or the test's default; the seed is {@code -Dtserve.fuzz.seed} (default 16).
 * A failure names the iteration, the seed and the input in base64.
 */
public final class FuzzLoop {
    /** One input through the code under test; throws only on a broken promise. */
    public interface Target {
        void run(byte[] input) throws Exception;
    }

    private FuzzLoop() {
    }

    /** The number of inputs: {@code -Dtserve.fuzz.iterations}, else {@code dflt}. */
    public static int iterations(int dflt) {
        return Integer.getInteger("tserve.fuzz.iterations", dflt);
    }

    public static long seed() {
        return Long.getLong("tserve.fuzz.seed", 16L);
    }

    /**
     * Feeds {@code iterations} inputs from {@code inputs} to {@code target}, each within
     * {@code deadlineS} seconds and allocating at most {@code allocationBound(input)} bytes.
     */
    public static void run(String what, int iterations, java.util.function.Supplier<byte[]> inputs,
                           java.util.function.ToLongFunction<byte[]> allocationBound, long deadlineS, Target target)
            throws Exception {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        ExecutorService exec = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "fuzz-" + what);
            t.setDaemon(true);   // a hung input is reported; its thread must not keep the JVM alive
            return t;
        });
        try {
            for (int i = 0; i < iterations; i++) {
                byte[] input = inputs.get();
                long bound = allocationBound.applyAsLong(input);
                Future<Long> f = exec.submit(() -> {
                    long tid = Thread.currentThread().getId();
                    long before = threads.getThreadAllocatedBytes(tid);
                    target.run(input.clone());
                    return threads.getThreadAllocatedBytes(tid) - before;
                });
                long allocated;
                try {
                    allocated = f.get(deadlineS, TimeUnit.SECONDS);
                } catch (TimeoutException e) {
                    f.cancel(true);
                    throw failure(what, i, input, "no answer within " + deadlineS + " s (a hang)", null);
                } catch (ExecutionException e) {
                    throw failure(what, i, input, "unexpected " + e.getCause(), e.getCause());
                }
                if (allocated > bound) {
                    throw failure(what, i, input, "allocated " + allocated + " bytes for a " + input.length
                            + "-byte input (bound " + bound + ")", null);
                }
            }
        } finally {
            exec.shutdownNow();
        }
    }

    private static AssertionError failure(String what, int i, byte[] input, String problem, Throwable cause) {
        AssertionError e = new AssertionError(what + " fuzz, iteration " + i + " (seed " + seed() + "): " + problem
                + "\ninput (base64): " + Base64.getEncoder().encodeToString(input));
        if (cause != null) {
            e.initCause(cause);
        }
        return e;
    }
}
