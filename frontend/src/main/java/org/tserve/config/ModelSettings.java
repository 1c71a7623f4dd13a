package org.tserve.config;

import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The resolved settings of one model version. Built from layers applied in priority order:
 * config.properties defaults, then its {@code models} JSON entry, then the archive's
 * model-config.yaml, then management API parameters — each later layer wins for the keys it sets.
 * The fields are plain storage for the hot path; each key's type, range, default and doc are
 * declared once in {@link ModelKeys}.
 */
public final class ModelSettings {
    public int minWorkers;
    public int maxWorkers;
    public int batchSize;
    public int maxBatchDelay;
    public int responseTimeout;
    public int startupTimeout;
    public int jobQueueSize;
    public String deviceType;
    public List<Integer> deviceIds;
    public String parallelType;
    public int parallelLevel;
    public Map<String, Object> torchrun;
    public int preprocessWorkers;
    public boolean postprocessInPool;
    public int maxRetryTimeoutInSec;
    /** 0 = derived: see {@link #inFlightLimit()}. */
    public int maxBatchesInFlight;
    public boolean continuousBatching;
    public boolean asyncCommunication;
    public boolean sequenceBatching;
    public int sequenceMaxIdleMSec;
    public int sequenceTimeoutMSec;
    public int maxSequenceJobQueueSize;
    /** 0 = derived: see {@link #sequenceLimit()}. */
    public int maxNumSequence;
    public int clientTimeoutInMills;
    public boolean useJobTicket;
    public boolean useVenv;
    public String dispatchPolicy;

    /** Every key at its declared default. */
    public ModelSettings() {
        for (ModelKey<?> k : ModelKeys.all()) {
            k.reset(this);
        }
    }

    /** The config.properties layer: defaults from the server configuration. */
    public static ModelSettings defaults(ConfigManager cfg, int defaultWorkers) {
        ModelSettings s = new ModelSettings();
        s.minWorkers = defaultWorkers;
        s.maxWorkers = defaultWorkers;
        for (ModelKey<?> k : ModelKeys.all()) {
            if (k.serverDefault != null) {
                k.apply(s, cfg.getInt(k.serverDefault), "config.properties " + k.serverDefault);
            }
        }
        s.deviceType = cfg.getNumberOfGpu() > 0 ? "gpu" : "cpu";
        return s;
    }

    /**
     * Batches a worker keeps in flight on its connection. With a preprocess pool: N preprocessing,
     * one in inference, and one more waiting at the pool, so that neither stage idles while a
     * RESULT travels back and the next batch comes (docs/pipelines.md).
     */
    public int inFlightLimit() {
        if (maxBatchesInFlight > 0) {
            return maxBatchesInFlight;
        }
        if (joinsRunningBatch()) {
            // batchSize sequences running, as many waiting in the worker: a finished sequence's
            // slot is refilled at the next step, without a round trip to the frontend
            return 2 * batchSize;
        }
        return preprocessWorkers > 0 ? preprocessWorkers + 2 : 1;
    }

    /** Sequences a stateful model keeps open at once. */
    public int sequenceLimit() {
        return maxNumSequence > 0 ? maxNumSequence : batchSize * Math.max(1, maxWorkers);
    }

    /** Refuses settings a stateful model cannot run with, naming the key. */
    public void checkSequences(String model) {
        if (!sequenceBatching) {
            return;
        }
        if (sequenceMaxIdleMSec <= 0) {
            throw new ConfigException("model " + model + ": sequenceBatching needs sequenceMaxIdleMSec > 0 (how long "
                    + "an idle sequence keeps its worker and state), got " + sequenceMaxIdleMSec);
        }
    }

    /** True when requests go to the worker one by one and join its running batch (continuous batching). */
    public boolean joinsRunningBatch() {
        return continuousBatching || asyncCommunication;
    }

    /**
     * Applies one layer. Ill-typed or out-of-range values throw a ConfigException naming the key and
     * the source; unknown keys add a warning to {@code warnings}.
     */
    public void apply(Map<String, ?> layer, String source, List<String> warnings) {
        if (layer == null) {
            return;
        }
        for (Map.Entry<String, ?> e : layer.entrySet()) {
            ModelKey<?> key = ModelKeys.get(e.getKey());
            if (e.getValue() == null) {
                continue;
            }
            if (key != null) {
                key.apply(this, e.getValue(), source);
            } else if (!ModelKeys.notSettings().containsKey(e.getKey())) {
                warnings.add(source + ": unknown key '" + e.getKey() + "' ignored");
            }
        }
        boolean sawMin = layer.get("minWorkers") != null;
        boolean sawMax = layer.get("maxWorkers") != null;
        // a layer that sets one bound moves the other along rather than contradicting it
        if (sawMin && !sawMax && maxWorkers < minWorkers) {
            maxWorkers = minWorkers;
        }
        if (sawMax && !sawMin && minWorkers > maxWorkers) {
            minWorkers = maxWorkers;
        }
        if (maxWorkers < minWorkers) {
            throw new ConfigException(source + ": 'maxWorkers' (" + maxWorkers + ") cannot be less than 'minWorkers' ("
                    + minWorkers + ")");
        }
    }

    /** A copy (settings objects are replaced, not mutated, once a model runs). */
    public ModelSettings copy() {
        ModelSettings s = new ModelSettings();
        for (ModelKey<?> k : ModelKeys.all()) {
            k.copy(this, s);
        }
        return s;
    }

    /** Unmodifiable set of the model-config.yaml keys this class understands. */
    public static Set<String> knownKeys() {
        Set<String> s = new LinkedHashSet<>();
        ModelKeys.all().forEach(k -> s.add(k.name));
        return Collections.unmodifiableSet(s);
    }
}
