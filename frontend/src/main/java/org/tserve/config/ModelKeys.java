package org.tserve.config;

import java.util.Collection;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiConsumer;
import java.util.function.Function;
import org.tserve.config.ModelKey.Shown;

/**
 * Every model setting (model-config.yaml keys, the config.properties models JSON, management API
 * parameters), each declared once. A new key is one entry here plus its field in
 * {@link ModelSettings}; parsing, copy(), describe, the docs table, the unknown-key warning and the
 * worker's view (LOAD: {@link WorkerSettings}; the handler's {@code context.model_settings}:
 * ts/generated/model_settings.py, rewritten by {@code gradle pythonKeys}) follow.
 * Declaration order is describe's field order (TorchServe's, then tserve's additions).
 */
public final class ModelKeys {
    private static final Map<String, ModelKey<?>> KEYS = new LinkedHashMap<>();
    /** Keys a layer may hold that are not settings, with why: no unknown-key warning for them. */
    private static final Map<String, String> NOT_SETTINGS = new LinkedHashMap<>();

    static {
        key("minWorkers", ModelValue.COUNT, 0, s -> s.minWorkers, (s, v) -> s.minWorkers = v,
                "Workers kept running (default: default_workers_per_model)").api("initial_workers");
        key("maxWorkers", ModelValue.COUNT, 0, s -> s.maxWorkers, (s, v) -> s.maxWorkers = v,
                "Most workers a scale may leave running (at least minWorkers)");
        key("batchSize", ModelValue.AT_LEAST_ONE, 1, s -> s.batchSize, (s, v) -> s.batchSize = v,
                "Requests per batch sent to a worker").api("batch_size");
        key("maxBatchDelay", ModelValue.COUNT, 100, s -> s.maxBatchDelay, (s, v) -> s.maxBatchDelay = v,
                "Milliseconds a batch may wait to fill, as dispatchPolicy says").api("max_batch_delay");
        key("dispatchPolicy", ModelValue.oneOf("eager, adaptive or delay", true, "eager", "adaptive", "delay"),
                "adaptive", s -> s.dispatchPolicy, (s, v) -> s.dispatchPolicy = v,
                "How a batch that is not full is sent (docs/batching.md)").api("dispatch_policy");
        key("responseTimeout", ModelValue.COUNT, 120, s -> s.responseTimeout, (s, v) -> s.responseTimeout = v,
                "Seconds a worker may take to answer one batch before it is restarted")
                .api("response_timeout").defaultFrom("default_response_timeout");
        key("startupTimeout", ModelValue.COUNT, 120, s -> s.startupTimeout, (s, v) -> s.startupTimeout = v,
                "Seconds a worker may take to start and load the model")
                .api("startup_timeout").defaultFrom("default_startup_timeout");
        key("maxRetryTimeoutInSec", ModelValue.COUNT, 300, s -> s.maxRetryTimeoutInSec,
                (s, v) -> s.maxRetryTimeoutInSec = v, "Seconds a failing worker is restarted before it is given up");
        key("clientTimeoutInMills", ModelValue.COUNT, 0, s -> s.clientTimeoutInMills,
                (s, v) -> s.clientTimeoutInMills = v,
                "Milliseconds a request may wait in the queue, then 503 instead of running (0 = no limit)");
        key("parallelType", ModelValue.oneOf("one of pp, tp, pptp, custom", false, "", "pp", "tp", "pptp", "custom"),
                "", s -> s.parallelType, (s, v) -> s.parallelType = v,
                "Distributed workers started with torchrun (docs/distributed.md)");
        key("parallelLevel", ModelValue.COUNT, 0, s -> s.parallelLevel, (s, v) -> s.parallelLevel = v,
                "Ranks per distributed worker (torchrun's nproc-per-node)");
        // nproc-per-node is checked against parallelLevel once every layer is applied
        // (SettingsResolver, via TorchrunOptions.parse), then becomes parallelLevel
        key("torchrun", ModelValue.MAPPING, Map.of(), s -> s.torchrun, (s, v) -> s.torchrun = v,
                "torchrun options for distributed workers").shown(Shown.HIDDEN);
        key("deviceType", ModelValue.oneOf("cpu or gpu", true, "cpu", "gpu", "neuron"), "cpu",
                s -> s.deviceType, (s, v) -> s.deviceType = v, "Device of the workers (default gpu when there are GPUs)");
        key("deviceIds", ModelValue.INT_LIST, List.of(), s -> s.deviceIds, (s, v) -> s.deviceIds = v,
                "Devices the workers may use (default: all)")
                .shownValue(s -> s.deviceIds.isEmpty() ? null : s.deviceIds);
        key("continuousBatching", ModelValue.FLAG, false, s -> s.continuousBatching,
                (s, v) -> s.continuousBatching = v,
                "Requests join the worker's running generation between steps (docs/llm.md)")
                .shownValue(ModelSettings::joinsRunningBatch).toWorker(ModelSettings::joinsRunningBatch)
                .api("continuous_batching");
        key("asyncCommunication", ModelValue.FLAG, false, s -> s.asyncCommunication,
                (s, v) -> s.asyncCommunication = v, "TorchServe's name for continuousBatching; the same in tserve")
                .shown(Shown.HIDDEN).notForWorker();
        key("useJobTicket", ModelValue.FLAG, false, s -> s.useJobTicket, (s, v) -> s.useJobTicket = v,
                "Accept a request only when a worker can take it now, else 503 (never queue it)");
        key("useVenv", ModelValue.FLAG, false, s -> s.useVenv, (s, v) -> s.useVenv = v,
                "Workers run in a virtual environment of their own, made at registration");
        key("sequenceBatching", ModelValue.FLAG, false, s -> s.sequenceBatching, (s, v) -> s.sequenceBatching = v,
                "Stateful sequences: a sequence's requests go to one worker, in order").shownAs("stateful");
        key("sequenceMaxIdleMSec", ModelValue.COUNT, 0, s -> s.sequenceMaxIdleMSec,
                (s, v) -> s.sequenceMaxIdleMSec = v, "Milliseconds an idle sequence keeps its worker (> 0 if stateful)");
        key("sequenceTimeoutMSec", ModelValue.COUNT, 0, s -> s.sequenceTimeoutMSec,
                (s, v) -> s.sequenceTimeoutMSec = v, "Milliseconds a sequence may live in all (0 = no limit)");
        key("maxNumSequence", ModelValue.COUNT, 0, s -> s.maxNumSequence, (s, v) -> s.maxNumSequence = v,
                "Sequences open at once (0 = batchSize × maxWorkers)")
                .shownValue(s -> s.sequenceBatching ? s.sequenceLimit() : 0).toWorker(ModelSettings::sequenceLimit);
        key("maxSequenceJobQueueSize", ModelValue.COUNT, 1, s -> s.maxSequenceJobQueueSize,
                (s, v) -> s.maxSequenceJobQueueSize = v, "Requests of one sequence that may wait behind the one running")
                .shownValue(s -> s.sequenceBatching ? s.maxSequenceJobQueueSize : 0);
        // tserve's additions: describe shows them after TorchServe's loadedAtStartup
        key("preprocessWorkers", ModelValue.COUNT, 0, s -> s.preprocessWorkers, (s, v) -> s.preprocessWorkers = v,
                "Processes of the worker's preprocess pool (0 = none; docs/pipelines.md)")
                .api("preprocess_workers").shown(Shown.TSERVE);
        key("postprocessInPool", ModelValue.FLAG, false, s -> s.postprocessInPool, (s, v) -> s.postprocessInPool = v,
                "Postprocess runs in the preprocess pool too").api("postprocess_in_pool").shown(Shown.TSERVE);
        key("maxBatchesInFlight", ModelValue.COUNT, 0, s -> s.maxBatchesInFlight, (s, v) -> s.maxBatchesInFlight = v,
                "Batches a worker may have in flight (0 = 1, or preprocessWorkers + 2 with a pool)")
                .shown(Shown.TSERVE).shownValue(ModelSettings::inFlightLimit).toWorker(ModelSettings::inFlightLimit);
        key("jobQueueSize", ModelValue.POSITIVE_OR_KEEP, 100, s -> s.jobQueueSize, (s, v) -> s.jobQueueSize = v,
                "Requests the model's queue holds; a full queue answers 503")
                .shown(Shown.TSERVE).defaultFrom("job_queue_size");

        for (String section : new String[] {"handler", "pippy", "deepspeed", "tp", "accelerate", "pt2",
            "micro_batching", "mb_parallelism", "dali", "redis"}) {
            NOT_SETTINGS.put(section, "a section read by the handler, passed to the worker as is");
        }
        NOT_SETTINGS.put("defaultVersion", "config.properties models JSON: the default version");
        NOT_SETTINGS.put("marName", "config.properties models JSON: the archive");
        NOT_SETTINGS.put("runtimeType", "config.properties models JSON: the runtime");
    }

