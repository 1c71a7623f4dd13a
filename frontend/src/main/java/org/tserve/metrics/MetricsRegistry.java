package org.tserve.metrics;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.logging.log4j.Logger;
import org.tserve.util.Logging;

/**
 * The server's metrics: frontend events (requests, latencies, worker loads, system metrics) and
 * handler metrics from METRICS frames, recorded as metrics.yaml declares them, and either kept
 * as Prometheus series (scraped through {@link #scrape}) or written as TorchServe log lines,
 * depending on {@code metrics_mode}. One instance per server, reachable through {@link #get()}.
 * Metrics not declared in metrics.yaml are not recorded (handler metrics are, on the fly, with
 * {@code model_metrics_auto_detect=true}).
 *
 * <p>Why one class of ~430 lines: the frontend events and the handler metrics of METRICS frames
 * go through the same emission cache ({@code resolve}/{@code emit}, per-model series resolved once
 * and read without locks on the request path); a second class would have to expose that cache.
 */
public final class MetricsRegistry {
    private static final Logger LOG = Logging.logger(MetricsRegistry.class);

    public static final String REQUESTS_TOTAL = "ts_inference_requests_total";
    public static final String INFERENCE_LATENCY = "ts_inference_latency_microseconds";
    public static final String QUEUE_LATENCY = "ts_queue_latency_microseconds";
    private static final List<String> TS_DIMS = Arrays.asList("model_name", "model_version", "hostname");
    private static final Set<String> LEGACY_NAMES =
        new HashSet<>(Arrays.asList(REQUESTS_TOTAL, INFERENCE_LATENCY, QUEUE_LATENCY));

    /** A metric that is not declared, or has nowhere to go (before {@code global}: its constructor uses it). */
    private static final Emission NONE = new Emission(null, null, null, null);

    private static volatile MetricsRegistry global = new MetricsRegistry(
        MetricsConfig.parse("", "(none)"), MetricsMode.LOG, localHostname(), false, false);

    private final MetricsConfig config;
    private final MetricsMode mode;
    private final String hostname;
    private final boolean autoDetect;
    private final MetricLogSink tsLog;
    private final MetricLogSink modelLog;
    private final Map<String, MetricFamily> tsFamilies = new LinkedHashMap<>();
    private final Map<String, MetricFamily> modelFamilies = new ConcurrentHashMap<>();
    private final Map<String, MetricSpec> detected = new ConcurrentHashMap<>();
    private final Set<String> warned = ConcurrentHashMap.newKeySet();
    private final Map<String, Map<String, Emission[]>> modelCache = new ConcurrentHashMap<>();
    private final AtomicInteger cachedModels = new AtomicInteger();
    private final Emission requests2xx;
    private final Emission requests4xx;
    private final Emission requests5xx;
    private final Emission queueTime;
    private final Emission workerThreadTime;

    /**
     * @param logLines write metric log lines (TS_METRICS / MODEL_METRICS loggers); false = Prometheus only
     * @param autoDetect register undeclared handler metrics on the fly
     */
    public MetricsRegistry(MetricsConfig config, MetricsMode mode, String hostname, boolean logLines, boolean autoDetect) {
        this.config = config;
        this.mode = mode;
        this.hostname = hostname;
        this.autoDetect = autoDetect;
        // A log config can turn the TS_METRICS / MODEL_METRICS loggers off: then no lines, and no cost to format them
        // (each sink checks its logger's level per line).
        this.tsLog = logLines ? new MetricLogSink(Logging.TS_METRICS) : null;
        this.modelLog = logLines ? new MetricLogSink(Logging.MODEL_METRICS) : null;
        for (MetricSpec s : config.tsMetrics().values()) {
            if (toPrometheus(s.name)) {
                tsFamilies.put(s.name, new MetricFamily(s));
            }
        }
        if (mode == MetricsMode.LEGACY) {
            for (String n : new String[] {REQUESTS_TOTAL, INFERENCE_LATENCY, QUEUE_LATENCY}) {
                tsFamilies.computeIfAbsent(n, k -> new MetricFamily(new MetricSpec(k,
                    k.equals(REQUESTS_TOTAL) ? "Count" : "Microseconds", MetricType.COUNTER, TS_DIMS)));
            }
        }
        if (mode == MetricsMode.PROMETHEUS) {
            for (MetricSpec s : config.modelMetrics().values()) {
                if (!tsFamilies.containsKey(s.name)) {
                    modelFamilies.put(s.name, new MetricFamily(s, withHostname(s)));
                }
            }
        }
        Map<String, String> host = hostContext();
        requests2xx = resolve("Requests2XX", host);
        requests4xx = resolve("Requests4XX", host);
        requests5xx = resolve("Requests5XX", host);
        queueTime = resolve("QueueTime", host);
        workerThreadTime = resolve("WorkerThreadTime", host);
    }

