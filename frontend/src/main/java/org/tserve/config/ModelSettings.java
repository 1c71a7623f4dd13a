package org.tserve.config;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The resolved settings of one model version. Built from layers applied in priority order:
 * config.properties defaults, then its {@code models} JSON entry, then the archive's
 * model-config.yaml, then management API parameters — each later layer wins for the keys it sets.
 */
public final class ModelSettings {
    private static final Set<String> INT_KEYS = new HashSet<>(Arrays.asList(
            "minWorkers", "maxWorkers", "batchSize", "maxBatchDelay", "responseTimeout", "startupTimeout",
            "jobQueueSize", "parallelLevel", "preprocessWorkers", "maxRetryTimeoutInSec", "maxBatchesInFlight",
            "sequenceMaxIdleMSec", "sequenceTimeoutMSec", "maxSequenceJobQueueSize", "maxNumSequence",
            "clientTimeoutInMills"));
    /** Sections read by handlers, passed to the worker untouched. */
    private static final Set<String> HANDLER_SECTIONS = new HashSet<>(Arrays.asList(
            "handler", "pippy", "deepspeed", "tp", "accelerate", "pt2", "micro_batching", "mb_parallelism", "dali", "redis"));
    private static final Set<String> BOOLEAN_KEYS = new HashSet<>(Arrays.asList(
            "postprocessInPool", "continuousBatching", "asyncCommunication", "sequenceBatching", "useJobTicket", "useVenv"));
    /** Keys of config.properties' models JSON that are not settings. */
    private static final Set<String> MODELS_JSON_ONLY = new HashSet<>(Arrays.asList(
            "defaultVersion", "marName", "runtimeType"));

    public int minWorkers;
    public int maxWorkers;
    public int batchSize = 1;
    public int maxBatchDelay = 100;
    public int responseTimeout = 120;
    public int startupTimeout = 120;
    public int jobQueueSize = 100;
    public String deviceType = "cpu";
    public List<Integer> deviceIds = new ArrayList<>();
    public String parallelType = "";
    public int parallelLevel;
    public Map<String, Object> torchrun = new LinkedHashMap<>();
    public int preprocessWorkers;
    public boolean postprocessInPool;
    public int maxRetryTimeoutInSec = 300;
    /** Batches a worker may have in flight; 0 = derived (1, or {@code preprocessWorkers + 2} with a pool). */
    public int maxBatchesInFlight;
    /**
     * Requests join the worker's running generation between steps (the handler's add_request/step,
     * docs/llm.md): each job goes to the worker alone, as soon as it has a free slot.
     */
    public boolean continuousBatching;
    /** TorchServe's name for sending requests to a busy worker as they arrive; tserve treats it as continuousBatching. */
    public boolean asyncCommunication;
    /** Stateful sequences (TorchServe's sequenceBatching): a sequence's requests go to one worker, in order. */
    public boolean sequenceBatching;
    /** Milliseconds an idle sequence keeps its worker (must be > 0 with sequenceBatching). */
    public int sequenceMaxIdleMSec;
    /** Milliseconds a sequence may live in all (0 = no limit). */
    public int sequenceTimeoutMSec;
    /** Requests of one sequence that may wait behind the one running. */
    public int maxSequenceJobQueueSize = 1;
    /** Sequences open at once (0 = batchSize x maxWorkers). */
    public int maxNumSequence;
    /**
     * Milliseconds a request may wait in the queue (0 = no limit): an older one is answered 503
     * when a batch is formed instead of being sent, as its client has likely given up.
     */
    public int clientTimeoutInMills;
    /** Accept an inference request only when a worker is free to take it now (else 503), never queue it behind others. */
    public boolean useJobTicket;
    /** Workers run in a virtual environment of their own, created at registration (requirements go there). */
    public boolean useVenv;
    /** How a batch that is not full is sent: {@code eager}, {@code adaptive} or {@code delay} (docs/batching.md). */
    public String dispatchPolicy = "adaptive";

