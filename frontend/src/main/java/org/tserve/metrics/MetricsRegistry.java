package org.tserve.metrics;

import com.google.gson.JsonArray;
import com.google.gson.JsonElement;
import com.google.gson.JsonObject;
import com.google.gson.JsonParseException;
import com.google.gson.JsonParser;
import java.io.File;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.logging.Logger;

/**
 * The server's metrics: frontend events (requests, latencies, worker loads, system metrics) and
 * handler metrics from METRICS frames, recorded as metrics.yaml declares them, and either kept
 * as Prometheus series (scraped through {@link #scrape}) or written as TorchServe log lines,
 * depending on {@code metrics_mode}. One instance per server, reachable through {@link #get()}.
 * Metrics not declared in metrics.yaml are not recorded (handler metrics are, on the fly, with
 * {@code model_metrics_auto_detect=true}).
 */
public final class MetricsRegistry {
    private static final Logger LOG = Logger.getLogger(MetricsRegistry.class.getName());

    public static final String REQUESTS_TOTAL = "ts_inference_requests_total";
    public static final String INFERENCE_LATENCY = "ts_inference_latency_microseconds";
    public static final String QUEUE_LATENCY = "ts_queue_latency_microseconds";
    private static final List<String> TS_DIMS = Arrays.asList("model_name", "model_version", "hostname");
    private static final Set<String> LEGACY_NAMES =
        new HashSet<>(Arrays.asList(REQUESTS_TOTAL, INFERENCE_LATENCY, QUEUE_LATENCY));

    private static volatile MetricsRegistry global = new MetricsRegistry(
        MetricsConfig.parse("", "(none)"), MetricsMode.LOG, localHostname(), null, false);

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

    /**
     * @param logDir where ts_metrics.log and model_metrics.log go; null = no log files
     * @param autoDetect register undeclared handler metrics on the fly
     */
    public MetricsRegistry(MetricsConfig config, MetricsMode mode, String hostname, File logDir, boolean autoDetect) {
        this.config = config;
        this.mode = mode;
        this.hostname = hostname;
        this.autoDetect = autoDetect;
        this.tsLog = logDir == null ? null : new MetricLogSink(new File(logDir, "ts_metrics.log"));
        this.modelLog = logDir == null ? null : new MetricLogSink(new File(logDir, "model_metrics.log"));
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
                    modelFamilies.put(s.name, new MetricFamily(s, withHostname(s.dimensions)));
                }
            }
        }
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
        emitFrontend(REQUESTS_TOTAL, 1, modelContext(model, version));
    }

    /** A response with this HTTP status (or the gRPC call's equivalent) was sent. */
    public void responseSent(int status) {
        String name = status >= 500 ? "Requests5XX" : status >= 400 ? "Requests4XX" : "Requests2XX";
        emitFrontend(name, 1, hostContext());
    }

    /** An inference job completed: arrival→response and arrival→batched, in microseconds. */
    public void inferenceCompleted(String model, String version, long latencyMicros, long queueMicros) {
        Map<String, String> ctx = modelContext(model, version);
        emitFrontend(INFERENCE_LATENCY, latencyMicros, ctx);
        if (queueMicros >= 0) {
            emitFrontend(QUEUE_LATENCY, queueMicros, ctx);
            emitFrontend("QueueTime", queueMicros / 1000.0, hostContext());
        }
    }

    /** Time a worker thread spent on a batch outside the backend, in milliseconds. */
    public void workerThreadTime(double millis) {
        emitFrontend("WorkerThreadTime", millis, hostContext());
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

    private void emitFrontend(String name, double value, Map<String, String> ctx) {
        MetricFamily fam = tsFamilies.get(name);
        MetricSpec spec = fam != null ? fam.spec() : config.tsMetrics().get(name);
        if (spec == null) {
            return;
        }
        List<String> values = new ArrayList<>(spec.dimensions.size());
        Map<String, String> dims = new LinkedHashMap<>();
        for (String d : spec.dimensions) {
            String v = ctx.getOrDefault(d, "");
            values.add(v);
            dims.put(d, v);
        }
        if (fam != null) {
            fam.record(values, value);
        } else if (tsLog != null) {
            tsLog.write(MetricLogLine.format(name, spec.unit, value, dims, hostname, null, nowSeconds()));
        }
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
            root = JsonParser.parseString(json);
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
        if (mode != MetricsMode.PROMETHEUS) {
            if (modelLog != null) {
                modelLog.write(MetricLogLine.format(name, unit, value, dims, hostname, requestId, nowSeconds()));
            }
            return;
        }
        MetricFamily fam = modelFamilies.get(name);
        if (fam == null) {
            if (tsFamilies.containsKey(name) || !autoDetect) {
                warnOnce("undeclared:" + name, "Metric " + name + " from worker " + worker + " of model " + model
                        + " is not declared in model_metrics of metrics.yaml; declare it there or set"
                        + " model_metrics_auto_detect=true");
                return;
            }
            MetricSpec spec = new MetricSpec(name, unit, type, new ArrayList<>(dims.keySet()));
            fam = modelFamilies.computeIfAbsent(name, k -> new MetricFamily(spec, withHostname(spec.dimensions)));
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

    private static List<String> withHostname(List<String> dims) {
        for (String d : dims) {
            if (d.equalsIgnoreCase("hostname")) {
                return dims;
            }
        }
        List<String> out = new ArrayList<>(dims);
        out.add("Hostname");
        return out;
    }

    private void warnOnce(String key, String message) {
        if (warned.add(key)) {
            LOG.warning(message);
        }
    }

    // ---------------------------------------------------------------- exposition

    /** Prometheus text for GET /metrics, filtered by {@code name[]} (empty = all). Empty in log mode. */
    public String scrape(Set<String> names) {
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
        return PrometheusWriter.write(all, names == null ? Collections.emptySet() : names);
    }

    /** Closes the log files. */
    public void close() {
        if (tsLog != null) {
            tsLog.close();
        }
        if (modelLog != null) {
            modelLog.close();
        }
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