    /** The server's registry (a do-nothing one until {@link #install} is called). */
    public static MetricsRegistry get() {
        return global;
    }

    /** Makes {@code r} the server's registry. */
    public static void install(MetricsRegistry r) {
        global = r;
    }

    public MetricsMode mode() {
        return mode;
    }

    public String hostname() {
        return hostname;
    }

    public MetricsConfig config() {
        return config;
    }

    // ---------------------------------------------------------------- frontend events

    /** An inference request was parsed (before queueing; 503s count too). Null/empty version = "default". */
    public void requestReceived(String model, String version) {
        emit(modelEmissions(model, version)[0], 1, 0);
    }

    /** A response with this HTTP status (or the gRPC call's equivalent) was sent. */
    public void responseSent(int status) {
        emit(status >= 500 ? requests5xx : status >= 400 ? requests4xx : requests2xx, 1, 0);
    }

    /** An inference job completed: arrival→response and arrival→batched, in microseconds. */
    public void inferenceCompleted(String model, String version, long latencyMicros, long queueMicros) {
        Emission[] e = modelEmissions(model, version);
        emit(e[1], latencyMicros, 0);
        if (queueMicros >= 0) {
            emit(e[2], queueMicros, 0);
            emit(queueTime, queueMicros, 3);   // QueueTime is in milliseconds
        }
    }

    /** Time a worker thread spent on a batch outside the backend, in milliseconds. */
    public void workerThreadTime(double millis) {
        emitFrontend("WorkerThreadTime", millis, hostContext());
    }

    /** Time a worker thread spent on a batch outside the backend, in nanoseconds (recorded in milliseconds). */
    public void workerThreadNanos(long nanos) {
        emit(workerThreadTime, nanos, 6);
    }

    /** A worker ({@code W-<port>-<model>_<version>}) loaded its model in this many milliseconds. */
    public void workerLoaded(String workerName, long millis) {
        Map<String, String> ctx = hostContext();
        ctx.put("WorkerName", workerName);
        emitFrontend("WorkerLoadTime", millis, ctx);
    }

    /** A system metric (CPUUtilization, MemoryUsed, GPUUtilization, ...); deviceId null for host metrics. */
    public void systemMetric(String name, double value, String deviceId) {
        Map<String, String> ctx = hostContext();
        if (deviceId != null) {
            ctx.put("DeviceId", deviceId);
        }
        emitFrontend(name, value, ctx);
    }

    /** True when {@code name} is declared in ts_metrics (or built in for legacy mode). */
    public boolean declares(String name) {
        return config.tsMetrics().containsKey(name) || tsFamilies.containsKey(name);
    }

    private Map<String, String> hostContext() {
        Map<String, String> ctx = new HashMap<>();
        ctx.put("Level", "Host");
        ctx.put("Hostname", hostname);
        ctx.put("hostname", hostname);
        return ctx;
    }

    private Map<String, String> modelContext(String model, String version) {
        Map<String, String> ctx = hostContext();
        String v = version == null || version.isEmpty() ? "default" : version;
        ctx.put("model_name", model == null ? "" : model);
        ctx.put("model_version", v);
        ctx.put("ModelName", model == null ? "" : model);
        return ctx;
    }

    private boolean toPrometheus(String name) {
        return mode == MetricsMode.PROMETHEUS || (mode == MetricsMode.LEGACY && LEGACY_NAMES.contains(name));
    }

    /** A metric of a context that is not cached (system metrics, worker loads): resolved per call. */
    private void emitFrontend(String name, double value, Map<String, String> ctx) {
        Emission e = resolve(name, ctx);
        if (e.family != null) {
            e.family.record(e.labelValues, value);
        } else if (e.head != null) {
            tsLog.write(MetricValue.append(new StringBuilder(96).append(e.head), value).append(e.dimensions)
                .append(",timestamp:").append(nowSeconds()).toString());
        }
    }

    /**
     * One frontend metric in one context (host, or model and version), resolved once: the
     * Prometheus series it adds to, or the parts of its log line around the value. The request
     * path used to build a map of dimensions and a whole line per metric and request.
     */
    private static final class Emission {
        final MetricFamily family;
        final List<String> labelValues;
        final String head;
        final String dimensions;
        /** Created on the first value, so that a scrape shows no series nothing was recorded in. */
        volatile MetricFamily.Series series;

        Emission(MetricFamily family, List<String> labelValues, String head, String dimensions) {
            this.family = family;
            this.labelValues = labelValues;
            this.head = head;
            this.dimensions = dimensions;
        }
    }

    /** Model/version pairs whose emissions are kept (requests for unknown models count too). */
    private static final int MAX_CACHED_MODELS = 1024;