    private ModelKeys() {
    }

    private static <T> ModelKey<T> key(String name, ModelValue<T> value, T def, Function<ModelSettings, T> get,
                                       BiConsumer<ModelSettings, T> set, String doc) {
        ModelKey<T> k = new ModelKey<>(name, value, def, get, set, doc);
        KEYS.put(name, k);
        return k;
    }

    /** The setting of that name, or null. */
    public static ModelKey<?> get(String name) {
        return KEYS.get(name);
    }

    /** The settings the management API's register call takes as parameters ({@code api(...)}), in declaration order. */
    public static List<ModelKey<?>> apiKeys() {
        return KEYS.values().stream().filter(k -> k.apiParam != null).toList();
    }

    /** All settings in declaration order. */
    public static Collection<ModelKey<?>> all() {
        return Collections.unmodifiableCollection(KEYS.values());
    }

    /** Keys that are not settings but belong in a layer (handler sections, models JSON fields), with why. */
    public static Map<String, String> notSettings() {
        return Collections.unmodifiableMap(NOT_SETTINGS);
    }

    /** What describe shows of {@code s} in one part, in declaration order. */
    public static Map<String, Object> describe(ModelSettings s, Shown part) {
        Map<String, Object> out = new LinkedHashMap<>();
        for (ModelKey<?> k : KEYS.values()) {
            Object v = k.shown == part ? k.described(s) : null;
            if (v != null) {
                out.put(k.shownAs, v);
            }
        }
        return out;
    }
}