    /** The config.properties layer: defaults from the server configuration. */
    public static ModelSettings defaults(ConfigManager cfg, int defaultWorkers) {
        ModelSettings s = new ModelSettings();
        s.minWorkers = defaultWorkers;
        s.maxWorkers = defaultWorkers;
        s.responseTimeout = cfg.getInt("default_response_timeout");
        s.startupTimeout = cfg.getInt("default_startup_timeout");
        s.jobQueueSize = cfg.getInt("job_queue_size");
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
        boolean sawMin = false;
        boolean sawMax = false;
        for (Map.Entry<String, ?> e : layer.entrySet()) {
            String k = e.getKey();
            Object v = e.getValue();
            if (v == null) {
                continue;
            }
            if (INT_KEYS.contains(k)) {
                int n = toInt(k, v, source);
                if (n < 0) {
                    throw new ConfigException(source + ": '" + k + "' must not be negative, got " + v);
                }
                switch (k) {
                    case "minWorkers": minWorkers = n; sawMin = true; break;
                    case "maxWorkers": maxWorkers = n; sawMax = true; break;
                    case "batchSize":
                        if (n < 1) {
                            throw new ConfigException(source + ": 'batchSize' must be at least 1, got " + v);
                        }
                        batchSize = n;
                        break;
                    case "maxBatchDelay": maxBatchDelay = n; break;
                    case "responseTimeout": responseTimeout = n; break;
                    case "startupTimeout": startupTimeout = n; break;
                    case "jobQueueSize":
                        if (n > 0) {
                            jobQueueSize = n;
                        }
                        break;
                    case "parallelLevel": parallelLevel = n; break;
                    case "preprocessWorkers": preprocessWorkers = n; break;
                    case "maxRetryTimeoutInSec": maxRetryTimeoutInSec = n; break;
                    case "maxBatchesInFlight": maxBatchesInFlight = n; break;
                    case "sequenceMaxIdleMSec": sequenceMaxIdleMSec = n; break;
                    case "sequenceTimeoutMSec": sequenceTimeoutMSec = n; break;
                    case "maxSequenceJobQueueSize": maxSequenceJobQueueSize = n; break;
                    case "maxNumSequence": maxNumSequence = n; break;
                    case "clientTimeoutInMills": clientTimeoutInMills = n; break;
                    default: break;
                }
            } else if (k.equals("deviceType")) {
                String d = toStr(k, v, source).toLowerCase(java.util.Locale.ROOT);
                if (!d.equals("cpu") && !d.equals("gpu") && !d.equals("neuron")) {
                    throw new ConfigException(source + ": 'deviceType' must be cpu or gpu, got " + v);
                }
                deviceType = d;
            } else if (k.equals("parallelType")) {
                String p = toStr(k, v, source);
                if (!Arrays.asList("", "pp", "tp", "pptp", "custom").contains(p)) {
                    throw new ConfigException(source + ": 'parallelType' must be one of pp, tp, pptp, custom, got " + v);
                }
                parallelType = p;
            } else if (k.equals("deviceIds")) {
                if (!(v instanceof List)) {
                    throw new ConfigException(source + ": 'deviceIds' must be a list of integers, got " + v);
                }
                List<Integer> ids = new ArrayList<>();
                for (Object o : (List<?>) v) {
                    ids.add(toInt("deviceIds", o, source));
                }
                deviceIds = ids;
            } else if (k.equals("dispatchPolicy")) {
                String d = toStr(k, v, source).toLowerCase(java.util.Locale.ROOT);
                if (!d.equals("eager") && !d.equals("adaptive") && !d.equals("delay")) {
                    throw new ConfigException(source + ": 'dispatchPolicy' must be eager, adaptive or delay, got " + v);
                }
                dispatchPolicy = d;
            } else if (BOOLEAN_KEYS.contains(k)) {
                if (!(v instanceof Boolean)) {
                    throw new ConfigException(source + ": '" + k + "' must be true or false, got " + v);
                }
                boolean b = (Boolean) v;
                switch (k) {
                    case "postprocessInPool": postprocessInPool = b; break;
                    case "continuousBatching": continuousBatching = b; break;
                    case "sequenceBatching": sequenceBatching = b; break;
                    case "useJobTicket": useJobTicket = b; break;
                    case "useVenv": useVenv = b; break;
                    default: asyncCommunication = b; break;
                }
            } else if (k.equals("torchrun")) {
                if (!(v instanceof Map)) {
                    throw new ConfigException(source + ": 'torchrun' must be a mapping, got " + v);
                }
                Map<String, Object> t = new LinkedHashMap<>();
                for (Map.Entry<?, ?> te : ((Map<?, ?>) v).entrySet()) {
                    t.put(String.valueOf(te.getKey()), te.getValue());
                }
                // nproc-per-node is checked against parallelLevel once every layer is applied
                // (SettingsResolver, via TorchrunOptions.parse), then becomes parallelLevel.
                torchrun = t;
            } else if (HANDLER_SECTIONS.contains(k) || MODELS_JSON_ONLY.contains(k)) {
                continue;
            } else {
                warnings.add(source + ": unknown key '" + k + "' ignored");
            }
        }
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

    private static int toInt(String k, Object v, String source) {
        if (v instanceof Integer || v instanceof Long || v instanceof Short) {
            long l = ((Number) v).longValue();
            if (l > Integer.MAX_VALUE || l < Integer.MIN_VALUE) {
                throw new ConfigException(source + ": '" + k + "' is out of range: " + v);
            }
            return (int) l;
        }
        if (v instanceof Double && ((Double) v) == Math.rint((Double) v)) {
            return ((Double) v).intValue();
        }
        throw new ConfigException(source + ": '" + k + "' must be an integer, got " + v);
    }

    private static String toStr(String k, Object v, String source) {
        if (v instanceof String) {
            return (String) v;
        }
        throw new ConfigException(source + ": '" + k + "' must be a string, got " + v);
    }

    /** A copy (settings objects are replaced, not mutated, once a model runs). */
    public ModelSettings copy() {
        ModelSettings s = new ModelSettings();
        s.minWorkers = minWorkers;
        s.maxWorkers = maxWorkers;
        s.batchSize = batchSize;
        s.maxBatchDelay = maxBatchDelay;
        s.responseTimeout = responseTimeout;
        s.startupTimeout = startupTimeout;
        s.jobQueueSize = jobQueueSize;
        s.deviceType = deviceType;
        s.deviceIds = new ArrayList<>(deviceIds);
        s.parallelType = parallelType;
        s.parallelLevel = parallelLevel;
        s.torchrun = new LinkedHashMap<>(torchrun);
        s.preprocessWorkers = preprocessWorkers;
        s.postprocessInPool = postprocessInPool;
        s.continuousBatching = continuousBatching;
        s.asyncCommunication = asyncCommunication;
        s.sequenceBatching = sequenceBatching;
        s.sequenceMaxIdleMSec = sequenceMaxIdleMSec;
        s.sequenceTimeoutMSec = sequenceTimeoutMSec;
        s.maxSequenceJobQueueSize = maxSequenceJobQueueSize;
        s.maxNumSequence = maxNumSequence;
        s.maxRetryTimeoutInSec = maxRetryTimeoutInSec;
        s.maxBatchesInFlight = maxBatchesInFlight;
        s.dispatchPolicy = dispatchPolicy;
        s.clientTimeoutInMills = clientTimeoutInMills;
        s.useJobTicket = useJobTicket;
        s.useVenv = useVenv;
        return s;
    }

    /** Unmodifiable list of the model-config.yaml keys this class understands. */
    public static Set<String> knownKeys() {
        Set<String> s = new HashSet<>(INT_KEYS);
        s.addAll(BOOLEAN_KEYS);
        s.addAll(Arrays.asList("deviceType", "parallelType", "deviceIds", "torchrun", "dispatchPolicy"));
        return Collections.unmodifiableSet(s);
    }
}