    private Emission resolve(String name, Map<String, String> ctx) {
        MetricFamily fam = tsFamilies.get(name);
        MetricSpec spec = fam != null ? fam.spec() : config.tsMetrics().get(name);
        if (spec == null) {
            return NONE;
        }
        List<String> values = new ArrayList<>(spec.dimensions.size());
        Map<String, String> dims = new LinkedHashMap<>();
        for (String d : spec.dimensions) {
            String v = ctx.getOrDefault(d, "");
            values.add(v);
            dims.put(d, v);
        }
        if (fam != null) {
            return new Emission(fam, values, null, null);
        }
        if (tsLog == null) {
            return NONE;
        }
        return new Emission(null, null, MetricLogLine.head(name, spec.unit), MetricLogLine.dimensions(dims, hostname));
    }

    /** Records {@code n / 10^scale} (scale 0, 3 or 6). */
    private void emit(Emission e, long n, int scale) {
        if (e.family != null) {
            MetricFamily.Series s = e.series;
            if (s == null) {
                s = e.family.series(e.labelValues);   // idempotent: racing threads get the same series
                e.series = s;
            }
            e.family.record(s, MetricValue.value(n, scale));
        } else if (e.head != null) {
            tsLog.write(e.head, n, scale, e.dimensions);
        }
    }

    /** ts_inference_requests_total, ts_inference_latency_microseconds, ts_queue_latency_microseconds of a model version. */
    private Emission[] modelEmissions(String model, String version) {
        String m = model == null ? "" : model;
        String v = version == null || version.isEmpty() ? "default" : version;
        Map<String, Emission[]> byVersion = modelCache.get(m);
        Emission[] e = byVersion == null ? null : byVersion.get(v);
        if (e != null) {
            return e;
        }
        Map<String, String> ctx = modelContext(m, v);
        e = new Emission[] {resolve(REQUESTS_TOTAL, ctx), resolve(INFERENCE_LATENCY, ctx), resolve(QUEUE_LATENCY, ctx)};
        if (cachedModels.get() < MAX_CACHED_MODELS) {
            Emission[] fresh = e;
            Emission[] prev = modelCache.computeIfAbsent(m, k -> new ConcurrentHashMap<>()).putIfAbsent(v, fresh);
            if (prev == null) {
                cachedModels.incrementAndGet();
            } else {
                e = prev;
            }
        }
        return e;
    }

    // ---------------------------------------------------------------- handler metrics

    /**
     * Records the METRICS frame of a batch (protocol.md: a json list of
     * {@code {name, unit, value, type, dimensions, requestId}}). Bad records are skipped with one
     * warning naming the worker and model; the frame never fails the batch.
     */
    public void backendMetrics(String model, String worker, String json) {
        JsonElement root;
        try {
            root = org.tserve.util.Json.parse(json);   // bounded nesting: records are printed in warnings
        } catch (JsonParseException e) {
            warnOnce("frame:" + worker, "Worker " + worker + " of model " + model
                    + " sent a METRICS frame that is not JSON; its metrics are dropped");
            return;
        }
        if (!root.isJsonArray()) {
            warnOnce("frame:" + worker, "Worker " + worker + " of model " + model
                    + " sent a METRICS frame that is not a JSON list; its metrics are dropped");
            return;
        }
        for (JsonElement e : (JsonArray) root) {
            try {
                backendRecord(model, worker, e.getAsJsonObject());
            } catch (RuntimeException ex) {
                warnOnce("record:" + worker, "Worker " + worker + " of model " + model
                        + " sent a malformed metric record " + e + ": " + ex.getMessage());
            }
        }
    }

