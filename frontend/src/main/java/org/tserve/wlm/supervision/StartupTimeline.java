package org.tserve.wlm.supervision;

import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParser;
import java.util.concurrent.TimeUnit;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * Where one worker start went, step by step (docs/performance.md, "Startup timing"): spawn (process
 * or fork from the zygote, until its socket accepts), import (the handler's module, as the worker
 * reports it in LOADED), load (the handler's initialize, same), and the first batch's round trip.
 * One per process lifetime; describe shows the latest, and each start logs one INFO line when the
 * worker is READY and one when its first batch is answered.
 */
public final class StartupTimeline {
    private static final Logger LOG = Logging.logger(StartupTimeline.class);
    private final String worker;
    private final long spawnedNanos = System.nanoTime();
    private volatile long spawnMs = -1;
    private volatile long readyMs = -1;
    private volatile long importMs = -1;
    private volatile long loadMs = -1;
    private volatile long firstBatchMs = -1;
    private volatile boolean warm;

    StartupTimeline(String worker) {
        this.worker = worker;
    }

    /** The worker's socket accepted the frontend's connection: the spawn step ends. */
    void connected() {
        spawnMs = sinceSpawn();
    }

    /** Takes the worker's own steps from its LOADED answer ({@code "startup": {importMs, loadMs, warm}}). */
    void loaded(String loadedJson) {
        try {
            JsonElement s = JsonParser.parseString(loadedJson).getAsJsonObject().get("startup");
            if (s != null && s.isJsonObject()) {
                JsonObject o = s.getAsJsonObject();
                importMs = o.has("importMs") ? Math.round(o.get("importMs").getAsDouble()) : -1;
                loadMs = o.has("loadMs") ? Math.round(o.get("loadMs").getAsDouble()) : -1;
                warm = o.has("warm") && o.get("warm").getAsBoolean();
            }
        } catch (RuntimeException e) {
            // a worker that reports no steps (an older one, a custom one) still starts: they stay unknown
        }
    }

    /** Every rank loaded: the start is over; returns the log line's detail, e.g. "in 812 ms (spawn ...)". */
    String ready() {
        readyMs = sinceSpawn();
        return "in " + readyMs + " ms (" + (warm ? "forked from the zygote" : "cold start") + ": spawn "
                + shown(spawnMs) + ", import " + shown(importMs) + ", load " + shown(loadMs) + ")";
    }

    /** A batch was answered {@code roundTripNanos} after it was written; the first one is logged. */
    public void batchAnswered(long roundTripNanos) {
        if (firstBatchMs >= 0 || readyMs < 0) {
            return;
        }
        synchronized (this) {
            if (firstBatchMs >= 0) {
                return;
            }
            firstBatchMs = TimeUnit.NANOSECONDS.toMillis(roundTripNanos);
        }
        LOG.info(worker + ": first batch answered in " + firstBatchMs + " ms");
    }

    /** The describe field: every step known so far, in ms ({@code -1}: not reached or not reported). */
    JsonObject toJson() {
        JsonObject o = new JsonObject();
        o.addProperty("warm", warm);
        o.addProperty("spawnMs", spawnMs);
        o.addProperty("importMs", importMs);
        o.addProperty("loadMs", loadMs);
        o.addProperty("readyMs", readyMs);
        o.addProperty("firstBatchMs", firstBatchMs);
        return o;
    }

    private long sinceSpawn() {
        return TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - spawnedNanos);
    }

    private static String shown(long ms) {
        return ms < 0 ? "?" : ms + " ms";
    }
}