    private void backendRecord(String model, String worker, JsonObject r) {
        String name = r.get("name").getAsString();
        double value = r.get("value").getAsDouble();
        String unit = r.has("unit") && !r.get("unit").isJsonNull() ? r.get("unit").getAsString() : "";
        MetricType type = MetricType.parse(r.has("type") ? r.get("type").getAsString() : "counter");
        if (type == null) {
            throw new IllegalArgumentException("type must be counter, gauge or histogram");
        }
        Map<String, String> dims = new LinkedHashMap<>();
        JsonElement d = r.get("dimensions");
        if (d != null && d.isJsonObject()) {
            for (Map.Entry<String, JsonElement> de : d.getAsJsonObject().entrySet()) {
                dims.put(de.getKey(), de.getValue().isJsonNull() ? "" : de.getValue().getAsString());
            }
        } else if (d != null && d.isJsonArray()) {
            for (JsonElement de : d.getAsJsonArray()) {
                JsonObject o = de.getAsJsonObject();
                dims.put(o.get("name").getAsString(), o.get("value").getAsString());
            }
        }
        String requestId = r.has("requestId") && !r.get("requestId").isJsonNull() ? r.get("requestId").getAsString() : "";
        MetricSpec declared = config.modelMetrics().get(name);
        if (mode != MetricsMode.PROMETHEUS) {
            // TorchServe's LogMetric: a declared metric is written with the yaml's unit (HandlerTime.ms) and
            // dimension names in the yaml's order; an undeclared one only with model_metrics_auto_detect
            if (declared == null && !autoDetect) {
                warnUndeclared(name, worker, model);
            } else if (modelLog != null) {
                modelLog.write(declared == null
                    ? MetricLogLine.format(name, unit, value, dims, hostname, requestId, nowSeconds())
                    : MetricLogLine.format(name, declared.unit, value, inOrder(declared.dimensions, dims), hostname,
                        requestId, nowSeconds()));
            }
            return;
        }
        MetricFamily fam = modelFamilies.get(name);
        if (fam == null) {
            if (tsFamilies.containsKey(name) || !autoDetect) {
                warnUndeclared(name, worker, model);
                return;
            }
            MetricSpec spec = new MetricSpec(name, unit, type, new ArrayList<>(dims.keySet()));
            fam = modelFamilies.computeIfAbsent(name, k -> new MetricFamily(spec, withHostname(spec)));
            detected.put(name, spec);
        }
        List<String> values = new ArrayList<>();
        for (String l : fam.labelNames()) {
            String v = dims.get(l);
            if (v == null && l.equalsIgnoreCase("hostname")) {
                v = hostname;
            }
            values.add(v == null ? "" : v);
        }
        fam.record(values, value);
    }

    private void warnUndeclared(String name, String worker, String model) {
        warnOnce("undeclared:" + name, "Metric " + name + " from worker " + worker + " of model " + model
                + " is not declared in model_metrics of metrics.yaml; declare it there or set"
                + " model_metrics_auto_detect=true");
    }

    /** The record's dimension values under the declared names, in the declared order (those it has). */
    private static Map<String, String> inOrder(List<String> names, Map<String, String> dims) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String n : names) {
            String v = dims.get(n);
            if (v != null) {
                out.put(n, v);
            }
        }
        return out;
    }

    /**
     * The dimensions with the host's label added: TorchServe's {@code Hostname}, or {@code hostname} for a
     * Prometheus-named metric (no capital letter in its name and dimensions, as {@code llm_*}), so that
     * promtool's snake_case label rule holds for it.
     */
    private static List<String> withHostname(MetricSpec spec) {
        for (String d : spec.dimensions) {
            if (d.equalsIgnoreCase("hostname")) {
                return spec.dimensions;
            }
        }
        List<String> out = new ArrayList<>(spec.dimensions);
        out.add(!spec.dimensions.isEmpty() && lowercase(spec.name) && spec.dimensions.stream().allMatch(MetricsRegistry::lowercase)
                ? "hostname" : "Hostname");
        return out;
    }

    private static boolean lowercase(String s) {
        return s.equals(s.toLowerCase(Locale.ROOT));
    }

    private void warnOnce(String key, String message) {
        if (warned.add(key)) {
            LOG.warn(message);
        }
    }

    // ---------------------------------------------------------------- exposition

    /** Prometheus text for GET /metrics, filtered by {@code name[]} (empty = all). Empty in log mode. */
    public String scrape(Set<String> names) {
        return PrometheusWriter.write(families(names), null);
    }

    /**
     * The exposed families, frontend ones first, then the handlers' in metrics.yaml's order (auto-detected
     * ones after, by name), filtered by {@code name[]} (null or empty = all). None in log mode.
     */
    public List<MetricFamily> families(Set<String> names) {
        List<MetricFamily> all = new ArrayList<>(tsFamilies.values());
        List<String> model = new ArrayList<>(modelFamilies.keySet());
        List<String> declared = new ArrayList<>(config.modelMetrics().keySet());
        model.sort((a, b) -> {
            int ia = declared.indexOf(a);
            int ib = declared.indexOf(b);
            ia = ia < 0 ? Integer.MAX_VALUE : ia;
            ib = ib < 0 ? Integer.MAX_VALUE : ib;
            return ia != ib ? Integer.compare(ia, ib) : a.compareTo(b);
        });
        for (String n : model) {
            all.add(modelFamilies.get(n));
        }
        all.removeIf(f -> !PrometheusWriter.selected(f, names));
        return all;
    }

    private static long nowSeconds() {
        return System.currentTimeMillis() / 1000;
    }

    /** This machine's host name (TorchServe's {@code hostname} dimension). */
    public static String localHostname() {
        try {
            return InetAddress.getLocalHost().getHostName();
        } catch (java.io.IOException e) {
            String h = System.getenv("HOSTNAME");
            return h == null || h.isEmpty() ? "localhost" : h;
        }
    }
}
